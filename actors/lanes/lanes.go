// Package lanes is the gateway's adaptive admission. Each upstream (a
// connection and model, or the group of targets that share its
// max_concurrent) has its own gate, its own adaptive limit and its own
// controller actor, which owns the limit's controller
// (internal/admission.Controller), the fair scheduler and the upstream's
// tenant lanes: one lane actor per tenant that waits for it (with
// OMNIROUTE_CHAT_VIRTUAL_LANES, else one shared lane), holding the
// tenant's queued requests, their deadlines and their replies. A slow
// provider's latency therefore never lowers a fast one's limit, and a
// provider is never capped by another's capacity; a process-wide bound
// remains as a safety net for the gateway's own resources.
//
// The hot path never waits on an actor when there is room: Acquire takes
// capacity from the upstream's gate in one locked check and sends
// nothing. Only when there is no room, or work of the class already
// waits, does the request become a waiter: one message to its lane and a
// wait on a pooled reply channel of capacity one. A lane refuses a waiter
// at once when the upstream's queue would not drain within its target
// delay or before the caller's deadline, so an overloaded upstream sheds
// at once with a Retry-After from its measured drain rate instead of
// parking requests that will time out. Release returns the capacity to
// the gate at once and tells the controller (one fire-and-forget
// message, shared by the releases that come before it drains them) how
// the request ended and its latency; the controller then grants freed
// capacity to lane heads in start-time fair order.
package lanes

import (
	"cmp"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/tenant"
)

// Reason is why a request was not admitted (None: it was).
type Reason uint8

// Reasons; what the caller is told for each is in reasons.
const (
	None Reason = iota
	QueueFull
	Deadline
	Overloaded
	LaneEvicted
	Shutdown
	Unavailable
	GlobalFull
	// Busy: TryAcquire found no room now. Not a rejection: the caller
	// tries elsewhere or queues.
	Busy
	// Aborted: the caller left while queued. Not a shed: it is not counted
	// as a rejection.
	Aborted
	// NumReasons sizes tables indexed by Reason.
	NumReasons
)

// reasonInfo is what a caller is told about a reason.
type reasonInfo struct {
	// code is the error a refusal answers with: its code and status come
	// from the gateway's table of error codes (apierror); only a refusal
	// the caller is answered with (a rejection) has one.
	code apierror.Code
	// name and status stand for code where the reason is no refusal.
	name       string
	status     int
	retryAfter int    // default Retry-After seconds (0 = none)
	message    string // what happened and what to do
}

// reasons is the one table of admission outcomes: every Reason has its
// code, status, Retry-After and message here (TestReasonTableComplete), so
// a reason cannot be added without what the caller is told.
var reasons = [NumReasons]reasonInfo{
	None: {name: "", status: 200},
	QueueFull: {code: apierror.CodeAdmissionQueueFull, retryAfter: 1,
		message: "the admission queue of this model's provider is full; retry after the Retry-After delay"},
	Deadline: {code: apierror.CodeAdmissionDeadline, retryAfter: 1,
		message: "the request could not be admitted in time for its deadline (ADAPTIVE_ADMISSION_MAX_WAIT_MS, X-Stainless-Timeout or x-omniroute-timeout-ms); retry with a longer timeout or later"},
	Overloaded: {code: apierror.CodeAdmissionOverloaded, retryAfter: 1,
		message: "the provider of this model is at its capacity and its queue would not drain within the queueing target; retry after the Retry-After delay (the measured drain time)"},
	LaneEvicted: {code: apierror.CodeAdmissionLaneEvicted, retryAfter: 1,
		message: "the request's admission lane was evicted while it waited; retry after the Retry-After delay"},
	Shutdown: {code: apierror.CodeAdmissionShutdown,
		message: "the gateway is shutting down; retry against another instance"},
	Unavailable: {code: apierror.CodeAdmissionUnavailable, retryAfter: 1,
		message: "admission did not answer in time; retry after the Retry-After delay"},
	GlobalFull: {code: apierror.CodeAdmissionGlobalLimit, retryAfter: 1,
		message: "the gateway holds as much work as ADAPTIVE_ADMISSION_GLOBAL_LIMIT allows; retry after the Retry-After delay or raise the limit"},
	Busy:    {name: "admission_busy", status: 503, message: "no room on this upstream now"},
	Aborted: {name: "admission_aborted", status: 499, message: "the caller left while its request was queued"},
}

