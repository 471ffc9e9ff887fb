package ingest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

func key(s string) [20]byte {
	var k [20]byte
	copy(k[:], s)
	return k
}

// sim drives a fairQueue against a byte budget on a fake clock: every
// grant holds its bytes for a service time, keys keep a fixed number of
// requests queued (closed loop), and the simulation records what each key
// was granted and how long each request waited.
type sim struct {
	t       *testing.T
	q       *fairQueue
	now     time.Time
	free    int64
	running []running
	keys    map[[20]byte]*simKey
	order   [][20]byte
}

type running struct {
	until time.Time
	bytes int64
}

type simKey struct {
	backlog int                      // requests kept queued
	size    func(r *rand.Rand) int64 // body size of the next request
	service func(bytes int64) time.Duration
	queued  int
	granted int
	bytes   int64
	maxWait time.Duration
	waits   []time.Duration
	rng     *rand.Rand
	enq     map[*waiter]time.Time
}

func newSim(t *testing.T, budget int64, weight func([20]byte) int64) *sim {
	return &sim{t: t, q: newFairQueue(256*kib, simStarve, weight), now: time.Unix(1000, 0), free: budget, keys: map[[20]byte]*simKey{}}
}

func (s *sim) addKey(name string, backlog int, size func(*rand.Rand) int64, service func(int64) time.Duration) *simKey {
	k := &simKey{backlog: backlog, size: size, service: service, rng: rand.New(rand.NewPCG(uint64(len(s.keys)+1), 7)), enq: map[*waiter]time.Time{}}
	s.keys[key(name)] = k
	s.order = append(s.order, key(name))
	return k
}

func (s *sim) fill() {
	for _, name := range s.order {
		k := s.keys[name]
		for k.queued < k.backlog {
			w := &waiter{key: name, bytes: k.size(k.rng), deadline: s.now.Add(time.Hour)}
			s.q.push(w)
			k.enq[w] = s.now
			k.queued++
		}
	}
}

func (s *sim) take(w *waiter) bool {
	if w.bytes > s.free {
		return false
	}
	s.free -= w.bytes
	return true
}

func (s *sim) grant(w *waiter) {
	k := s.keys[w.key]
	wait := s.now.Sub(k.enq[w])
	delete(k.enq, w)
	k.queued--
	k.granted++
	k.bytes += w.bytes
	k.waits = append(k.waits, wait)
	k.maxWait = max(k.maxWait, wait)
	s.running = append(s.running, running{until: s.now.Add(k.service(w.bytes)), bytes: w.bytes})
}

// run advances the clock in 1 ms steps for d.
func (s *sim) run(d time.Duration) {
	end := s.now.Add(d)
	for s.now.Before(end) {
		kept := s.running[:0]
		for _, r := range s.running {
			if !s.now.Before(r.until) {
				s.free += r.bytes
			} else {
				kept = append(kept, r)
			}
		}
		s.running = kept
		s.fill()
		s.q.dispatch(s.now, s.take, s.grant)
		s.now = s.now.Add(time.Millisecond)
	}
}

func fixed(n int64) func(*rand.Rand) int64 { return func(*rand.Rand) int64 { return n } }

func perMiB(d time.Duration) func(int64) time.Duration {
	return func(b int64) time.Duration { return max(time.Duration(b*int64(d)/mib), time.Millisecond) }
}

func constant(d time.Duration) func(int64) time.Duration {
	return func(int64) time.Duration { return d }
}

func TestSmallCallerNotStarvedBehindLargeCaller(t *testing.T) {
	s := newSim(t, 16*mib, nil)
	big := s.addKey("big", 4, fixed(10*mib), constant(200*time.Millisecond))
	small := s.addKey("small", 4, fixed(1*kib), constant(20*time.Millisecond))
	s.run(10 * time.Second)
	t.Logf("small: %d granted, max wait %v; big: %d granted, max wait %v", small.granted, small.maxWait, big.granted, big.maxWait)
	if small.granted < 1000 {
		t.Fatalf("small caller granted only %d requests in 10 s", small.granted)
	}
	// A 1 KiB request waits at most for a reserved big head to fit: one big
	// service time (200 ms) plus the starvation threshold.
	if limit := 200*time.Millisecond + DefaultStarveAfter + 2*time.Millisecond; small.maxWait > limit {
		t.Fatalf("small caller waited up to %v (limit %v)", small.maxWait, limit)
	}
	if big.granted < 30 {
		t.Fatalf("big caller granted only %d requests", big.granted)
	}
}

func TestLargeHeadNotStarvedBySmallCallers(t *testing.T) {
	s := newSim(t, 16*mib, nil)
	// Small callers alone could keep the budget full forever.
	for _, n := range []string{"s1", "s2", "s3"} {
		s.addKey(n, 40, fixed(256*kib), constant(50*time.Millisecond))
	}
	big := s.addKey("big", 1, fixed(10*mib), constant(50*time.Millisecond))
	s.run(5 * time.Second)
	t.Logf("big: %d granted, max wait %v", big.granted, big.maxWait)
	if big.granted < 10 {
		t.Fatalf("10 MiB head granted %d times in 5 s", big.granted)
	}
	// It is passed over for at most the starvation threshold, then waits for
	// the running small requests to finish (one service time).
	if limit := DefaultStarveAfter + 50*time.Millisecond + 5*time.Millisecond; big.maxWait > limit {
		t.Fatalf("10 MiB head waited up to %v (limit %v)", big.maxWait, limit)
	}
}

