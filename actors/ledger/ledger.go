// Package ledger owns the pre-request token budget of every (connection,
// model): epoch-aligned one-minute windows with a token and a request
// limit, from the configuration and from the provider's own rate-limit
// headers (the smaller wins).
//
// The request path never waits for the actor: Reserve is a compare-and-
// swap on the window counters the actor publishes in its Handle, so a
// reservation is exact under any concurrency. Settle and refund adjust the
// counter the same way and tell the actor with one fire-and-forget message
// for its accounting; limits learned from headers arrive the same way. The
// actor publishes an immutable snapshot for the quota endpoint and the
// estimate adapter.
package ledger

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/omniroute/gateway/actors/supervise"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/messages"
)

// Window is the ledger's window: limits are per minute.
const Window = time.Minute

// SlotSpec is one budget: a (connection, upstream model) pair.
type SlotSpec struct {
	Connection string
	Model      string
	// Configured per-minute limits; 0 means none configured.
	TokensPerMinute   int64
	RequestsPerMinute int64
}

// Limits are a slot's effective per-minute limits (0 = no limit known).
type Limits struct {
	Tokens         uint64
	Requests       uint64
	TokensSource   string // "configured", "response_headers" or ""
	RequestsSource string
}

type slot struct {
	spec     SlotSpec // the actor's once registered (SetConfigured changes its limits)
	limits   atomic.Pointer[Limits]
	tokens   ledger.Counter
	requests ledger.Counter
	// seenTok and seenReq are the last header limits sent to the actor.
	seenTok, seenReq atomic.Uint64
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
	Slot     int
	Idx      uint64
	Tokens   uint64
	Requests uint64
	// Active is true when anything was held (a slot without limits holds
	// nothing: fail open).
	Active bool
}

// Settled reports a settled or refunded reservation to the actor.
type Settled struct {
	Slot     int
	Idx      uint64
	Reserved uint64
	Actual   uint64
	Refund   bool
}

