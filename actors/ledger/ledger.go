// Package ledger owns the pre-request budgets of every (connection,
// model): rolling request and token limits per minute, hour and day
// (internal/rolling: never more than the limit in any window of that
// length), from the configuration and from the provider's own rate-limit
// headers (the smaller wins).
//
// The request path never waits for the actor: Reserve checks and charges
// every window of the slot in one step under the slot's own small lock,
// so a reservation is exact under any concurrency. Settle adjusts the
// windows the same way and tells the actor with one fire-and-forget
// message for its accounting; limits learned from headers arrive the same
// way. The actor publishes an immutable snapshot for the quota endpoint
// and the estimate adapter.
package ledger

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/messages"
)

// SlotSpec is one budget: a (connection, upstream model) pair.
type SlotSpec struct {
	Connection string
	Model      string
	// Configured are the configured windows (0: none).
	Configured rolling.Limits
}

// Sources of a window's limit.
const (
	SourceConfigured = "configured"
	SourceHeaders    = "response_headers"
)

// Limits are a slot's effective windows (0 = no limit known) and where
// each limit came from.
type Limits struct {
	Windows rolling.Limits
	Source  [rolling.NumDims][rolling.NumPeriods]string
}

type slot struct {
	spec   SlotSpec // the actor's once registered (SetConfigured changes its limits)
	limits atomic.Pointer[Limits]
	// configured is spec.Configured for readers other than the actor.
	configured atomic.Pointer[rolling.Limits]
	mu         sync.Mutex
	w          rolling.Windows // guarded by mu
	// seen are the last header limits sent to the actor, by dimension
	// and period.
	seen [rolling.NumDims][rolling.NumPeriods]atomic.Int64
}

// windows returns the slot's windows with lim in force; mu is held.
func (sl *slot) windows(lim *Limits) *rolling.Windows {
	if sl.w.Limits() != lim.Windows {
		sl.w.Set(lim.Windows)
	}
	return &sl.w
}

// Handle is what the transport holds.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	clk  clock.Clock
	// slots are the budgets by slot index; AddSlots grows them.
	slots *growable.List[slot]
	snap  atomic.Pointer[Snapshot]
	// stopped makes Stop idempotent (a second Poison would be a dead letter).
	stopped atomic.Bool
}

// Reservation is what Reserve held; settle it exactly once.
type Reservation struct {
	Slot int
	res  rolling.Reservation
	// Active is true when anything was held (a slot without limits holds
	// nothing: fail open).
	Active bool
}

// settled reports a settled or refunded reservation to the actor.
type settled struct {
	Slot   int
	Actual uint64
	Refund bool
}

// limitsObserved carries the limits read from response headers, by
// dimension and period (0: not in the headers).
type limitsObserved struct {
	Slot   int
	Limits rolling.Limits
}

type tick struct{}