// Code is the machine-readable error code.
func (r Reason) Code() string {
	if c := reasons[r].code; c != 0 {
		return c.String()
	}
	return reasons[r].name
}

// APICode is the error a refusal answers with (zero for a reason that is
// no refusal).
func (r Reason) APICode() apierror.Code { return reasons[r].code }

// RetryAfter is the default Retry-After in seconds (0 = none); a lease
// may carry a measured one (Lease.RetryAfter).
func (r Reason) RetryAfter() int { return reasons[r].retryAfter }

// Status is the HTTP status of a request refused for r.
func (r Reason) Status() int {
	if c := reasons[r].code; c != 0 {
		return c.Status()
	}
	return reasons[r].status
}

// Message says what happened and what to do.
func (r Reason) Message() string { return reasons[r].message }

// Rejection reports whether r is a refusal the caller is answered with.
func (r Reason) Rejection() bool { return reasons[r].code != 0 }

// Rejections lists every refusal, in table order, for tables built from
// this one.
func Rejections() []Reason {
	var out []Reason
	for r := Reason(0); r < NumReasons; r++ {
		if r.Rejection() {
			out = append(out, r)
		}
	}
	return out
}

// controllerStrategy restarts an upstream's controller after a panic:
// every queued request of the upstream waits on it. The restart stops its
// tenant lanes (their waiters are told admission_unavailable, Retry-After
// 1); capacity held by admitted requests lives in the gate and survives;
// the fresh controller starts with the initial adaptive limit and
// re-learns the shared lane's queue from the lane itself.
var controllerStrategy = supervise.Restart("admission-controller")

// laneStrategy restarts a failed lane (tenant or shared) from a fresh
// object; the failed one rejects its queue as admission_unavailable and
// reports itself empty to the controller first.
var laneStrategy = supervise.Restart("admission-lane")

// UpstreamSpec names an upstream and its concurrency cap (0 = none).
type UpstreamSpec struct {
	Name string
	Cap  int
}

// Options configures the admission actors.
type Options struct {
	Config admission.Config
	// Clock decides deadlines and phases; nil means the wall clock.
	Clock clock.Clock
	// Upstreams are the upstreams by index (Ticket.Upstream).
	Upstreams []UpstreamSpec
	// ManualTicks turns off the controllers' timers; tests then drive time
	// with Tick and CloseWindow.
	ManualTicks bool
	Logger      *slog.Logger
	// Weight is a tenant's fair share in its upstreams' schedulers (nil or
	// a value <= 0: 1). It is read when the tenant's lane is created, so a
	// changed weight applies once the lane is next created.
	Weight func(tenant.ID) float64
}

// Handle is what the transport holds.
type Handle struct {
	cfg     admission.Config
	clk     clock.Clock
	log     *slog.Logger
	root    *actor.RootContext
	ups     *growable.List[*upstream] // by Ticket.Upstream; AddUpstreams grows it
	opts    Options                   // what AddUpstreams builds new upstreams with
	addMu   sync.Mutex                // AddUpstreams against Stop
	global  *admission.Global
	seq     atomic.Uint64
	stopped atomic.Bool
	sub     *eventstream.Subscription
	stop    sync.Once
	// follower takes the resource-pressure actor's samples (pressure.go).
	follower *actor.PID

	admitted    [admission.NumClasses]atomic.Int64
	rejected    [admission.NumClasses][NumReasons]atomic.Int64
	wouldAdmit  atomic.Int64
	wouldQueue  atomic.Int64
	wouldReject atomic.Int64
	busy        atomic.Int64
	skipped     atomic.Int64
	cpuBusy     atomic.Bool
	weight      func(tenant.ID) float64 // Options.Weight
	pressure    atomic.Pointer[pressureObs]
}

