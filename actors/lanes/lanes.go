// Package lanes is the gateway's adaptive admission: one controller actor
// that owns the adaptive limit, the window statistics and the fair
// scheduler, and one lane actor per tenant (with OMNIROUTE_CHAT_VIRTUAL_LANES,
// else one shared lane) that owns the tenant's queued requests, their
// deadlines and their replies.
//
// The hot path never waits on an actor when there is room: Acquire takes
// capacity from the gate (internal/admission.Gate) the controller publishes
// its limit to, in one locked check, and sends nothing. Only when the class
// has no room or already has waiting work does the request become a waiter:
// one message to its lane and a wait on a pooled reply channel of capacity
// one. Release returns the capacity to the gate at once and tells the
// controller (one fire-and-forget message) how the request ended and its
// latency sample; the controller then dispatches queued work, lane by lane
// in start-time fair order, by granting capacity to lane heads.
//
// Lanes are created on demand (the first time a tenant has to wait), evicted
// after LaneIdleMs without use and, beyond MaxLanes, least recently used
// first; queued work of an evicted lane is rejected admission_lane_evicted.
package lanes

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/tenant"
)

// Reason is why a request was not admitted (None: it was).
type Reason uint8

// Reasons. Their codes and statuses are OmniRoute's.
const (
	None Reason = iota
	QueueFull
	Deadline
	Oversized
	LaneEvicted
	Shutdown
	Unavailable
	// Aborted: the caller left while queued. Not a shed: it is not counted
	// as a rejection.
	Aborted
	// NumReasons sizes tables indexed by Reason.
	NumReasons
)

// reasonInfo is what a caller is told about a reason.
type reasonInfo struct {
	code       string // machine-readable error code
	status     int    // HTTP status
	retryAfter int    // Retry-After seconds (0 = none)
	message    string // what happened and what to do
}

// reasons is the one table of admission outcomes: every Reason has its
// code, status, Retry-After and message here (TestReasonTableComplete), so
// a reason cannot be added without what the caller is told.
var reasons = [NumReasons]reasonInfo{
	None: {code: "", status: 200},
	QueueFull: {code: "admission_queue_full", status: 503, retryAfter: 1,
		message: "Service temporarily unavailable: the admission queue is full; retry after the Retry-After delay"},
	Deadline: {code: "admission_deadline", status: 503, retryAfter: 1,
		message: "Service temporarily unavailable: no capacity freed up within ADAPTIVE_ADMISSION_MAX_WAIT_MS; retry after the Retry-After delay"},
	Oversized: {code: "admission_oversized", status: 503,
		message: "Request too large for current capacity: its estimated cost exceeds the admission limit; shorten the conversation, tools or max_tokens, or retry when the gateway is less busy"},
	LaneEvicted: {code: "admission_lane_evicted", status: 503, retryAfter: 1,
		message: "Connection lane evicted while the request was queued; retry after the Retry-After delay"},
	Shutdown: {code: "admission_shutdown", status: 503,
		message: "the gateway is shutting down; retry against another instance"},
	Unavailable: {code: "admission_unavailable", status: 503, retryAfter: 1,
		message: "Service temporarily unavailable: admission did not answer in time; retry after the Retry-After delay"},
	Aborted: {code: "admission_aborted", status: 499, message: "Request aborted"},
}

// Code is the machine-readable error code.
func (r Reason) Code() string { return reasons[r].code }

// RetryAfter is the Retry-After in seconds OmniRoute sends (0 = none).
func (r Reason) RetryAfter() int { return reasons[r].retryAfter }

// Status is the HTTP status of a request refused for r.
func (r Reason) Status() int { return reasons[r].status }

// Message says what happened and what to do.
func (r Reason) Message() string { return reasons[r].message }

// Rejections lists the reasons that count as rejections (every reason but
// None and Aborted), in table order.
func Rejections() []Reason {
	out := make([]Reason, 0, NumReasons)
	for r := None + 1; r < NumReasons; r++ {
		if r != Aborted {
			out = append(out, r)
		}
	}
	return out
}

// controllerStrategy restarts the controller after a panic: every queued
// request waits on it. The restart stops its tenant lanes (their waiters
// are told admission_unavailable, Retry-After 1); capacity held by
// admitted requests lives in the gate and survives; the fresh controller
// starts with the initial adaptive limit and re-learns the shared lane's
// queue from the lane itself.
var controllerStrategy = supervise.Restart("admission-controller")

