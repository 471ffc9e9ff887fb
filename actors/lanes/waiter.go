package lanes

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/tenant"
)

// waiter is a queued request: the message a handler sends to its lane, and
// the pooled reply channel (capacity 1) it waits on. Exactly one party
// resolves it (the lane: admitted or rejected; the handler: aborted or
// given up), decided by a compare-and-swap on state; the winner resolves
// the gate's waiter count and sends the one reply. The handler and the lane
// each hold a reference; the last to let go returns it to the pool, so a
// lane never sees a recycled waiter.
type waiter struct {
	u     *upstream
	state atomic.Uint64 // generation<<1 | resolved
	refs  atomic.Int32
	ch    chan Reason
	timer *time.Timer

	// Set by the handler before the waiter is sent; read-only afterwards.
	tenant   tenant.ID
	class    admission.Class
	cost     int64
	stream   bool
	seq      uint64
	arrived  time.Time
	deadline time.Time // when the wait ends: the max wait or the caller's deadline
	// callerDeadline is the caller's own deadline (zero: not stated).
	callerDeadline time.Time
	via            *actor.PID

	// retryAfter is set by the lane before it resolves a shed (seconds);
	// grantedAt before it resolves a grant (Unix ns of the gate's take).
	retryAfter int
	grantedAt  int64
}

type (
	atomicLanes = atomic.Pointer[map[tenant.ID]*actor.PID]
	atomicView  = atomic.Pointer[view]
)

var waiterPool sync.Pool

func getWaiter(u *upstream) *waiter {
	w, _ := waiterPool.Get().(*waiter)
	if w == nil {
		w = &waiter{ch: make(chan Reason, 1), timer: time.NewTimer(time.Hour)}
		w.timer.Stop()
	}
	w.u = u
	w.retryAfter = 0
	w.refs.Store(2)
	return w
}

// begin starts a new generation and returns it.
func (w *waiter) begin() uint64 {
	gen := (w.state.Load() >> 1) + 1
	w.state.Store(gen << 1)
	return gen
}

// resolve settles generation gen with r; it reports false when someone
// else already did (or the waiter moved on to another request).
func (w *waiter) resolve(gen uint64, r Reason) bool {
	if !w.state.CompareAndSwap(gen<<1, gen<<1|1) {
		return false
	}
	w.u.gate.Unwait(w.class)
	w.ch <- r
	return true
}

// resolveCurrent settles the current generation; only a holder of a
// reference may call it.
func (w *waiter) resolveCurrent(r Reason) bool { return w.resolve(w.state.Load()>>1, r) }

// settle resolves the current generation with what the handler reads
// after it: the Retry-After of a refusal, or when a grant took the cost.
// The fields are written only by the winner of the resolution, before the
// reply that publishes them; a waiter its handler already settled (it
// gave up) is not touched.
func (w *waiter) settle(r Reason, retry int, grantedAt int64) bool {
	gen := w.state.Load() >> 1
	if !w.state.CompareAndSwap(gen<<1, gen<<1|1) {
		return false
	}
	w.retryAfter, w.grantedAt = retry, grantedAt
	w.u.gate.Unwait(w.class)
	w.ch <- r
	return true
}

// resolved reports whether the current generation is settled.
func (w *waiter) resolved() bool { return w.state.Load()&1 == 1 }

func (w *waiter) unref() {
	if w.refs.Add(-1) != 0 {
		return
	}
	w.u, w.via = nil, nil
	waiterPool.Put(w)
}

// withdraw takes a waiter that its handler settled (aborted, or given up)
// out of its lane's queue.
type withdraw struct {
	u      *upstream
	tenant tenant.ID
	class  admission.Class
	seq    uint64
}

// release is a finished lease.
type release struct {
	class  admission.Class
	cost   int64
	virtID uint64
	s      admission.Sample
	at     time.Time
}

// doneLog collects finished leases for the controller in order. Handlers
// append (no allocation once the buffers have grown) and send one
// releaseKick only when the controller is not already due to drain, so a
// release costs at most one message and usually fewer under load.
type doneLog struct {
	mu    sync.Mutex
	buf   []release
	spare []release
	kick  atomic.Bool
}

func (d *doneLog) add(r release) (kick bool) {
	d.mu.Lock()
	d.buf = append(d.buf, r)
	d.mu.Unlock()
	return d.kick.CompareAndSwap(false, true)
}

// drain returns what was logged; the slice is valid until the next drain.
func (d *doneLog) drain() []release {
	d.kick.Store(false)
	d.mu.Lock()
	out := d.buf
	d.buf, d.spare = d.spare[:0], out
	d.mu.Unlock()
	return out
}

// Controller and lane messages.
type (
	// grant tells a lane that capacity for its head is held.
	grant struct {
		class admission.Class
		seq   uint64
		cost  int64
		at    int64 // when the gate took the cost (Unix ns)
	}
	// rejectHead tells a lane to reject its head (it can no longer fit).
	rejectHead struct {
		class  admission.Class
		seq    uint64
		reason Reason
	}
	// evict rejects everything a lane holds and retires it.
	evict struct {
		reason Reason
		reply  bool
	}
	// laneState is a lane's report after every change.
	laneState struct {
		id      admission.LaneID
		head    [admission.NumClasses]headInfo
		count   [admission.NumClasses]int64
		cost    [admission.NumClasses]int64
		bounce  bool // a grant came back unused: its capacity is free again
		bounced grant
	}
	headInfo struct {
		seq  uint64
		cost int64
	}
	shadowQueue struct {
		id       uint64
		class    admission.Class
		cost     int64
		deadline time.Time
	}
	releaseKick struct{}
	resync      struct{} // a lane reports its queue to a fresh controller
	pressureMsg struct{ sev admission.Pressure }
	manualTick  struct{}
	windowTick  struct{}
	subTick     struct{}
	syncMsg     struct{}
	// measuringQuery asks a controller whether its measuring tick runs
	// (answered with a bool; tests use it).
	measuringQuery struct{}
	deadlineDue    struct{}
	stopLane       struct{}
)

// Messages that reach a stopped lane or controller (a timer firing during
// shutdown, a waiter racing an eviction) are expected: the dead-letter
// handler re-routes waiters, the rest are moot. None is logged.
func (*waiter) IgnoreDeadLetterLogging()      {}
func (*withdraw) IgnoreDeadLetterLogging()    {}
func (*grant) IgnoreDeadLetterLogging()       {}
func (*rejectHead) IgnoreDeadLetterLogging()  {}
func (*evict) IgnoreDeadLetterLogging()       {}
func (*laneState) IgnoreDeadLetterLogging()   {}
func (*shadowQueue) IgnoreDeadLetterLogging() {}
func (*pressureMsg) IgnoreDeadLetterLogging() {}
func (releaseKick) IgnoreDeadLetterLogging()  {}
func (manualTick) IgnoreDeadLetterLogging()   {}
func (windowTick) IgnoreDeadLetterLogging()   {}
func (subTick) IgnoreDeadLetterLogging()      {}
func (deadlineDue) IgnoreDeadLetterLogging()  {}
func (stopLane) IgnoreDeadLetterLogging()     {}