type pressureObs struct {
	severity admission.Pressure
	reason   string
	at       time.Time
}

// Spawn validates cfg and starts one controller (and, with lanes off, one
// shared lane) per upstream on system.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	o.Clock = clock.Or(o.Clock)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	h := &Handle{cfg: o.Config, clk: o.Clock, log: o.Logger, root: system.Root, global: admission.NewGlobal(o.Config.GlobalLimit), weight: o.Weight,
		ups: &growable.List[*upstream]{}, opts: o}
	h.opts.Upstreams = nil
	for i, spec := range o.Upstreams {
		h.ups.Append(newUpstream(h, i, spec, o))
	}
	h.sub = system.EventStream.Subscribe(h.deadLetter)
	h.follower = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &pressureFollower{h: h} },
		actor.WithGuardian(followerStrategy)))
	return h, nil
}

// AddUpstreams starts the gate, controller and lanes of upstreams added
// at run time (a config reload adding targets) and returns the index of
// the first; tickets may name them once it returned. Every global figure
// (the process-wide bound, the class counters) covers them at once.
func (h *Handle) AddUpstreams(specs []UpstreamSpec) (int, error) {
	h.addMu.Lock()
	defer h.addMu.Unlock()
	if h.stopped.Load() {
		return 0, errors.New("lanes: AddUpstreams after Stop")
	}
	first := h.ups.Len()
	for i, spec := range specs {
		h.ups.Append(newUpstream(h, first+i, spec, h.opts))
	}
	return first, nil
}

// SetRetired hides upstream i from the snapshot (retired: no target of
// the config in force uses it) or shows it again. A retired upstream
// keeps its gate and idle controller (an idle controller sets no timer),
// so leases still held on it release normally and a reload that brings
// its target back finds its learned limit.
func (h *Handle) SetRetired(i int, retired bool) {
	if u, ok := h.ups.Get(i); ok {
		(*u).retired.Store(retired)
	}
}

// SetCap changes upstream i's concurrency cap (a reload changing its
// target's max_concurrent; 0: none). A raised cap grants queued requests
// at once (the controller is kicked to dispatch).
func (h *Handle) SetCap(i, capCount int) {
	up, ok := h.ups.Get(i)
	if !ok {
		return
	}
	u := *up
	u.gate.SetCap(capCount)
	if u.virt != nil {
		u.virt.SetCap(capCount)
	}
	if !h.stopped.Load() {
		h.root.Send(u.ctrl, releaseKick{})
	}
}

// all calls f for every upstream.
func (h *Handle) all(f func(u *upstream)) {
	for i, n := 0, h.ups.Len(); i < n; i++ {
		f(*h.ups.At(i))
	}
}

// Mode is the configured mode.
func (h *Handle) Mode() admission.Mode { return h.cfg.Mode }

// Config is the admission configuration.
func (h *Handle) Config() admission.Config { return h.cfg }

// VirtualLanes reports whether tenants have their own lanes.
func (h *Handle) VirtualLanes() bool { return h.cfg.VirtualLanes }

// Upstreams is the number of upstreams.
func (h *Handle) Upstreams() int { return h.ups.Len() }

