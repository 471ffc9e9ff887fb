package edge

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Canceler is what the Registry cancels: an upstream exchange's
// *upstream.Cancel, or a request waiting for admission.
type Canceler interface{ Cancel() }

// Registry tracks the cancel handle of every in-flight upstream exchange so
// that a client hang-up (by slot) or a forced shutdown (all) can abort them.
// It is sharded so that registering is not one lock for every request.
//
// It also arms client hang-up detection lazily: a request is only watched
// (two epoll_ctl syscalls) once it has been in flight for armDelay, so the
// many requests that finish sooner never pay for it. A client that left
// before the arming is still seen, because epoll reports a hang-up that is
// already pending when the socket is added.
type Registry struct {
	shards [registryShards]regShard
	arm    armer
	// asleep is set while the sweep sleeps (nothing registered for a
	// while): the next Register wakes it through wake. An idle gateway
	// then takes no timer wake-ups for the sweep, where a ticking sweep
	// cost it a hundred a second (most of its idle CPU).
	asleep atomic.Bool
	wake   chan struct{}
}

const registryShards = 32

// armDelay is how long a request waits before its client socket is
// watched; with the sweep interval it bounds hang-up detection to well
// under 100 ms.
const armDelay = 10 * time.Millisecond

type regShard struct {
	mu    sync.Mutex
	slots []regSlot
	free  []uint32
	_     [32]byte // keep shards on separate cache lines
}

type regSlot struct {
	gen    uint32
	cancel Canceler
	conn   net.Conn // client connection to watch, nil when not watchable
	since  time.Time
	fd     int // >= 0 while armed
}

// Token identifies a registration; the zero Token is none.
type Token struct {
	shard uint32
	idx   uint32
	gen   uint32
}

// armer arms and disarms hang-up watches; the Registry calls it with the
// shard lock held.
type armer interface {
	arm(conn net.Conn, t Token) (fd int, ok bool)
	disarm(fd int)
}

func newRegistry() *Registry { return &Registry{wake: make(chan struct{}, 1)} }

// Register adds c; conn is the client connection to watch (nil if none).
func (r *Registry) Register(c Canceler, hint uint32, conn net.Conn, now time.Time) Token {
	si := hint % registryShards
	s := &r.shards[si]
	s.mu.Lock()
	var idx uint32
	if n := len(s.free); n > 0 {
		idx = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		idx = uint32(len(s.slots))
		s.slots = append(s.slots, regSlot{fd: -1})
	}
	sl := &s.slots[idx]
	sl.gen++
	sl.cancel, sl.conn, sl.since, sl.fd = c, conn, now, -1
	t := Token{shard: si, idx: idx, gen: sl.gen}
	s.mu.Unlock()
	if conn != nil && r.asleep.Load() && r.asleep.CompareAndSwap(true, false) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return t
}

// Unregister removes the registration t (a stale token is ignored).
func (r *Registry) Unregister(t Token) {
	s := &r.shards[t.shard]
	s.mu.Lock()
	if int(t.idx) < len(s.slots) && s.slots[t.idx].gen == t.gen && s.slots[t.idx].cancel != nil {
		sl := &s.slots[t.idx]
		if sl.fd >= 0 && r.arm != nil {
			r.arm.disarm(sl.fd)
		}
		sl.cancel, sl.conn, sl.fd = nil, nil, -1
		s.free = append(s.free, t.idx)
	}
	s.mu.Unlock()
}

// armDue arms the watch of every request in flight since before cutoff
// and returns how many watchable requests are registered (armed or not).
func (r *Registry) armDue(cutoff time.Time) (watchable int) {
	if r.arm == nil {
		return 0
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for j := range s.slots {
			if sl := &s.slots[j]; sl.cancel != nil && sl.conn != nil {
				watchable++
			}
			sl := &s.slots[j]
			if sl.cancel == nil || sl.conn == nil || sl.fd >= 0 || sl.since.After(cutoff) {
				continue
			}
			if fd, ok := r.arm.arm(sl.conn, Token{shard: uint32(i), idx: uint32(j), gen: sl.gen}); ok {
				sl.fd = fd
			} else {
				sl.conn = nil // not watchable; do not retry every sweep
				watchable--
			}
		}
		s.mu.Unlock()
	}
	return watchable
}

// sleepAfter is how many sweeps in a row must find nothing to watch
// before the sweep sleeps: a second's worth, so a steady trickle of
// requests keeps it ticking rather than waking it for each one. A
// variable only so that a test can have the sweep sleep at once.
var sleepAfter = int(time.Second / armDelay)

// sleep parks the sweep until a watchable request is registered, or
// stop closes; it returns false on stop. The flag is set before the
// registry is counted again (every registration, watchable or not: one
// without a socket only keeps the sweep ticking a while longer), so a
// Register that the count missed saw it set and wakes the sweep.
func (r *Registry) sleep(stop <-chan struct{}) bool {
	r.asleep.Store(true)
	if r.Count() > 0 {
		if r.asleep.CompareAndSwap(true, false) {
			return true
		}
		// A Register took the flag and sent (or is sending) a wake.
	}
	select {
	case <-r.wake:
		return true
	case <-stop:
		return false
	}
}

// cancel aborts the exchange registered under t, if it is still the same.
// Cancel runs under the shard lock: Unregister takes the same lock, so a
// handle is never cancelled after its request has moved on and been reused.
func (r *Registry) cancel(t Token) bool {
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

// CancelAll aborts every registered exchange and reports how many.
func (r *Registry) CancelAll() int {
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

// Count returns the number of registrations (for health).
func (r *Registry) Count() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.slots) - len(s.free)
		s.mu.Unlock()
	}
	return n
}