// LimitsObserved carries per-minute limits read from response headers.
type LimitsObserved struct {
	Slot     int
	Tokens   uint64
	Requests uint64
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
		l := &Limits{}
		if s.TokensPerMinute > 0 {
			l.Tokens, l.TokensSource = uint64(s.TokensPerMinute), "configured"
		}
		if s.RequestsPerMinute > 0 {
			l.Requests, l.RequestsSource = uint64(s.RequestsPerMinute), "configured"
		}
		i := h.slots.Grow(1)
		sl := h.slots.At(i)
		sl.spec = s
		sl.limits.Store(l)
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

// Check tells whether a request of cost tokens fits in the slot's current
// window without reserving anything, and when the window ends.
func (h *Handle) Check(s int, cost int64, now time.Time) (routing.Budget, time.Time) {
	sl, ok := h.slots.Get(s)
	if !ok {
		return routing.BudgetUnconfigured, time.Time{}
	}
	l := sl.limits.Load()
	if l.Tokens == 0 && l.Requests == 0 {
		return routing.BudgetUnconfigured, time.Time{}
	}
	idx := ledger.WindowIndex(now, Window)
	_, end := ledger.WindowBounds(now, Window)
	if v := verdict(sl.tokens.Used(idx), uint64(max(cost, 0)), l.Tokens); v != routing.BudgetAffordable {
		return v, end
	}
	return verdict(sl.requests.Used(idx), 1, l.Requests), end
}

func verdict(used, cost, limit uint64) routing.Budget {
	switch {
	case limit == 0:
		return routing.BudgetAffordable
	case used >= limit:
		return routing.BudgetExhausted
	case used+cost > limit && used != 0:
		return routing.BudgetInsufficient
	}
	return routing.BudgetAffordable
}

// Reserve holds cost tokens and one request in the slot's current window.
// On refusal it returns the verdict and when the window ends.
func (h *Handle) Reserve(s int, cost int64, now time.Time) (Reservation, routing.Budget, time.Time) {
	sl, ok := h.slots.Get(s)
	if !ok {
		return Reservation{}, routing.BudgetUnconfigured, time.Time{}
	}
	l := sl.limits.Load()
	if l.Tokens == 0 && l.Requests == 0 {
		return Reservation{}, routing.BudgetUnconfigured, time.Time{}
	}
	idx := ledger.WindowIndex(now, Window)
	_, end := ledger.WindowBounds(now, Window)
	r := Reservation{Slot: s, Idx: idx, Active: true}
	c := uint64(max(cost, 0))
	if l.Tokens > 0 {
		charged, before, ok := sl.tokens.Reserve(idx, c, l.Tokens)
		if !ok {
			return Reservation{}, verdict(before, c, l.Tokens), end
		}
		r.Idx, r.Tokens = charged, c
	}
	if l.Requests > 0 {
		charged, before, ok := sl.requests.Reserve(r.Idx, 1, l.Requests)
		if !ok || charged != r.Idx {
			if ok {
				sl.requests.Adjust(charged, 1, 0)
			}
			if r.Tokens > 0 {
				sl.tokens.Adjust(r.Idx, r.Tokens, 0)
			}
			return Reservation{}, verdict(before, 1, l.Requests), end
		}
		r.Requests = 1
	}
	return r, routing.BudgetAffordable, end
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
	a := uint64(max(actual, 0))
	if refund {
		a = 0
	}
	if r.Tokens > 0 {
		sl.tokens.Adjust(r.Idx, r.Tokens, a)
	}
	if refund && r.Requests > 0 {
		sl.requests.Adjust(r.Idx, r.Requests, 0)
	}
	h.root.Send(h.pid, &Settled{Slot: r.Slot, Idx: r.Idx, Reserved: r.Tokens, Actual: a, Refund: refund})
}

// ObserveLimits feeds per-minute token and request limits read from a
// response's headers (fire-and-forget).
func (h *Handle) ObserveLimits(s int, obs *messages.QuotaObservation) {
	sl, ok := h.slots.Get(s)
	if !ok || obs == nil {
		return
	}
	var m LimitsObserved
	m.Slot = s
	for i := 0; i < obs.N; i++ {
		r := &obs.Readings[i]
		if r.Window != Window || r.Flags&messages.HasLimit == 0 || r.Limit < 1 {
			continue
		}
		switch r.Dimension {
		case messages.DimTokens:
			m.Tokens = uint64(r.Limit)
		case messages.DimRequests:
			m.Requests = uint64(r.Limit)
		}
	}
	if m.Tokens == 0 && m.Requests == 0 {
		return
	}
	changed := false
	if m.Tokens != 0 && sl.seenTok.Swap(m.Tokens) != m.Tokens {
		changed = true
	}
	if m.Requests != 0 && sl.seenReq.Swap(m.Requests) != m.Requests {
		changed = true
	}
	if changed { // the same limits on every response need no message
		h.root.Send(h.pid, &m)
	}
}

// account is the actor's bookkeeping for one slot.
type account struct {
	idx           uint64
	settledTokens uint64
	settled       uint64 // requests settled in the window
	refunds       uint64
	totalTokens   uint64
	totalRequests uint64
}

type ledgerActor struct {
	h         *Handle
	acct      []account
	headerTok []uint64
	headerReq []uint64
	dirty     bool
	cancel    scheduler.CancelFunc
}

// PublishInterval is how often a changed ledger is republished.
const PublishInterval = 250 * time.Millisecond

// strategy restarts the ledger actor after a panic: budgets are enforced
// by the handle's counters, which survive; the fresh actor re-learns the
// header limits from the handle and only its per-window report counts
// start over.
var strategy = supervise.Restart("ledger")

// newLedgerActor builds a fresh actor for h, knowing the header limits
// the handle has seen (so a later observation of one dimension does not
// forget the other's).
func newLedgerActor(h *Handle) *ledgerActor {
	a := &ledgerActor{h: h}
	a.grow()
	return a
}

// grow extends the actor's accounts to the handle's slots.
func (a *ledgerActor) grow() {
	for i := len(a.acct); i < a.h.slots.Len(); i++ {
		sl := a.h.slots.At(i)
		a.acct = append(a.acct, account{})
		a.headerTok = append(a.headerTok, sl.seenTok.Load())
		a.headerReq = append(a.headerReq, sl.seenReq.Load())
	}
}

func (a *ledgerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *actor.Started:
		a.cancel = repeat.Send(ctx.ActorSystem().Root, PublishInterval, PublishInterval, ctx.Self(), tick{})
	case *actor.Restarting, *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	case *Settled:
		a.settle(m)
	case *LimitsObserved:
		a.limits(m)
	case addSlots:
		a.grow()
		a.publish()
		ctx.Respond(len(a.acct))
	case *setConfigured:
		if m.slot >= 0 && m.slot < len(a.acct) {
			sl := a.h.slots.At(m.slot)
			sl.spec.TokensPerMinute, sl.spec.RequestsPerMinute = m.tokens, m.requests
			a.effective(m.slot)
			a.publish()
		}
		ctx.Respond(true)
	case tick:
		// Counters move on the request path; republish while anything
		// happened or a window is live.
		a.publish()
	}
}

