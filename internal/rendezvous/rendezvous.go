// Package rendezvous picks one owner for a key among a set of members by
// rendezvous (highest-random-weight) hashing: every member that knows the
// same member list picks the same owner without asking anyone, and when a
// member joins or leaves only the keys it wins or held move (about 1/n of
// them), not all of them as with a hash modulo n.
//
// Cluster mode uses it for the quota pollers: one member per connection
// polls the provider's usage API (actors/quota, docs/cluster.md).
package rendezvous

// Owner returns the member of ids that owns key: the one whose weight
// hash(id, key) is the highest (ties, which need a 64-bit collision, go
// to the smaller id so the answer never depends on the order of ids).
// It returns "" when ids is empty.
func Owner(key string, ids []string) string {
	best, bestW := "", uint64(0)
	for _, id := range ids {
		w := weight(id, key)
		if best == "" || w > bestW || (w == bestW && id < best) {
			best, bestW = id, w
		}
	}
	return best
}

// weight is FNV-1a over id, a separator and key, finished with
// splitmix64's mixer: FNV alone leaves keys that differ in their last
// bytes with weights close together, which skews the owners of
// connection names such as "p/c1", "p/c2".
func weight(id, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