func TestByteSharesFollowWeights(t *testing.T) {
	cases := []struct {
		name     string
		weights  map[string]int64
		size     map[string]func(*rand.Rand) int64
		backlog  map[string]int
		duration time.Duration
	}{
		{"equal weights, sizes 1 KiB vs 4 MiB", map[string]int64{"a": 1, "b": 1},
			map[string]func(*rand.Rand) int64{"a": fixed(1 * kib), "b": fixed(4 * mib)},
			map[string]int{"a": 6144, "b": 4}, 3 * time.Second},
		{"weights 1:2:4, mixed sizes", map[string]int64{"a": 1, "b": 2, "c": 4},
			map[string]func(*rand.Rand) int64{
				"a": func(r *rand.Rand) int64 { return 256*kib + r.Int64N(2*mib) },
				"b": fixed(512 * kib),
				"c": func(r *rand.Rand) int64 { return 64*kib + r.Int64N(6*mib) },
			},
			map[string]int{"a": 16, "b": 32, "c": 8}, 60 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := func(k [20]byte) int64 {
				for n, x := range c.weights {
					if key(n) == k {
						return x
					}
				}
				return 1
			}
			s := newSim(t, 8*mib, w)
			names := []string{"a", "b", "c"}[:len(c.weights)]
			keys := map[string]*simKey{}
			for _, n := range names {
				// Every key keeps 16 MiB queued (saturating); service time
				// is proportional to bytes, as for an upload.
				keys[n] = s.addKey(n, c.backlog[n], c.size[n], perMiB(40*time.Millisecond))
			}
			s.run(c.duration)
			var total, wsum float64
			for _, n := range names {
				total += float64(keys[n].bytes)
				wsum += float64(c.weights[n])
			}
			for _, n := range names {
				share := float64(keys[n].bytes) / total
				want := float64(c.weights[n]) / wsum
				t.Logf("key %s: byte share %.3f, want %.3f (%d requests, max wait %v)", n, share, want, keys[n].granted, keys[n].maxWait)
				if math.Abs(share-want) > 0.10*want {
					t.Errorf("key %s: byte share %.3f, want %.3f ±10%% (granted %d requests, %d MiB)", n, share, want, keys[n].granted, keys[n].bytes/mib)
				}
			}
		})
	}
}

func TestQueueBookkeeping(t *testing.T) {
	q := newFairQueue(256*kib, DefaultStarveAfter, nil)
	now := time.Unix(0, 0)
	w1 := &waiter{key: key("a"), bytes: 100, deadline: now.Add(time.Second)}
	w2 := &waiter{key: key("a"), bytes: 200, deadline: now.Add(2 * time.Second)}
	w3 := &waiter{key: key("b"), bytes: 300, deadline: now.Add(500 * time.Millisecond)}
	for _, w := range []*waiter{w1, w2, w3} {
		q.push(w)
	}
	if q.n != 3 || q.queuedBytes != 600 || len(q.active) != 2 {
		t.Fatalf("after push: n %d bytes %d lanes %d", q.n, q.queuedBytes, len(q.active))
	}
	if d := q.nextDeadline(); !d.Equal(now.Add(500 * time.Millisecond)) {
		t.Fatalf("next deadline %v", d)
	}
	var expired []*waiter
	q.expire(now.Add(time.Second), func(w *waiter) { expired = append(expired, w) })
	if len(expired) != 2 || q.n != 1 || q.queuedBytes != 200 || len(q.active) != 1 || q.lanes[key("b")] != nil {
		t.Fatalf("after expire: %d expired, n %d bytes %d lanes %d", len(expired), q.n, q.queuedBytes, len(q.active))
	}
	if !q.remove(w2) || q.n != 0 || q.queuedBytes != 0 || len(q.active) != 0 || len(q.lanes) != 0 {
		t.Fatalf("after remove: n %d bytes %d", q.n, q.queuedBytes)
	}
	if q.remove(w2) {
		t.Fatal("removed twice")
	}
	// FIFO within a key; a reserved waiter that times out frees the queue.
	a1 := &waiter{key: key("a"), bytes: 10, deadline: now.Add(time.Hour)}
	a2 := &waiter{key: key("a"), bytes: 10, deadline: now.Add(time.Hour)}
	q.push(a1)
	q.push(a2)
	var order []*waiter
	yes := func(*waiter) bool { return true }
	no := func(*waiter) bool { return false }
	q.dispatch(now, yes, func(w *waiter) { order = append(order, w) })
	if len(order) != 2 || order[0] != a1 || order[1] != a2 {
		t.Fatalf("FIFO order broken: %v", order)
	}
	big := &waiter{key: key("big"), bytes: 1000, deadline: now.Add(time.Second)}
	q.push(big)
	q.dispatch(now, no, func(*waiter) { t.Fatal("granted without capacity") })
	q.dispatch(now.Add(DefaultStarveAfter), no, func(*waiter) {})
	if q.reserved != big {
		t.Fatal("a head passed over for the starvation threshold must be reserved")
	}
	q.expire(now.Add(2*time.Second), func(*waiter) {})
	if q.reserved != nil || q.n != 0 {
		t.Fatal("expired reserved head must release the reservation")
	}
}

var simStarve = DefaultStarveAfter