// laneStrategy restarts a failed lane (tenant or shared) from a fresh
// object; the failed one rejects its queue as admission_unavailable and
// reports itself empty to the controller first.
var laneStrategy = supervise.Restart("admission-lane")

// Options configures the controller.
type Options struct {
	Config admission.Config
	// Clock decides deadlines and windows; nil means the wall clock.
	Clock clock.Clock
	// TargetCaps[i] is target i's concurrency cap (0 = none).
	TargetCaps []int
	// ManualTicks turns off the window and sub-window timers; tests then
	// drive time with Tick and CloseWindow.
	ManualTicks bool
	Logger      *slog.Logger
}

// Handle is what the transport holds.
type Handle struct {
	cfg     admission.Config
	clk     clock.Clock
	log     *slog.Logger
	root    *actor.RootContext
	ctrl    *actor.PID
	shared  *actor.PID
	gate    *admission.Gate
	virt    *admission.Gate // shadow mode's would-be accounting
	lanes   atomic.Pointer[map[tenant.ID]*actor.PID]
	view    atomic.Pointer[view]
	seq     atomic.Uint64
	stopped atomic.Bool
	// incarnations counts the controller's starts (restarts after the first).
	incarnations atomic.Int32
	sub          *eventstream.Subscription
	stop         sync.Once
	done         doneLog

	admitted      [admission.NumClasses]atomic.Int64
	rejected      [admission.NumClasses][NumReasons]atomic.Int64
	wouldAdmit    atomic.Int64
	wouldQueue    atomic.Int64
	wouldReject   atomic.Int64
	probeSkipped  atomic.Int64
	targetSkipped atomic.Int64
	pressure      atomic.Pointer[pressureObs]
}

type pressureObs struct {
	severity admission.Pressure
	reason   string
	at       time.Time
}

// Spawn validates cfg and starts the controller (and the shared lane when
// virtual lanes are off) on system.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := o.Config
	h := &Handle{cfg: cfg, clk: o.Clock, log: o.Logger, root: system.Root}
	limit := cfg.ClampedInitial()
	idle := time.Duration(cfg.ClassIdleMs) * time.Millisecond
	h.gate = admission.NewGate(limit, cfg.MaxLimit, cfg.ClassShares, idle, o.TargetCaps)
	if cfg.Mode == admission.ModeShadow {
		h.virt = admission.NewGate(limit, cfg.MaxLimit, cfg.ClassShares, idle, nil)
	}
	empty := map[tenant.ID]*actor.PID{}
	h.lanes.Store(&empty)
	h.view.Store(newController(h, o).buildView())
	if !cfg.VirtualLanes {
		// Before the controller, whose Started registers it (every
		// controller incarnation does).
		h.shared = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &laneActor{h: h, id: sharedLaneID, shared: true}
		}, actor.WithGuardian(laneStrategy)))
	}
	h.ctrl = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newController(h, o) },
		actor.WithGuardian(controllerStrategy), actor.WithSupervisor(laneStrategy)))
	h.sub = system.EventStream.Subscribe(h.deadLetter)
	return h, nil
}

// Mode is the configured mode.
func (h *Handle) Mode() admission.Mode { return h.cfg.Mode }

// Config is the controller configuration.
func (h *Handle) Config() admission.Config { return h.cfg }

// VirtualLanes reports whether tenants have their own lanes.
func (h *Handle) VirtualLanes() bool { return h.cfg.VirtualLanes }

// Lease is an admitted request's hold on capacity. The zero value holds
// nothing; Release is idempotent.
type Lease struct {
	mode     admission.Mode
	held     bool
	virtHeld bool
	virtID   uint64
	queued   bool
	tenant   tenant.ID
	Class    admission.Class
	Cost     int64
	// AdmittedAt is when the request was admitted (after any queueing).
	AdmittedAt time.Time
	// Waited is how long the request was queued.
	Waited time.Duration
}

// Held reports whether the lease holds capacity to release.
func (l *Lease) Held() bool { return l.held }

// Aborter lets a queued wait end early when the caller goes away:
// Notify registers f to run once on cancellation and reports false (without
// registering) when the cancellation already happened; Notify(nil) clears.
type Aborter interface {
	Notify(f func()) bool
}

// Ticket is a request asking for admission.
type Ticket struct {
	Tenant tenant.ID
	Class  admission.Class
	Cost   int64
	// Abort ends a queued wait when the caller leaves (may be nil).
	Abort Aborter
}

