package lanes

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/tenant"
)

// upstream is one upstream's admission state: its gate, its controller
// actor, its lanes and what the controller publishes.
type upstream struct {
	h      *Handle
	idx    int
	name   string
	gate   *admission.Gate
	virt   *admission.Gate // shadow mode's would-be accounting
	ctrl   *actor.PID
	shared *actor.PID
	// incarnations counts the controller's starts (restarts after the
	// first).
	incarnations atomic.Int32
	// retired hides the upstream from the snapshot (SetRetired).
	retired atomic.Bool
	lanes   atomicLanes
	view    atomicView
	done    doneLog
	// outOfTime counts the requests the lanes turned away for time: their
	// wait would pass their deadline, or did. Each is demand the provider
	// could not serve within its caller's patience, whatever the queue's
	// length: the controller's overload verdict counts them.
	outOfTime atomic.Int64
}

func newUpstream(h *Handle, idx int, spec UpstreamSpec, o Options) *upstream {
	cfg := o.Config
	now := h.clk.Now()
	u := &upstream{h: h, idx: idx, name: spec.Name}
	idle := time.Duration(cfg.ClassIdleMs) * time.Millisecond
	limit := admission.NewController(cfg.Control(), now).Limit()
	u.gate = admission.NewGate(limit, cfg.ClassShares, idle, spec.Cap, h.global, now)
	if cfg.Mode == admission.ModeShadow {
		u.virt = admission.NewGate(limit, cfg.ClassShares, idle, spec.Cap, nil, now)
	}
	empty := map[tenant.ID]*actor.PID{}
	u.lanes.Store(&empty)
	u.view.Store(&view{limit: limit})
	if !cfg.VirtualLanes {
		// Before the controller, whose Started registers it (every
		// controller incarnation does).
		u.shared = h.root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &laneActor{u: u, id: sharedLaneID, shared: true}
		}, actor.WithGuardian(laneStrategy)))
	}
	// The controller is the supervisor of the upstream's tenant lanes.
	// Props build a fresh controller on every (re)start.
	u.ctrl = h.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newController(u, o) },
		actor.WithGuardian(controllerStrategy), actor.WithSupervisor(laneStrategy)))
	return u
}

// waitGrace is how long past its deadline a waiter waits for its lane
// before giving up on its own (a lane that was stopped mid-flight).
const waitGrace = 2 * time.Second

// wait queues t (registered at the gate) in its lane and waits for the
// verdict; it returns the reason and, for a shed, the Retry-After, or for
// a grant when the gate took the cost (Unix ns).
func (u *upstream) wait(t Ticket, cost int64, now time.Time) (Reason, int, int64) {
	h := u.h
	w := getWaiter(u)
	gen := w.begin()
	w.tenant, w.class, w.cost, w.stream = t.Tenant, t.Class, cost, t.Stream
	w.seq = h.seq.Add(1)
	w.arrived = now
	w.deadline = now.Add(h.cfg.MaxWait())
	w.callerDeadline = t.Deadline
	if !t.Deadline.IsZero() {
		// A grant later than the deadline less an unqueued answer's time
		// cannot be answered in time: the wait ends there.
		if d := t.Deadline.Add(-u.view.Load().baselineFor(t.Stream)); d.Before(w.deadline) {
			w.deadline = d
		}
	}
	if t.Abort != nil && !t.Abort.Notify(func() { w.resolve(gen, Aborted) }) {
		w.resolve(gen, Aborted)
		r := <-w.ch
		w.unref() // the lane never saw it
		w.unref()
		return r, 0, 0
	}
	w.via = u.route(t.Tenant)
	h.root.Send(w.via, w)
	w.timer.Reset(w.deadline.Sub(now) + waitGrace)
	var r Reason
	select {
	case r = <-w.ch:
	case <-w.timer.C:
		w.resolve(gen, Unavailable)
		r = <-w.ch
	}
	w.timer.Stop()
	if t.Abort != nil {
		t.Abort.Notify(nil)
	}
	retry, at := w.retryAfter, w.grantedAt
	if r == Aborted || r == Unavailable {
		// Resolved here, not by the lane: take the entry out of the queue.
		h.root.Send(w.via, &withdraw{u: u, tenant: t.Tenant, class: t.Class, seq: w.seq})
	}
	w.unref()
	return r, retry, at
}