// Spawn starts the ledger for slots.
func Spawn(system *actor.ActorSystem, slots []SlotSpec, clk clock.Clock) (*Handle, error) {
	h := &Handle{root: system.Root, clk: clk, slots: &growable.List[slot]{}}
	h.appendSlots(slots)
	newLedgerActor(h).publish()
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newLedgerActor(h) }, actor.WithGuardian(strategy)),
		fmt.Sprintf("ledger-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning ledger actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

// appendSlots adds the slots' request-path state with their configured
// limits.
func (h *Handle) appendSlots(specs []SlotSpec) int {
	first := h.slots.Len()
	for _, s := range specs {
		i := h.slots.Grow(1)
		sl := h.slots.At(i)
		sl.spec = s
		sl.configured.Store(&s.Configured)
		sl.limits.Store(effective(s.Configured, rolling.Limits{}))
	}
	return first
}

// addSlots tells the actor that slots were appended.
type addSlots struct{}

// AddSlots adds budgets (a config reload that adds a connection or an
// upstream model): they take the next slot indexes, and AddSlots returns
// the first. It returns once the actor keeps accounts for them and has
// published a snapshot with them. Calls must not overlap.
func (h *Handle) AddSlots(specs []SlotSpec) (int, error) {
	if h.stopped.Load() {
		return 0, errors.New("ledger: AddSlots after Stop")
	}
	first := h.appendSlots(specs)
	if _, err := h.root.RequestFuture(h.pid, addSlots{}, 5*time.Second).Result(); err != nil {
		return 0, fmt.Errorf("registering %d budgets with the ledger actor: %w", len(specs), err)
	}
	return first, nil
}

// Len is the number of slots.
func (h *Handle) Len() int { return h.slots.Len() }

// Configured is slot s's connection, model and configured limits, as
// last set.
func (h *Handle) Configured(s int) (SlotSpec, bool) {
	sl, ok := h.slots.Get(s)
	if !ok {
		return SlotSpec{}, false
	}
	return SlotSpec{Connection: sl.spec.Connection, Model: sl.spec.Model, Configured: *sl.configured.Load()}, true
}

// Stop stops the actor and waits for it. It is idempotent.
func (h *Handle) Stop() {
	if h.stopped.CompareAndSwap(false, true) {
		_ = h.root.PoisonFuture(h.pid).Wait()
	}
}

// Snapshot returns the latest published view.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// Limits returns a slot's effective limits.
func (h *Handle) Limits(s int) *Limits { return h.slots.At(s).limits.Load() }

// Check tells whether a request of cost tokens fits every window of the
// slot now, without reserving anything, and when it would.
func (h *Handle) Check(s int, cost int64, now time.Time) (routing.Budget, time.Time) {
	return h.reserve(s, cost, now, nil)
}

// Reserve holds cost tokens and one request in every window of the slot,
// in one step. On refusal it returns the verdict and when the request
// would fit.
func (h *Handle) Reserve(s int, cost int64, now time.Time) (Reservation, routing.Budget, time.Time) {
	r := Reservation{Slot: s}
	b, at := h.reserve(s, cost, now, &r)
	return r, b, at
}

// reserve checks, and charges when r is not nil.
func (h *Handle) reserve(s int, cost int64, now time.Time, r *Reservation) (routing.Budget, time.Time) {
	sl, ok := h.slots.Get(s)
	if !ok {
		return routing.BudgetUnconfigured, time.Time{}
	}
	lim := sl.limits.Load()
	if !lim.Windows.Any() {
		return routing.BudgetUnconfigured, time.Time{}
	}
	n := now.UnixNano()
	// Every request costs at least a token: a full token window is
	// exhausted even for a caller that asks about a cost of 0.
	c := rolling.Cost{rolling.Requests: 1, rolling.Tokens: max(cost, 1)}
	sl.mu.Lock()
	w := sl.windows(lim)
	ref, fits := w.Fits(n, c)
	if !fits {
		full := w.Room(n, ref.Dim) == 0
		sl.mu.Unlock()
		if full {
			return routing.BudgetExhausted, time.Unix(0, ref.RetryAt)
		}
		return routing.BudgetInsufficient, time.Unix(0, ref.RetryAt)
	}
	if r != nil {
		r.res, _, _ = w.Reserve(n, c)
		r.Active = true
	}
	sl.mu.Unlock()
	return routing.BudgetAffordable, time.Time{}
}

// Settle replaces the reservation by what the request really used (actual
// tokens) and tells the actor. Refund releases it entirely: the request
// never reached the provider's meter. It is a no-op for an inactive
// reservation.
func (h *Handle) Settle(r *Reservation, actual int64, refund bool) {
	if !r.Active {
		return
	}
	r.Active = false
	sl := h.slots.At(r.Slot)
	a := max(actual, 0)
	if refund {
		a = 0
	}
	now := h.clk.Now().UnixNano()
	sl.mu.Lock()
	sl.w.Settle(now, &r.res, a, refund)
	sl.mu.Unlock()
	h.root.Send(h.pid, &settled{Slot: r.Slot, Actual: uint64(a), Refund: refund})
}

// headerPeriod is the period of a header reading's window, if the ledger
// enforces it.
func headerPeriod(r *messages.QuotaReading) (rolling.Dim, rolling.Period, bool) {
	switch {
	case r.Dimension == messages.DimDailyRequests:
		return rolling.Requests, rolling.Day, true
	case r.Dimension != messages.DimRequests && r.Dimension != messages.DimTokens:
		return 0, 0, false
	}
	d := rolling.Requests
	if r.Dimension == messages.DimTokens {
		d = rolling.Tokens
	}
	for p := range rolling.NumPeriods {
		if r.Window == p.Width() {
			return d, p, true
		}
	}
	return 0, 0, false
}

// ObserveLimits feeds the limits read from a response's headers (requests
// and tokens per minute, hour or day; fire-and-forget).
func (h *Handle) ObserveLimits(s int, obs *messages.QuotaObservation) {
	sl, ok := h.slots.Get(s)
	if !ok || obs == nil {
		return
	}
	m := limitsObserved{Slot: s}
	changed := false
	for i := 0; i < obs.N; i++ {
		r := &obs.Readings[i]
		d, p, ok := headerPeriod(r)
		if !ok || r.Flags&messages.HasLimit == 0 || r.Limit < 1 {
			continue
		}
		v := int64(r.Limit)
		m.Limits[d][p] = v
		if sl.seen[d][p].Swap(v) != v {
			changed = true
		}
	}
	if changed { // the same limits on every response need no message
		h.root.Send(h.pid, &m)
	}
}

// account is the actor's bookkeeping for one slot.
type account struct {
	refunds       uint64
	totalTokens   uint64
	totalRequests uint64
}

type ledgerActor struct {
	h      *Handle
	acct   []account
	header []rolling.Limits
	ticks  repeat.Ticker
}

// PublishInterval is how often the ledger is republished.
const PublishInterval = 250 * time.Millisecond

// strategy restarts the ledger actor after a panic: budgets are enforced
// by the handle's windows, which survive; the fresh actor re-learns the
// header limits from the handle and only its totals start over.
var strategy = supervise.Restart("ledger")

// newLedgerActor builds a fresh actor for h, knowing the header limits
// the handle has seen (so a later observation of one window does not
// forget the others).
func newLedgerActor(h *Handle) *ledgerActor {
	a := &ledgerActor{h: h}
	a.grow()
	return a
}

// grow extends the actor's accounts to the handle's slots.
func (a *ledgerActor) grow() {
	for i := len(a.acct); i < a.h.slots.Len(); i++ {
		sl := a.h.slots.At(i)
		var seen rolling.Limits
		for d := range seen {
			for p := range seen[d] {
				seen[d][p] = sl.seen[d][p].Load()
			}
		}
		a.acct = append(a.acct, account{})
		a.header = append(a.header, seen)
	}
}

func (a *ledgerActor) Receive(ctx actor.Context) {
	if a.ticks.Lifecycle(ctx, a.h.clk, PublishInterval, tick{}) {
		return
	}
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *settled:
		a.settle(m)
	case *limitsObserved:
		a.limits(m)
	case addSlots:
		a.grow()
		a.publish()
		ctx.Respond(len(a.acct))
	case *setConfigured:
		if m.slot >= 0 && m.slot < len(a.acct) {
			sl := a.h.slots.At(m.slot)
			sl.spec.Configured = m.limits
			sl.configured.Store(&m.limits)
			a.effective(m.slot)
			a.publish()
		}
		ctx.Respond(true)
	case tick:
		// Windows move on the request path and with time; republish.
		a.publish()
	}
}