// Acquire admits t or says why not, filling l on success. In off mode it
// admits without accounting; in shadow mode it admits everything and
// counts what enforce would have done; in enforce mode it admits at once
// when there is room and nothing of the class waits, else queues the
// request in its lane until capacity is granted, its deadline passes, its
// lane is evicted, the gateway stops, or the caller leaves (Aborted).
func (h *Handle) Acquire(t Ticket, l *Lease) Reason {
	if h.stopped.Load() {
		return Shutdown
	}
	now := h.clk.Now()
	*l = Lease{mode: h.cfg.Mode, tenant: t.Tenant, Class: t.Class, Cost: t.Cost, AdmittedAt: now}
	switch h.cfg.Mode {
	case admission.ModeOff:
		h.admitted[t.Class].Add(1)
		return None
	case admission.ModeShadow:
		h.shadowAcquire(t, l, now)
		h.admitted[t.Class].Add(1)
		return None
	}
	switch h.gate.Acquire(t.Class, t.Cost, now.UnixNano(), true) {
	case admission.Admitted:
		l.held = true
		h.admitted[t.Class].Add(1)
		return None
	case admission.Oversized:
		return h.reject(t.Class, Oversized)
	case admission.Closed:
		return h.reject(t.Class, Shutdown)
	}
	r := h.wait(t, now)
	if r != None {
		return h.reject(t.Class, r)
	}
	done := h.clk.Now()
	l.held, l.queued, l.AdmittedAt, l.Waited = true, true, done, done.Sub(now)
	h.admitted[t.Class].Add(1)
	return None
}

func (h *Handle) reject(c admission.Class, r Reason) Reason {
	h.rejected[c][r].Add(1)
	return r
}

func (h *Handle) shadowAcquire(t Ticket, l *Lease, now time.Time) {
	h.gate.Force(t.Class, t.Cost, now.UnixNano())
	l.held = true
	switch h.virt.Acquire(t.Class, t.Cost, now.UnixNano(), false) {
	case admission.Admitted:
		l.virtHeld = true
		h.wouldAdmit.Add(1)
	case admission.Oversized, admission.Closed:
		h.wouldReject.Add(1)
	default:
		l.virtID = h.seq.Add(1)
		h.root.Send(h.ctrl, &shadowQueue{id: l.virtID, class: t.Class, cost: t.Cost, deadline: now.Add(h.cfg.MaxWait())})
	}
}

// waitGrace is how long past its deadline a waiter waits for its lane
// before giving up on its own (a lane that was stopped mid-flight).
const waitGrace = 2 * time.Second

func (h *Handle) wait(t Ticket, now time.Time) Reason {
	w := getWaiter(h)
	gen := w.begin()
	w.tenant, w.class, w.cost = t.Tenant, t.Class, t.Cost
	w.seq = h.seq.Add(1)
	w.deadline = now.Add(h.cfg.MaxWait())
	if t.Abort != nil && !t.Abort.Notify(func() { w.resolve(gen, Aborted) }) {
		w.resolve(gen, Aborted)
		r := <-w.ch
		w.unref() // the lane never saw it
		w.unref()
		return r
	}
	w.via = h.route(t.Tenant)
	h.root.Send(w.via, w)
	w.timer.Reset(h.cfg.MaxWait() + waitGrace)
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
	if r == Aborted || r == Unavailable {
		// Resolved here, not by the lane: take the entry out of the queue.
		h.root.Send(w.via, &withdraw{h: h, tenant: t.Tenant, class: t.Class, seq: w.seq})
	}
	w.unref()
	return r
}

// route returns the lane a tenant's waiter goes to: its own lane, or the
// controller (which creates the lane) when there is none yet, or the
// shared lane when virtual lanes are off.
func (h *Handle) route(id tenant.ID) *actor.PID {
	if !h.cfg.VirtualLanes {
		return h.shared
	}
	if pid := (*h.lanes.Load())[id]; pid != nil {
		return pid
	}
	return h.ctrl
}

// deadLetter re-routes a waiter (or withdrawal) sent to a lane that was
// stopped in the meantime: the controller routes it to the tenant's
// current lane, so an eviction race never loses a request.
func (h *Handle) deadLetter(evt any) {
	dl, ok := evt.(*actor.DeadLetterEvent)
	if !ok {
		return
	}
	switch m := dl.Message.(type) {
	case *waiter:
		if m.h != h {
			return
		}
		if h.stopped.Load() {
			m.resolveCurrent(Shutdown)
			m.unref()
			return
		}
		h.root.Send(h.ctrl, m)
	case *withdraw:
		if m.h == h && !h.stopped.Load() && dl.PID != h.ctrl {
			h.root.Send(h.ctrl, m)
		}
	}
}