// Lease is an admitted attempt's hold on its upstream's capacity. The
// zero value holds nothing; Release is idempotent.
type Lease struct {
	u        *upstream
	mode     admission.Mode
	held     bool
	virtHeld bool
	virtID   uint64
	queued   bool
	pending  bool // no first byte yet
	tenant   tenant.ID
	stream   bool
	Class    admission.Class
	// Cost is what the lease holds (the request's cost, capped at a share
	// of the upstream's limit).
	Cost int64
	// AdmittedAt is when the attempt was admitted (after any queueing).
	AdmittedAt time.Time
	firstByte  time.Time
	// provider and local split the answer's latency (set by Answered or
	// FirstByte, from the upstream exchange's receive times): the
	// provider's time from the request written, and the gateway's own
	// wait to read it. timed: they were set.
	provider, local time.Duration
	timed           bool
	// Waited is how long the attempt was queued.
	Waited time.Duration
	// RetryAfter is the measured Retry-After of a rejection, in seconds
	// (0: the reason's default).
	RetryAfter int
}

// Held reports whether the lease holds capacity to release.
func (l *Lease) Held() bool { return l.held }

// Aborter lets a queued wait end early when the caller goes away:
// Notify registers f to run once on cancellation and reports false (without
// registering) when the cancellation already happened; Notify(nil) clears.
type Aborter interface {
	Notify(f func()) bool
}

// Ticket is an attempt asking for admission on an upstream.
type Ticket struct {
	Upstream int
	Tenant   tenant.ID
	Class    admission.Class
	Cost     int64
	// Stream: the attempt streams (its latency sample is its time to
	// first token).
	Stream bool
	// Deadline is when the caller stops waiting (zero: not stated): a
	// request that cannot be answered by then is refused at once.
	Deadline time.Time
	// Abort ends a queued wait when the caller leaves (may be nil).
	Abort Aborter
}

// Acquire admits t or says why not, filling l on success. In off mode it
// admits without accounting; in shadow mode it admits everything and
// counts what enforce would have done; in enforce mode it admits at once
// when there is room and nothing of the class waits, else queues the
// request in its lane until capacity is granted, its deadline passes, its
// lane is evicted, the gateway stops, or the caller leaves (Aborted).
func (h *Handle) Acquire(t Ticket, l *Lease) Reason { return h.acquire(t, l, true) }

// TryAcquire admits t if there is room now and nothing of its class waits
// on the upstream; otherwise it returns Busy without queueing. Fan-out
// targets and spill-over to another target of a model use it.
func (h *Handle) TryAcquire(t Ticket, l *Lease) Reason { return h.acquire(t, l, false) }

func (h *Handle) acquire(t Ticket, l *Lease, queue bool) Reason {
	if h.stopped.Load() {
		return Shutdown
	}
	up, ok := h.ups.Get(t.Upstream)
	if !ok {
		return Unavailable
	}
	u := *up
	now := h.clk.Now()
	*l = Lease{u: u, mode: h.cfg.Mode, tenant: t.Tenant, Class: t.Class, stream: t.Stream, AdmittedAt: now}
	switch h.cfg.Mode {
	case admission.ModeOff:
		h.admitted[t.Class].Add(1)
		return None
	case admission.ModeShadow:
		l.Cost = u.gate.Charge(t.Cost)
		u.shadowAcquire(t, l, now)
		h.admitted[t.Class].Add(1)
		return None
	}
	v := u.view.Load()
	if !t.Deadline.IsZero() && now.Add(v.baselineFor(t.Stream)).After(t.Deadline) {
		// Not even an unqueued answer comes back in time.
		return h.reject(t.Class, Deadline)
	}
	l.Cost = u.gate.Charge(t.Cost)
	switch u.gate.Acquire(t.Class, l.Cost, now.UnixNano(), queue) {
	case admission.Admitted:
		l.held, l.pending = true, true
		h.admitted[t.Class].Add(1)
		return None
	case admission.GlobalFull:
		return h.reject(t.Class, GlobalFull)
	case admission.Closed:
		return h.reject(t.Class, Shutdown)
	case admission.Busy:
		h.busy.Add(1)
		return Busy
	}
	r, retry, at := u.wait(t, l.Cost, now)
	if r != None {
		l.RetryAfter = retry
		return h.reject(t.Class, r)
	}
	// The lease was admitted when the gate took its cost (its latency and
	// its pending entry count from then).
	l.held, l.pending, l.queued = true, true, true
	l.AdmittedAt = time.Unix(0, at)
	l.Waited = l.AdmittedAt.Sub(now)
	h.admitted[t.Class].Add(1)
	return None
}

