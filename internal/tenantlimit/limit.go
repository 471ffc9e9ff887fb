package tenantlimit

import (
	"time"

	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// maxCost bounds one request's token reservation, so that sums of many
// cannot overflow.
const maxCost = 100_000_000

// Limits are a policy in the limiter's units. The zero value limits
// nothing.
type Limits struct {
	// Rates are the rolling request and token limits (per minute, hour
	// and day; internal/rolling).
	Rates         rolling.Limits
	MaxConcurrent int64
	DailyBudget   int64 // nano-dollars
	MonthlyBudget int64
	// Policy is kept for the model check (AllowedModels).
	Policy *tenantpolicy.Policy
}

// LimitsOf converts a validated policy.
func LimitsOf(p *tenantpolicy.Policy) Limits {
	return Limits{Rates: p.Rates(), MaxConcurrent: p.MaxConcurrent,
		DailyBudget: pricing.Nano(p.DailyBudgetUSD), MonthlyBudget: pricing.Nano(p.MonthlyBudgetUSD), Policy: p}
}

// Request is what a request asks of its tenant's limits.
type Request struct {
	// Model is the model the caller asked for (checked against
	// allowed_models).
	Model []byte
	// Tokens is the reservation against the token windows: the input
	// estimate plus max_tokens (or the default output reservation), as
	// internal/ledger.Estimate computes it.
	Tokens int64
	// Cost is the reservation against the budgets, in nano-dollars: the
	// same tokens priced with internal/pricing (0 when the model has no
	// price, so only settled spend counts).
	Cost int64
	// RequestOnly is a request that generates nothing (a token count, a
	// request refused before it was routed): it is checked against
	// allowed_models (when Model is set) and the request windows only
	// (requests per minute, hour and day), and charged one request in
	// each, never refunded. It holds no concurrency slot, no tokens and no
	// budget, so its Reservation is inactive.
	RequestOnly bool
}

// Reservation is what Reserve held. Settle it exactly once, through a
// pointer: Settle clears it, so a second call (or one on a refused
// request's zero Reservation) does nothing.
type Reservation struct {
	st         *State
	rates      rolling.Reservation
	cost       int64
	day, month int64
	active     bool
}

// Active reports whether the reservation holds anything.
func (r *Reservation) Active() bool { return r.active }

// Usage is how a request ended, for Settle.
type Usage struct {
	// Tokens and Cost (nano-dollars) are what the request really used,
	// summed over every attempt (a fail-over's first attempt included).
	Tokens int64
	Cost   int64
	// Known is false when no usage report arrived (a stream the caller
	// left or that broke before its usage event): the reservation is then
	// kept as the charge, because the provider may have generated the
	// whole answer.
	Known bool
	// Refund releases everything, the request slot included: the request
	// never reached a provider (refused by admission, or every target
	// refused before sending).
	Refund bool
}

// Reserve checks every limit of lim for req at now and, if all pass,
// reserves all of req's counters in one step. The Result names the limit
// that refused (Kind) and when it would allow the request, and carries the
// tightest request and token windows for the rate-limit headers either
// way. It does not allocate and sends nothing.
func (st *State) Reserve(now time.Time, lim *Limits, req *Request) (Reservation, Result) {
	res := Result{Now: now, Allowed: false}
	n := now.UnixNano()
	st.mu.Lock()
	c := &st.c
	w := c.ratesFor(lim)
	if lim.Policy != nil && (!req.RequestOnly || len(req.Model) > 0) && !lim.Policy.AllowsModel(req.Model) {
		res.Kind = KindModel
		res.fill(w, n)
		st.mu.Unlock()
		st.refused[KindModel].Add(1)
		return Reservation{}, res
	}
	if req.RequestOnly {
		res = st.reserveRequest(w, n, res)
		st.mu.Unlock()
		return Reservation{}, res
	}
	c.roll(now)
	cost := max(req.Cost, 0)
	if lim.DailyBudget == 0 && lim.MonthlyBudget == 0 {
		cost = 0
	}
	rc := rolling.Cost{rolling.Requests: 1, rolling.Tokens: max(min(req.Tokens, maxCost), 0)}
	kind, retryAt := check(c, w, lim, n, rc, cost)
	if kind != KindNone {
		res.Kind, res.RetryAt = kind, retryAt
		res.fill(w, n)
		st.mu.Unlock()
		st.refused[kind].Add(1)
		return Reservation{}, res
	}
	rr, _, _ := w.Reserve(n, rc)
	c.inflight++
	c.dayHeld += cost
	c.monHeld += cost
	res.Allowed = true
	res.fill(w, n)
	r := Reservation{st: st, rates: rr, cost: cost, day: c.day, month: c.month, active: true}
	st.mu.Unlock()
	st.admitted.Add(1)
	return r, res
}

// reserveRequest charges one request to the request windows, the one
// limit a RequestOnly request meets after allowed_models; it costs no
// tokens, so no token window can refuse it. mu is held; the counters go
// after the lock.
func (st *State) reserveRequest(w *rolling.Windows, now int64, res Result) Result {
	if _, ref, ok := w.Reserve(now, rolling.Cost{rolling.Requests: 1}); !ok {
		res.Kind, res.RetryAt = RateKind(ref.Dim, ref.Period), ref.RetryAt
		res.fill(w, now)
		st.refused[res.Kind].Add(1)
		return res
	}
	res.Allowed = true
	res.fill(w, now)
	st.admitted.Add(1)
	return res
}

// check returns the first limit that refuses, and when the request would
// fit. Budgets that are spent come first (they last longest and need a
// human), then the concurrency cap, the rate windows, and budgets held
// by requests still running.
func check(c *counters, w *rolling.Windows, lim *Limits, now int64, rc rolling.Cost, cost int64) (Kind, int64) {
	switch {
	case lim.DailyBudget > 0 && c.daySpent >= lim.DailyBudget:
		return KindDailyBudget, DayEnd(c.day).UnixNano()
	case lim.MonthlyBudget > 0 && c.monSpent >= lim.MonthlyBudget:
		return KindMonthlyBudget, MonthEnd(c.month).UnixNano()
	case lim.MaxConcurrent > 0 && c.inflight >= lim.MaxConcurrent:
		return KindConcurrency, now + int64(time.Second)
	}
	if ref, ok := w.Fits(now, rc); !ok {
		return RateKind(ref.Dim, ref.Period), ref.RetryAt
	}
	// A request whose estimate does not fit what is left of a budget is
	// admitted when nothing else is held (the budget is overshot by at
	// most one request), and otherwise refused for a moment: the requests
	// in flight may settle below their estimates.
	if lim.DailyBudget > 0 && c.dayHeld > 0 && c.daySpent+c.dayHeld+cost > lim.DailyBudget {
		return KindDailyBudgetHeld, now + int64(time.Second)
	}
	if lim.MonthlyBudget > 0 && c.monHeld > 0 && c.monSpent+c.monHeld+cost > lim.MonthlyBudget {
		return KindMonthlyBudgetHeld, now + int64(time.Second)
	}
	return KindNone, 0
}

// Settle replaces r's reservation by what the request used and releases
// its concurrency slot, once: r is cleared, so later calls do nothing.
// Tokens below the reservation go back to the window slots they were
// charged to, tokens above it are charged now. A settle that arrives
// after the day or month it was reserved in has ended only drops the hold
// (the new period started empty); its cost stays with the period it
// started in, as in the request log.
func (r *Reservation) Settle(now time.Time, u Usage) {
	if !r.active {
		return
	}
	r.active = false
	st := r.st
	tokens, cost := r.rates.Cost()[rolling.Tokens], r.cost
	if u.Known {
		tokens, cost = max(min(u.Tokens, maxCost), 0), max(u.Cost, 0)
	}
	if u.Refund {
		tokens, cost = 0, 0
	}
	st.mu.Lock()
	c := &st.c
	c.rates.Settle(now.UnixNano(), &r.rates, tokens, u.Refund)
	c.inflight = max(c.inflight-1, 0)
	if c.day == r.day {
		c.dayHeld = max(c.dayHeld-r.cost, 0)
		c.daySpent += cost
	}
	if c.month == r.month {
		c.monHeld = max(c.monHeld-r.cost, 0)
		c.monSpent += cost
	}
	st.mu.Unlock()
	st.settled.Add(1)
	st.settledTokens.Add(tokens)
	st.settledCost.Add(cost)
}

// Bucket is one rolling window as the rate-limit headers show it.
type Bucket = rolling.Bucket

// Result is the outcome of Reserve.
type Result struct {
	Allowed bool
	// Kind is the limit that refused (KindNone when allowed).
	Kind Kind
	Now  time.Time
	// RetryAt is when the refused request would be allowed, as far as the
	// refusing limit knows (exact for rates and spent budgets; one second
	// for the concurrency cap and held budgets, whose release time is not
	// known).
	RetryAt int64 // Unix ns
	// Requests and Tokens are the tightest window of each (the one with
	// the least left), for the rate-limit headers; Limit is 0 when the
	// tenant has no window of that dimension.
	Requests Bucket
	Tokens   Bucket
}

// RetryAfter is RetryAt - Now, at least one millisecond for a refusal.
func (r *Result) RetryAfter() time.Duration {
	if r.Allowed {
		return 0
	}
	return max(time.Duration(r.RetryAt-r.Now.UnixNano()), time.Millisecond)
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, for the
// Retry-After header (at least 1).
func (r *Result) RetryAfterSeconds() int {
	d := r.RetryAfter()
	return int(max((d+time.Second-1)/time.Second, 1))
}

// Limited reports whether the tenant has rate windows to show in
// headers.
func (r *Result) Limited() bool { return r.Requests.Limit > 0 || r.Tokens.Limit > 0 }

func (r *Result) fill(w *rolling.Windows, now int64) {
	r.Requests, _ = w.Tightest(now, rolling.Requests)
	r.Tokens, _ = w.Tightest(now, rolling.Tokens)
}

// Tighter replaces r's buckets by b's where b's has less left (the
// cluster's view of a window beside this node's).
func (r *Result) Tighter(d rolling.Dim, b Bucket) {
	cur := &r.Requests
	if d == rolling.Tokens {
		cur = &r.Tokens
	}
	if b.Limit > 0 && (cur.Limit == 0 || b.Remaining < cur.Remaining || (b.Remaining == cur.Remaining && b.Reset > cur.Reset)) {
		*cur = b
	}
}

// WindowUse is one rate window of a tenant, for snapshots.
type WindowUse struct {
	Dim rolling.Dim
	Bucket
}

// View is a consistent read of a tenant's counters for snapshots.
type View struct {
	InFlight int64
	// Requests and Tokens are the tightest windows (as in the headers);
	// Windows are all of them.
	Requests        Bucket
	Tokens          Bucket
	Windows         []WindowUse
	DaySpent        int64 // nano-dollars settled today (UTC)
	DayHeld         int64 // nano-dollars held by requests in flight
	MonthSpent      int64
	MonthHeld       int64
	Admitted        uint64
	Refused         [NumKinds]uint64
	Settled         uint64
	SettledTokens   int64
	SettledCostNano int64
}

// View reads the state at now.
func (st *State) View(now time.Time, lim *Limits) View {
	n := now.UnixNano()
	v := View{Admitted: st.admitted.Load(), Settled: st.settled.Load(), SettledTokens: st.settledTokens.Load(), SettledCostNano: st.settledCost.Load()}
	st.mu.Lock()
	c := &st.c
	w := c.ratesFor(lim)
	var r Result
	r.fill(w, n)
	v.Requests, v.Tokens, v.InFlight = r.Requests, r.Tokens, c.inflight
	for d := range rolling.NumDims {
		for p := range rolling.NumPeriods {
			if b, ok := w.Bucket(n, d, p); ok {
				v.Windows = append(v.Windows, WindowUse{Dim: d, Bucket: b})
			}
		}
	}
	if c.day == DayIndex(now) {
		v.DaySpent, v.DayHeld = c.daySpent, c.dayHeld
	}
	if c.month == MonthIndex(now) {
		v.MonthSpent, v.MonthHeld = c.monSpent, c.monHeld
	}
	st.mu.Unlock()
	for k := range v.Refused {
		v.Refused[k] = st.refused[k].Load()
	}
	return v
}

// Seed sets the spend already settled today and this month on a fresh
// state, before anyone else uses it (the limiter's owner reads it from the
// request log's usage at start-up, so a restart does not reset budgets).
func (st *State) Seed(now time.Time, daySpent, monthSpent int64) { st.seed(now, daySpent, monthSpent) }

// AddSpent adds spend the tenant settled before this state counted it (the
// limiter's owner reads it from the request log's usage at at, after the
// state was put in service, so a slow read never holds up the tenant's new
// policy) to a state that may already be in use. Requests settled on the
// state meanwhile stay counted; the figures are added to the day and month
// of at, and a period the counters have already moved past is left alone.
func (st *State) AddSpent(at time.Time, daySpent, monthSpent int64) {
	st.addSpent(at, daySpent, monthSpent, false)
}

// RaiseSpent is AddSpent for a state that has counted the tenant's spend
// all along, since before the read (a tenant limited by its rates that
// gains a budget): what it counted is part of what the request log holds,
// so the larger of the two stands for the day and the month instead of
// their sum. The log may hold more (spend from before a restart, or from
// before the tenant was limited); the state may hold more (records the
// writer has not committed yet, or a request log that is off).
func (st *State) RaiseSpent(at time.Time, daySpent, monthSpent int64) {
	st.addSpent(at, daySpent, monthSpent, true)
}