// Release ends a lease: the capacity returns to the gate at once and the
// controller learns the outcome and latency sample (fire-and-forget: at
// most one message, shared by the releases that arrive before the
// controller drains them).
func (h *Handle) Release(l *Lease, c admission.Completion) {
	if !l.held {
		*l = Lease{}
		return
	}
	// Log first, free second: a dispatch that sees the freed capacity then
	// also finds this record and knows whose capacity it was.
	kick := h.done.add(release{class: l.Class, cost: l.Cost, virtID: l.virtID, tenant: l.tenant, queued: l.queued, c: c})
	h.gate.Release(l.Class, l.Cost)
	if l.virtHeld {
		h.virt.Release(l.Class, l.Cost)
	}
	*l = Lease{}
	if kick && !h.stopped.Load() {
		h.root.Send(h.ctrl, releaseKick{})
	}
}

// ProbeResult is the answer to a fan-out target probe.
type ProbeResult = admission.ProbeResult

// Probe checks a fan-out target before it is dispatched. With virtual lanes
// on and mode enforce it is a non-blocking try-acquire of cost for class
// against the gate (room now and nothing of the class waiting), released
// at once: a capacity gate, not a hold. A capped target's concurrency slot
// is checked in the same locked step and, when the probe passes, held
// until ReleaseTarget. fanout is false for a model's only target, which the
// parent's lease already covers (only the target cap applies).
func (h *Handle) Probe(class admission.Class, cost int64, target int, fanout bool) ProbeResult {
	lanes := fanout && h.cfg.VirtualLanes && h.cfg.Mode == admission.ModeEnforce && !h.stopped.Load()
	r := h.gate.Probe(class, cost, h.clk.Now().UnixNano(), target, lanes)
	switch r {
	case admission.ProbeLanes:
		h.probeSkipped.Add(1)
	case admission.ProbeTarget:
		h.targetSkipped.Add(1)
	}
	return r
}

// ReleaseTarget returns a target slot held by a passed probe.
func (h *Handle) ReleaseTarget(target int) { h.gate.ReleaseTarget(target) }

// TargetInflight returns the gateway's in-flight requests on a capped target.
func (h *Handle) TargetInflight(target int) int { return h.gate.TargetInflight(target) }

// ObservePressure feeds a resource-pressure observation (from a pressure
// sampler): critical cuts the limit at once, once per window; high stops
// growth and cuts at the window's end.
func (h *Handle) ObservePressure(sev admission.Pressure, reason string) {
	now := h.clk.Now()
	h.pressure.Store(&pressureObs{severity: sev, reason: reason, at: now})
	h.root.Send(h.ctrl, &pressureMsg{sev: sev})
}

// Tick runs a sub-window step now: samples utilisation, expires deadlines
// in every lane, and dispatches. The controller does this on its own timer
// unless Options.ManualTicks.
func (h *Handle) Tick() { h.root.Send(h.ctrl, manualTick{}) }

// CloseWindow closes the adaptation window now (normally on a timer).
func (h *Handle) CloseWindow() { h.root.Send(h.ctrl, windowTick{}) }

// Sync waits until the controller has handled everything sent to it
// before the call, and republishes the snapshot.
func (h *Handle) Sync() {
	if h.stopped.Load() {
		return
	}
	_, _ = h.root.RequestFuture(h.ctrl, syncMsg{}, 5*time.Second).Result()
}

// Stop rejects every queued request with admission_shutdown, refuses new
// ones, and stops the actors. It is idempotent.
func (h *Handle) Stop() {
	h.stop.Do(func() {
		h.stopped.Store(true)
		h.gate.Close()
		if h.virt != nil {
			h.virt.Close()
		}
		pids := []*actor.PID{}
		if h.shared != nil {
			pids = append(pids, h.shared)
		}
		for _, pid := range *h.lanes.Load() {
			pids = append(pids, pid)
		}
		for _, pid := range pids {
			_, _ = h.root.RequestFuture(pid, &evict{reason: Shutdown, reply: true}, 2*time.Second).Result()
		}
		_ = h.root.PoisonFuture(h.ctrl).Wait()
		if h.shared != nil {
			_ = h.root.StopFuture(h.shared).Wait()
		}
		h.root.ActorSystem().EventStream.Unsubscribe(h.sub)
		v := *h.view.Load()
		v.shutdown = true
		h.view.Store(&v)
	})
}
