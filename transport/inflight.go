package transport

import (
	"sync"
)

// canceler is what the registry cancels: an upstream exchange's
// *upstream.Cancel, or a request waiting for admission.
type canceler interface{ Cancel() }

// registry tracks the cancel handle of every in-flight upstream exchange so
// that a client hang-up (by slot) or a forced shutdown (all) can abort them.
// It is sharded so that registering is not one lock for every request.
type registry struct {
	shards [registryShards]regShard
	next   uint32
	mu     sync.Mutex
}

const registryShards = 32

type regShard struct {
	mu    sync.Mutex
	slots []regSlot
	free  []uint32
	_     [32]byte // keep shards on separate cache lines
}

type regSlot struct {
	gen    uint32
	cancel canceler
}

// regToken identifies a registration.
type regToken struct {
	shard uint32
	idx   uint32
	gen   uint32
}

func newRegistry() *registry { return &registry{} }

func (r *registry) register(c canceler, hint uint32) regToken {
	si := hint % registryShards
	s := &r.shards[si]
	s.mu.Lock()
	var idx uint32
	if n := len(s.free); n > 0 {
		idx = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		idx = uint32(len(s.slots))
		s.slots = append(s.slots, regSlot{})
	}
	sl := &s.slots[idx]
	sl.gen++
	sl.cancel = c
	t := regToken{shard: si, idx: idx, gen: sl.gen}
	s.mu.Unlock()
	return t
}

func (r *registry) unregister(t regToken) {
	s := &r.shards[t.shard]
	s.mu.Lock()
	if int(t.idx) < len(s.slots) && s.slots[t.idx].gen == t.gen && s.slots[t.idx].cancel != nil {
		s.slots[t.idx].cancel = nil
		s.free = append(s.free, t.idx)
	}
	s.mu.Unlock()
}

// cancel aborts the exchange registered under t, if it is still the same.
// Cancel runs under the shard lock: unregister takes the same lock, so a
// handle is never cancelled after its request has moved on and been reused.
func (r *registry) cancel(t regToken) bool {
	if t.shard >= registryShards {
		return false
	}
	s := &r.shards[t.shard]
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(t.idx) < len(s.slots) && s.slots[t.idx].gen == t.gen {
		if c := s.slots[t.idx].cancel; c != nil {
			c.Cancel()
			return true
		}
	}
	return false
}

// cancelAll aborts every registered exchange and reports how many.
func (r *registry) cancelAll() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for j := range s.slots {
			if c := s.slots[j].cancel; c != nil {
				c.Cancel()
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// count returns the number of registrations (for health).
func (r *registry) count() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.slots) - len(s.free)
		s.mu.Unlock()
	}
	return n
}
