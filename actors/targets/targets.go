// Package targets owns what the gateway has observed about each upstream
// target (connection + model): attempts, successes, failures by class,
// consecutive failures and time to first byte, and the target's circuit
// breaker and cooldown. The transport reports every attempt with one
// fire-and-forget message; readers (health, routing) see an immutable
// snapshot the actor publishes, never the actor's state.
//
// Failures are counted by incident (see breaker): the failures of
// attempts that were in flight together are one incident, which opens the
// circuit and cools the target for the provider's own hint (Retry-After, a
// reset header, a body hint) or, without one, a short jittered backoff by
// the number of consecutive incidents, capped at 30 s by default; a quota,
// billing or credential failure cools it for long. After the cooldown the
// circuit is half open and lets a single probe through, whose success puts
// the target back at once. A later, shorter hint never shortens a
// cooldown; request-caused errors and client cancellations never cool a
// target.
package targets

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/messages"
)

// Stats is one target's published view.
type Stats struct {
	Target              string            `json:"target"`
	Attempts            uint64            `json:"attempts"`
	Successes           uint64            `json:"successes"`
	Failures            map[string]uint64 `json:"failures,omitempty"`
	ConsecutiveFailures int               `json:"consecutiveFailures"`
	LastFailureClass    string            `json:"lastFailureClass,omitempty"`
	LastFailureAt       *time.Time        `json:"lastFailureAt,omitempty"`
	TTFBEWMAMillis      float64           `json:"ttfbEwmaMs"`
	// ErrorRate is an exponentially weighted share of attempts that failed
	// on the provider's side.
	ErrorRate         float64 `json:"errorRate"`
	LastFailureReason string  `json:"lastFailureReason,omitempty"`
	// Circuit is closed, open or half_open as of At.
	Circuit string `json:"circuit"`
	// CooldownUntil is when the target may be tried again.
	CooldownUntil  *time.Time `json:"cooldownUntil,omitempty"`
	CooldownReason string     `json:"cooldownReason,omitempty"`
	// Incidents counts consecutive incidents (reset by a success after
	// the last one); IncidentSince is when the current one opened.
	Incidents     int        `json:"incidents,omitempty"`
	IncidentSince *time.Time `json:"incidentSince,omitempty"`

	// Routing reads these; they are the same facts in typed form.
	// RateLimited: the cooldown is a provider's rate limit (a 429), not
	// a failure.
	Open        bool      `json:"-"`
	CoolUntil   time.Time `json:"-"`
	RateLimited bool      `json:"-"`
}

// Snapshot is the immutable published state.
type Snapshot struct {
	At      time.Time `json:"at"`
	Targets []Stats   `json:"targets"`
}

// Handle is what the transport holds: a way to report and to read.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	snap atomic.Pointer[Snapshot]
	// slots holds the per-target atomics the request path touches (by
	// target id); it grows when Add registers targets.
	slots *growable.List[slot]
	// names are the targets' names by id, as the actor incarnations
	// start from them (Add replaces the slice; the actor owns the writes).
	names atomic.Pointer[[]string]
	opts  Options
	// flushPending is set while a flush of the success accumulators is
	// scheduled.
	flushPending atomic.Bool
	stopped      atomic.Bool
	// changed is closed (and replaced) by every publish, so a request
	// waiting for a cooling target wakes when a probe closes its circuit
	// instead of polling the snapshot.
	changed atomic.Pointer[chan struct{}]
	// observers is the observation subscriber the composition root set
	// (SubscribeObservations); nil: none.
	observers atomic.Pointer[actor.PID]
	// cluster is the cooldowns actor, the cooldown subscriber (cluster
	// mode: StartCluster); nil on a single node.
	cluster atomic.Pointer[Cluster]
	clk     clock.Clock
}

// SubscribeObservations makes the actor send pid each attempt's
// rate-limit headers as a *messages.QuotaObserved (for a run of
// coalesced successes, the latest). The composition root subscribes the
// link that hands them to the quota and ledger actors before any request
// runs; the actor only sends, so it never does their work.
func (h *Handle) SubscribeObservations(pid *actor.PID) { h.observers.Store(pid) }