func (h *Handle) reject(c admission.Class, r Reason) Reason {
	h.rejected[c][r].Add(1)
	return r
}

// NoteSkipped counts a fan-out target (a combo's, a fusion member) passed
// over because its upstream had no room: health's virtualFanoutSkipped.
func (h *Handle) NoteSkipped() { h.skipped.Add(1) }

// Answered records a plain answer's latency as the upstream exchange
// measured it: provider is the provider's time from the request written
// (its headers and body received), local the gateway's own wait to read
// them. The controller judges the provider by the first and discounts
// latencies the second explains.
func (h *Handle) Answered(l *Lease, provider, local time.Duration) {
	if l.held {
		l.provider, l.local, l.timed = provider, local, true
	}
}

// FirstByte records that the attempt's answer began (a stream's first
// content event): it stops counting as waiting at the provider, and its
// time is the stream's latency sample, split as for Answered (provider
// and local both 0: not measured, the sample runs from the admission).
func (h *Handle) FirstByte(l *Lease, provider, local time.Duration) {
	if !l.held || !l.firstByte.IsZero() {
		return
	}
	if provider > 0 {
		l.provider, l.local, l.timed = provider, local, true
	}
	l.firstByte = h.clk.Now()
	if l.pending {
		l.pending = false
		l.u.gate.FirstByte(l.AdmittedAt.UnixNano())
	}
}

// Outcome is how an admitted attempt ended.
type Outcome uint8

// Outcomes.
const (
	// Success: the provider answered.
	Success Outcome = iota
	// Cancelled: the caller left.
	Cancelled
	// LocalReject: the request itself was refused (a 4xx passed through,
	// or the gateway refused it): no evidence about the upstream.
	LocalReject
	// UpstreamError: the provider failed or refused (429, 5xx).
	UpstreamError
	// Timeout: the attempt timed out upstream.
	Timeout
)

// Completion is how a released lease ended.
type Completion struct {
	Outcome Outcome
	// Drop: the upstream shed the attempt (429, 503/529 overload, or a
	// timeout), evidence of congestion.
	Drop bool
}

// Release ends a lease: the capacity returns to the gate at once and the
// controller learns the outcome and latency (fire-and-forget: at most one
// message, shared by the releases that arrive before it drains them).
func (h *Handle) Release(l *Lease, c Completion) {
	if !l.held {
		*l = Lease{}
		return
	}
	u := l.u
	now := h.clk.Now()
	s := sample(l, c, now)
	// Log first, free second: a dispatch that sees the freed capacity then
	// also finds this record and knows whose capacity it was.
	kick := u.done.add(release{class: l.Class, cost: l.Cost, virtID: l.virtID, s: s, at: now})
	if l.mode == admission.ModeEnforce {
		u.gate.Release(l.Class, l.Cost, now.UnixNano(), l.pending, l.AdmittedAt.UnixNano())
	} else if l.mode == admission.ModeShadow {
		u.gate.Release(l.Class, l.Cost, now.UnixNano(), l.pending, l.AdmittedAt.UnixNano())
		if l.virtHeld {
			u.virt.Release(l.Class, l.Cost, now.UnixNano(), true, l.AdmittedAt.UnixNano())
		}
	}
	*l = Lease{}
	if kick && !h.stopped.Load() {
		h.root.Send(u.ctrl, releaseKick{})
	}
}

