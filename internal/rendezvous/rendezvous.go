// Package rendezvous picks one owner for a key among a set of members by
// rendezvous (highest-random-weight) hashing: every member that knows the
// same member list picks the same owner without asking anyone, and when a
// member joins or leaves only the keys it wins or held move (about 1/n of
// them), not all of them as with a hash modulo n.
//
// Cluster mode uses it for the quota pollers: one member per connection
// polls the provider's usage API (actors/quota, docs/cluster.md). Routing
// uses its weighted form (Score) to keep a conversation on one target: a
// session key picks the same target on every node, and a target that
// becomes unusable gives up only its own conversations.
package rendezvous

import "math"

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
	h := (fnvString(offset64, id) ^ 0xff) * prime64
	return mix(fnvString(h, key))
}

// HashString is a 64-bit hash of s (FNV-1a finished with splitmix64's
// mixer), for keys and member names.
func HashString(s string) uint64 { return mix(fnvString(offset64, s)) }

// Combine folds more bytes into a hash made by HashString, so a key built
// from several parts hashes without joining them.
func Combine(h uint64, b []byte) uint64 { return mix(fnv(h, b)) }

// Score is the weight of member (its Hash) for key, for weighted
// rendezvous hashing: -weight/ln(u) with u uniform in (0, 1) from the
// pair's hash, so each member wins the share of keys its weight is of
// the total, and a member's leaving moves only the keys it won.
func Score(key, member uint64, weight int) float64 {
	u := (float64(mix(key^member)>>11) + 0.5) / (1 << 53)
	return -float64(max(weight, 1)) / math.Log(u)
}

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

func fnv(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * prime64
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime64
	}
	return h
}

func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