func (a *ledgerActor) settle(m *settled) {
	if m.Slot < 0 || m.Slot >= len(a.acct) {
		return
	}
	ac := &a.acct[m.Slot]
	if m.Refund {
		ac.refunds++
	} else {
		ac.totalTokens += m.Actual
		ac.totalRequests++
	}
}

func (a *ledgerActor) limits(m *limitsObserved) {
	if m.Slot < 0 || m.Slot >= len(a.acct) {
		return
	}
	for d := range m.Limits {
		for p, v := range m.Limits[d] {
			if v > 0 {
				a.header[m.Slot][d][p] = v
			}
		}
	}
	a.effective(m.Slot)
	a.publish()
}

// setConfigured changes a slot's configured limits (SetConfigured).
type setConfigured struct {
	slot   int
	limits rolling.Limits
}

// SetConfigured changes slot s's configured limits (a reload changing its
// connection's or model's limits; 0: none). The effective limits follow
// at once (the smaller of the configured and the provider's); what the
// windows counted stays counted. It returns once they are in force.
func (h *Handle) SetConfigured(s int, limits rolling.Limits) error {
	if h.stopped.Load() {
		return errors.New("ledger: SetConfigured after Stop")
	}
	if _, err := h.root.RequestFuture(h.pid, &setConfigured{slot: s, limits: limits}, 5*time.Second).Result(); err != nil {
		return fmt.Errorf("changing the limits of budget %d: %w", s, err)
	}
	return nil
}

// effective recomputes slot i's effective limits from its configured
// ones and the header limits seen.
func (a *ledgerActor) effective(i int) {
	sl := a.h.slots.At(i)
	sl.limits.Store(effective(sl.spec.Configured, a.header[i]))
}

// effective picks, per window, the smaller known limit: a configured
// limit below the provider's is the operator's choice (a share of an
// org-wide limit), and the provider's below the configured one is the
// truth.
func effective(configured, header rolling.Limits) *Limits {
	l := &Limits{}
	for d := range configured {
		for p := range configured[d] {
			c, hd := max(configured[d][p], 0), header[d][p]
			switch {
			case c == 0 && hd == 0:
			case hd == 0 || (c != 0 && c <= hd):
				l.Windows[d][p], l.Source[d][p] = c, SourceConfigured
			default:
				l.Windows[d][p], l.Source[d][p] = hd, SourceHeaders
			}
		}
	}
	return l
}