// route returns the lane a tenant's waiter goes to: its own lane, or the
// controller (which creates the lane) when there is none yet, or the
// shared lane when virtual lanes are off.
func (u *upstream) route(id tenant.ID) *actor.PID {
	if !u.h.cfg.VirtualLanes {
		return u.shared
	}
	if pid := (*u.lanes.Load())[id]; pid != nil {
		return pid
	}
	return u.ctrl
}

func (u *upstream) shadowAcquire(t Ticket, l *Lease, now time.Time) {
	h := u.h
	u.gate.Force(t.Class, l.Cost, now.UnixNano())
	l.held, l.pending = true, true
	switch u.virt.Acquire(t.Class, l.Cost, now.UnixNano(), false) {
	case admission.Admitted:
		l.virtHeld = true
		h.wouldAdmit.Add(1)
	case admission.Closed:
		h.wouldReject.Add(1)
	default:
		u.gate.NoteLimited()
		l.virtID = h.seq.Add(1)
		h.root.Send(u.ctrl, &shadowQueue{id: l.virtID, class: t.Class, cost: l.Cost, deadline: now.Add(h.cfg.MaxWait())})
	}
}

// stop rejects the upstream's queued requests with admission_shutdown and
// stops its actors.
func (u *upstream) stop() {
	root := u.h.root
	u.gate.Close()
	if u.virt != nil {
		u.virt.Close()
	}
	pids := []*actor.PID{}
	if u.shared != nil {
		pids = append(pids, u.shared)
	}
	for _, pid := range *u.lanes.Load() {
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		_, _ = root.RequestFuture(pid, &evict{reason: Shutdown, reply: true}, 2*time.Second).Result()
	}
	_ = root.PoisonFuture(u.ctrl).Wait()
	if u.shared != nil {
		_ = root.StopFuture(u.shared).Wait()
	}
	v := *u.view.Load()
	v.shutdown = true
	u.view.Store(&v)
}

// view is what an upstream's controller publishes after each change it
// cares to show; Snapshot adds the live counters. Lanes read it to decide
// whether a newcomer's queueing fits.
type view struct {
	limit      int64
	knee       float64
	phase      string
	converged  bool
	baseline   [2]time.Duration // stream, plain
	held       time.Duration
	drainRate  float64 // cost per second
	target     time.Duration
	backlogged int // lanes with queued work
	// overloaded: the requests present at the upstream grow (see
	// controller.rollFlow).
	overloaded bool
	pressure   admission.Pressure
	last       admission.PhaseReport
	window     Window
	// utilization is the share of the limit the last reporting window
	// kept busy; shortEWMA and longEWMA the answers' latency averages;
	// answered the releases of the last window (their weight in the
	// totals).
	utilization         float64
	shortEWMA, longEWMA time.Duration
	answered            int64
	// shared lane / lanes / shadow queue figures
	sharedCount, sharedCost         int64
	laneCount                       int
	laneQueuedCount, laneQueuedCost int64
	laneTenants                     []LaneTenant
	virtQueuedCount, virtQueuedCost int64
	shutdown                        bool
}

// baselineFor is the no-queue latency of an answer of the kind (0 when
// unknown).
func (v *view) baselineFor(stream bool) time.Duration {
	if stream {
		return v.baseline[0]
	}
	return v.baseline[1]
}

// expectedWait is how long cost more queued behind queued in a lane would
// wait for its turn, with backlogged lanes sharing the drain; ok is false
// when the drain rate is not known yet (no answer seen). Before the
// controller has found a knee the rate is the current limit's, a lower
// bound while it still grows.
func (v *view) expectedWait(queued, cost int64, backlogged int) (time.Duration, bool) {
	if v.drainRate <= 0 {
		return 0, false
	}
	share := v.drainRate / float64(max(backlogged, 1))
	return time.Duration(float64(queued+cost) / share * float64(time.Second)), true
}

// drainCost is the cost a lane drains in d at its share of the drain
// rate (among backlogged lanes); 0 while the rate is unknown.
func (v *view) drainCost(d time.Duration, backlogged int) int64 {
	return int64(d.Seconds() * v.drainRate / float64(max(backlogged, 1)))
}

// retrySeconds rounds d up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