func (a *ledgerActor) settle(m *Settled) {
	if m.Slot < 0 || m.Slot >= len(a.acct) {
		return
	}
	ac := &a.acct[m.Slot]
	if ac.idx != m.Idx {
		*ac = account{idx: m.Idx, totalTokens: ac.totalTokens, totalRequests: ac.totalRequests}
	}
	if m.Refund {
		ac.refunds++
	} else {
		ac.settled++
		ac.settledTokens += m.Actual
		ac.totalTokens += m.Actual
		ac.totalRequests++
	}
	a.dirty = true
}

func (a *ledgerActor) limits(m *LimitsObserved) {
	if m.Slot < 0 || m.Slot >= len(a.acct) {
		return
	}
	if m.Tokens > 0 {
		a.headerTok[m.Slot] = m.Tokens
	}
	if m.Requests > 0 {
		a.headerReq[m.Slot] = m.Requests
	}
	a.effective(m.Slot)
	a.publish()
}

// setConfigured changes a slot's configured limits (SetConfigured).
type setConfigured struct {
	slot             int
	tokens, requests int64
}

// SetConfigured changes slot s's configured per-minute limits (a reload
// changing its connection's limits; 0: none). The effective limits
// follow at once (the smaller of the configured and the provider's);
// what the current window used stays counted. It returns once they are
// in force.
func (h *Handle) SetConfigured(s int, tokensPerMinute, requestsPerMinute int64) error {
	if h.stopped.Load() {
		return errors.New("ledger: SetConfigured after Stop")
	}
	if _, err := h.root.RequestFuture(h.pid, &setConfigured{slot: s, tokens: tokensPerMinute, requests: requestsPerMinute}, 5*time.Second).Result(); err != nil {
		return fmt.Errorf("changing the limits of budget %d: %w", s, err)
	}
	return nil
}

// effective recomputes slot i's effective limits from its configured
// ones and the header limits seen.
func (a *ledgerActor) effective(i int) {
	sl := a.h.slots.At(i)
	l := &Limits{}
	l.Tokens, l.TokensSource = smaller(uint64(max(sl.spec.TokensPerMinute, 0)), a.headerTok[i])
	l.Requests, l.RequestsSource = smaller(uint64(max(sl.spec.RequestsPerMinute, 0)), a.headerReq[i])
	sl.limits.Store(l)
}

// smaller picks the smaller known limit: a configured limit below the
// provider's is the operator's choice (a share of an org-wide limit), and
// the provider's below the configured one is the truth.
func smaller(configured, header uint64) (uint64, string) {
	switch {
	case configured == 0 && header == 0:
		return 0, ""
	case header == 0 || (configured != 0 && configured <= header):
		return configured, "configured"
	}
	return header, "response_headers"
}