// sample turns a finished lease into the controller's evidence.
func sample(l *Lease, c Completion, now time.Time) admission.Sample {
	held := now.Sub(l.AdmittedAt)
	s := admission.Sample{Held: held, Stream: l.stream, Drop: c.Drop}
	ttft := held
	if l.stream && !l.firstByte.IsZero() {
		ttft = l.firstByte.Sub(l.AdmittedAt)
	}
	if l.timed && (!l.stream || !l.firstByte.IsZero()) {
		// The provider's own time, from the request written; the
		// gateway's wait to read it travels beside it.
		ttft, s.Local = l.provider, l.local
	}
	switch c.Outcome {
	case Success:
		s.OK, s.Latency = true, ttft
	case Cancelled:
		if !l.firstByte.IsZero() {
			// The answer had begun: its first byte is a sample like any.
			s.OK, s.Latency = true, ttft
		} else {
			s.Censored, s.Latency = true, held
		}
	case Timeout:
		s.Censored, s.Latency = true, held
	}
	return s
}

// ObservePressure feeds a resource-pressure observation of the gateway's
// own process to every upstream: critical halves each limit at once, once
// per window; high stops growth.
func (h *Handle) ObservePressure(sev admission.Pressure, reason string) {
	now := h.clk.Now()
	h.pressure.Store(&pressureObs{severity: sev, reason: reason, at: now})
	h.all(func(u *upstream) { h.root.Send(u.ctrl, &pressureMsg{sev: sev}) })
}

// ObserveCPU says whether the CPU the gateway runs on is used up (the
// machine's CPUs, or the process's cgroup quota; the pressure actor
// samples it once a second). While it is, the controllers do not take a
// latency rise for a provider's queue below the level the provider
// served (admission.Reading.Busy): nothing waits on the message.
func (h *Handle) ObserveCPU(saturated bool) { h.cpuBusy.Store(saturated) }

// Tick runs a controller step on every upstream now (the controllers do
// this on their own timers unless Options.ManualTicks): measures, judges
// a finished phase, expires deadlines and dispatches.
func (h *Handle) Tick() {
	h.all(func(u *upstream) { h.root.Send(u.ctrl, manualTick{}) })
}

// CloseWindow closes every upstream's reporting window now (normally on a
// timer): evicts idle lanes and records the window.
func (h *Handle) CloseWindow() {
	h.all(func(u *upstream) { h.root.Send(u.ctrl, windowTick{}) })
}

// Sync waits until every controller has handled everything sent to it
// before the call, and republishes the snapshots.
func (h *Handle) Sync() {
	if h.stopped.Load() {
		return
	}
	h.all(func(u *upstream) { _, _ = h.root.RequestFuture(u.ctrl, syncMsg{}, 5*time.Second).Result() })
}

// Stop rejects every queued request with admission_shutdown, refuses new
// ones, and stops the actors. It is idempotent.
func (h *Handle) Stop() {
	h.stop.Do(func() {
		h.addMu.Lock() // no upstream starts after the loop below
		h.stopped.Store(true)
		h.addMu.Unlock()
		_ = h.root.PoisonFuture(h.follower).Wait() // before the controllers it sends to
		h.all(func(u *upstream) { u.stop() })
		h.root.ActorSystem().EventStream.Unsubscribe(h.sub)
	})
}

// deadLetter re-routes a waiter (or withdrawal) sent to a lane that was
// stopped in the meantime: its upstream's controller routes it to the
// tenant's current lane, so an eviction race never loses a request.
func (h *Handle) deadLetter(evt any) {
	dl, ok := evt.(*actor.DeadLetterEvent)
	if !ok {
		return
	}
	switch m := dl.Message.(type) {
	case *waiter:
		if m.u == nil || m.u.h != h {
			return
		}
		if h.stopped.Load() {
			m.resolveCurrent(Shutdown)
			m.unref()
			return
		}
		h.root.Send(m.u.ctrl, m)
	case *withdraw:
		if m.u != nil && m.u.h == h && !h.stopped.Load() && dl.PID != m.u.ctrl {
			h.root.Send(m.u.ctrl, m)
		}
	}
}