// observed sends the observation subscriber target's headers.
func (a *targetsActor) observed(target int, obs *messages.QuotaObservation) {
	if pid := a.h.observers.Load(); pid != nil {
		a.h.root.Send(pid, &messages.QuotaObserved{Target: target, Obs: obs})
	}
}

// ID returns the id of the target named name, from the published names
// (a peer's cooldown names its target).
func (h *Handle) ID(name string) (int, bool) {
	for i, n := range *h.names.Load() {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// Changed returns a channel that is closed at the next publish of the
// snapshot. Read it before reading the snapshot it should outdate.
func (h *Handle) Changed() <-chan struct{} { return *h.changed.Load() }

// successAcc is the fast path of Report: a success on a target whose state
// a success cannot change is only counted here, and the actor folds the
// counts in at its next flush (at most CoalesceDelay later). Padding keeps
// targets on separate cache lines.
type successAcc struct {
	n       atomic.Uint64
	timed   atomic.Uint64 // of n, the successes carrying a TTFB sample
	ttfbSum atomic.Int64  // nanoseconds, over the timed successes
	obs     atomic.Pointer[messages.QuotaObservation]
	_       [32]byte
}

// slot is one target's request-path state: the success accumulator and
// when the half-open probe was claimed (Unix nanoseconds; 0 = free; the
// transport claims, the actor releases).
type slot struct {
	acc   successAcc
	probe atomic.Int64
}

// CoalesceDelay bounds how long a success on a clean target waits before
// the actor sees it (its count, TTFB and rate-limit headers).
const CoalesceDelay = 20 * time.Millisecond

// Report records an attempt outcome, fire-and-forget. Failures, probes and
// successes on targets that are failing, cooling or half-open go to the
// actor at once, in order; a success on a clean target (no failure streak,
// circuit closed, no cooldown) changes no routing state, so it is
// accumulated with atomics and the actor is woken at most once per
// CoalesceDelay. Under load this turns one actor message (and goroutine
// wake-up) per request into one per window.
func (h *Handle) Report(m *messages.AttemptFinished) {
	if h.stopped.Load() {
		return // a request finishing during shutdown: nothing left to route
	}
	if m.Class == messages.OK && !m.Probe && !m.MidStream && h.clean(m.Target) {
		a := &h.slots.At(m.Target).acc
		if !m.NoLatency {
			a.ttfbSum.Add(int64(m.TTFB))
			a.timed.Add(1)
		}
		if m.Quota != nil && !m.Quota.Empty() {
			a.obs.Store(m.Quota)
		}
		a.n.Add(1)
		if !h.flushPending.Load() && h.flushPending.CompareAndSwap(false, true) {
			h.root.Send(h.pid, flushSoon{})
		}
		return
	}
	h.root.Send(h.pid, m)
}

// clean reports whether the published state of target id is one a success
// cannot change.
func (h *Handle) clean(id int) bool {
	s := h.snap.Load()
	if s == nil || id < 0 || id >= len(s.Targets) || id >= h.slots.Len() {
		return false
	}
	t := &s.Targets[id]
	return t.ConsecutiveFailures == 0 && !t.Open && (t.CoolUntil.IsZero() || t.CoolUntil.Before(s.At))
}

// addTargets registers targets with the actor (Add).
type addTargets struct{ names []string }

// Add registers targets (a config reload that adds them): they take the
// ids Len, Len+1, … in order, and Add returns the first. It returns once
// the actor has published a snapshot that includes them, so a config
// that routes to them can be published next. Calls must not overlap.
func (h *Handle) Add(names []string) (int, error) {
	if h.stopped.Load() {
		return 0, errors.New("targets: Add after Stop")
	}
	first := h.slots.Grow(len(names))
	res, err := h.root.RequestFuture(h.pid, &addTargets{names: slices.Clone(names)}, 5*time.Second).Result()
	if err != nil {
		return 0, fmt.Errorf("registering %d targets with the targets actor: %w", len(names), err)
	}
	if n := res.(int); n != first+len(names) {
		return 0, fmt.Errorf("targets actor holds %d targets after adding %d to %d", n, len(names), first)
	}
	return first, nil
}

// add appends the new targets' state and publishes. The slots exist
// already (Add grows them before it sends).
func (a *targetsActor) add(m *addTargets) {
	a.drain()
	a.names = append(slices.Clip(a.names), m.names...)
	a.h.names.Store(&a.names)
	a.st = append(a.st, make([]state, len(m.names))...)
	a.publish()
}

// Len is the number of targets registered.
func (h *Handle) Len() int { return len(*h.names.Load()) }

// Snapshot returns the latest published view.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// peerCooldown tells the actor that another node of the cluster opened a
// target's circuit: it cools until until, for reason.
type peerCooldown struct {
	target int
	until  time.Time
	reason string
}

// PeerCooldown applies a cooldown another node of the cluster saw
// (fire-and-forget).
func (h *Handle) PeerCooldown(target int, until time.Time, reason string) {
	if h.stopped.Load() {
		return
	}
	h.root.Send(h.pid, &peerCooldown{target: target, until: until, reason: reason})
}

// Stop stops the actor and waits for it. Reports after Stop are dropped
// (rather than becoming dead letters).
func (h *Handle) Stop() {
	h.stopped.Store(true)
	_ = h.root.PoisonFuture(h.pid).Wait()
	if cl := h.cluster.Swap(nil); cl != nil {
		cl.stop() // after the targets actor, which sends to it
	}
}

// PublishInterval is how often successes alone are republished; failures
// publish at once.
const PublishInterval = time.Second

type tick struct{}

// flushSoon asks the actor to fold the success accumulators in after
// CoalesceDelay; flush does it.
type (
	flushSoon struct{}
	flush     struct{}
)

type state struct {
	attempts, successes uint64
	failures            [messages.NumFailureClasses]uint64
	consecutive         int
	lastClass           messages.FailureClass
	lastFailureAt       time.Time
	ttfbEWMA            float64 // milliseconds
	breaker
}

// foldTTFB moves the TTFB average toward meanMs by n EWMA steps of weight
// 0.2 (n timed successes whose mean it is); the first sample sets it.
func (s *state) foldTTFB(meanMs float64, n uint64) {
	if s.ttfbEWMA == 0 {
		s.ttfbEWMA = meanMs
		return
	}
	s.ttfbEWMA += (1 - math.Pow(0.8, float64(n))) * (meanMs - s.ttfbEWMA)
}

type targetsActor struct {
	h     *Handle
	clk   clock.Clock
	names []string
	st    []state
	dirty bool
	ticks repeat.Ticker
	// flushTimer is the scheduled flush, if any.
	flushTimer clock.Timer
	// nextExpiry is the earliest cooldown end not yet republished.
	nextExpiry time.Time
}

// Spawn starts the actor for the named targets (index = target id) with
// default breaker settings.
func Spawn(system *actor.ActorSystem, names []string, clk clock.Clock) (*Handle, error) {
	return SpawnWith(system, names, clk, Options{})
}

// SpawnWith starts the actor with breaker options.
func SpawnWith(system *actor.ActorSystem, names []string, clk clock.Clock, o Options) (*Handle, error) {
	o.defaults()
	h := &Handle{root: system.Root, slots: &growable.List[slot]{}, opts: o, clk: clk}
	h.slots.Grow(len(names))
	names = slices.Clone(names)
	h.names.Store(&names)
	ch := make(chan struct{})
	h.changed.Store(&ch)
	(&targetsActor{h: h, clk: clk, names: names, st: make([]state, len(names))}).publish()
	// Each incarnation starts from the published snapshot (restart.go)
	// and the names registered so far.
	produce := func() actor.Actor {
		names := *h.names.Load()
		return &targetsActor{h: h, clk: clk, names: names, st: restoreState(h.snap.Load(), len(names))}
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(produce, actor.WithGuardian(strategy)), fmt.Sprintf("targets-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning targets actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

func (a *targetsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		a.ticks.Start(ctx, a.clk, PublishInterval, tick{})
	case *actor.Restarting:
		// Only the timers: the fresh actor drains the accumulators (the
		// panic may have come from draining them). The flush the failed
		// incarnation scheduled is gone with its timer, so the next
		// report schedules anew. Not on Started: the first Started may
		// run after reports already scheduled a flush.
		a.stopTimers()
		a.h.flushPending.Store(false)
	case *actor.Stopping:
		a.stopTimers()
		a.drain()
	case *messages.AttemptFinished:
		a.drain() // earlier fast-path successes first, to keep the order
		a.observe(m)
	case *peerCooldown:
		if m.target >= 0 && m.target < len(a.st) && a.st[m.target].peer(m.until, m.reason) {
			a.publish() // routing must see it now
		}
	case flushSoon:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.flushTimer = a.clk.AfterFunc(CoalesceDelay, func() { root.Send(self, flush{}) })
	case flush:
		a.h.flushPending.Store(false) // before draining: later reports schedule anew
		a.drain()
	case *addTargets:
		a.add(m)
		ctx.Respond(len(a.st))
	case tick:
		a.drain()
		now := a.clk.Now()
		if a.dirty || (!a.nextExpiry.IsZero() && !now.Before(a.nextExpiry)) {
			a.publish()
		}
	}
}

func (a *targetsActor) stopTimers() {
	a.ticks.Stop()
	if a.flushTimer != nil {
		a.flushTimer.Stop()
	}
}

// drain folds the fast-path successes into the state.
func (a *targetsActor) drain() {
	for i := range a.st {
		acc := &a.h.slots.At(i).acc
		n := acc.n.Swap(0)
		if n == 0 {
			continue
		}
		timed, sum := acc.timed.Swap(0), acc.ttfbSum.Swap(0)
		if obs := acc.obs.Swap(nil); obs != nil {
			a.observed(i, obs)
		}
		s := &a.st[i]
		s.attempts += n
		s.successes += n
		if timed > 0 {
			s.foldTTFB(float64(sum)/float64(timed)/float64(time.Millisecond), timed)
		}
		s.errorRate *= math.Pow(0.9, float64(n))
		a.dirty = true
	}
}

func (a *targetsActor) observe(m *messages.AttemptFinished) {
	if m.Target < 0 || m.Target >= len(a.st) {
		return
	}
	if m.Quota != nil && !m.Quota.Empty() {
		a.observed(m.Target, m.Quota)
	}
	s := &a.st[m.Target]
	if !m.MidStream {
		s.attempts++
	}
	if m.Probe {
		a.h.slots.At(m.Target).probe.Store(0)
	}
	if m.Class == messages.Canceled {
		a.dirty = true
		return
	}
	if m.Class == messages.OK {
		s.successes++
		s.consecutive = 0
		if !m.NoLatency {
			s.foldTTFB(float64(m.TTFB)/float64(time.Millisecond), 1)
		}
		if s.succeeded(m.Probe, m.Started) {
			a.publish() // the circuit closed: routing must see it now
			return
		}
		a.dirty = true
		return
	}
	s.failures[m.Class]++
	if m.Class.ProviderSide() {
		s.consecutive++
		was, wasOpen := s.coolUntil, s.open
		s.failed(m, a.h.opts, a.clk.Now())
		if cl := a.h.cluster.Load(); cl != nil && (s.coolUntil.After(was) || s.open && !wasOpen) {
			// Cluster mode: the cooldowns actor tells the other members.
			a.h.root.Send(cl.pid, &cooledDown{target: m.Target, name: a.names[m.Target], until: s.coolUntil, reason: s.coolReason})
		}
	}
	s.lastClass = m.Class
	s.lastFailureAt = m.At
	a.publish()
}

func (a *targetsActor) publish() {
	now := a.clk.Now()
	snap := &Snapshot{At: now, Targets: make([]Stats, len(a.st))}
	a.nextExpiry = time.Time{}
	for i := range a.st {
		s := &a.st[i]
		out := Stats{Target: a.names[i], Attempts: s.attempts, Successes: s.successes, ConsecutiveFailures: s.consecutive, TTFBEWMAMillis: s.ttfbEWMA}
		s.view(&out, now)
		if until := s.coolUntil; until.After(now) && (a.nextExpiry.IsZero() || until.Before(a.nextExpiry)) {
			a.nextExpiry = until
		}
		for c, n := range s.failures {
			if n > 0 {
				if out.Failures == nil {
					out.Failures = map[string]uint64{}
				}
				out.Failures[messages.FailureClass(c).String()] = n
			}
		}
		if !s.lastFailureAt.IsZero() {
			t := s.lastFailureAt
			out.LastFailureAt = &t
			out.LastFailureClass = s.lastClass.String()
		}
		snap.Targets[i] = out
	}
	a.h.snap.Store(snap)
	a.dirty = false
	next := make(chan struct{})
	close(*a.h.changed.Swap(&next))
}
