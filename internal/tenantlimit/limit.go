package tenantlimit

import (
	"math"
	"time"

	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// Window is the window of the per-minute limits. RPM and TPM are generic
// cell rate algorithms (token buckets) of this width: a tenant may burst
// its whole per-minute limit at once and then gets limit/60 per second
// back continuously, and the bucket is full again Window after it was
// last emptied.
const Window = time.Minute

// maxCost bounds one request's token reservation so that nanoseconds ×
// tokens cannot overflow (1e8 tokens × 60e9 ns < 2^63).
const maxCost = 100_000_000

// Limits are a policy in the limiter's units. The zero value limits
// nothing.
type Limits struct {
	RequestsPerMinute int64
	TokensPerMinute   int64
	MaxConcurrent     int64
	DailyBudget       int64 // nano-dollars
	MonthlyBudget     int64
	// Policy is kept for the model check (AllowedModels).
	Policy *tenantpolicy.Policy
}

// LimitsOf converts a validated policy.
func LimitsOf(p *tenantpolicy.Policy) Limits {
	return Limits{RequestsPerMinute: p.RequestsPerMinute, TokensPerMinute: p.TokensPerMinute, MaxConcurrent: p.MaxConcurrent,
		DailyBudget: pricing.Nano(p.DailyBudgetUSD), MonthlyBudget: pricing.Nano(p.MonthlyBudgetUSD), Policy: p}
}

// Request is what a request asks of its tenant's limits.
type Request struct {
	// Model is the model the caller asked for (checked against
	// allowed_models).
	Model []byte
	// Tokens is the reservation against tokens_per_minute: the input
	// estimate plus max_tokens (or the default output reservation), as
	// internal/ledger.Estimate computes it.
	Tokens int64
	// Cost is the reservation against the budgets, in nano-dollars: the
	// same tokens priced with internal/pricing (0 when the model has no
	// price, so only settled spend counts).
	Cost int64
	// RequestOnly is a request that generates nothing (a token count, a
	// request refused before it was routed): it is checked against
	// allowed_models (when Model is set) and requests_per_minute only,
	// and charged one request, never refunded. It holds no concurrency
	// slot, no tokens and no budget, so its Reservation is inactive.
	RequestOnly bool
}

// Reservation is what Reserve held. Settle it exactly once, through a
// pointer: Settle clears it, so a second call (or one on a refused
// request's zero Reservation) does nothing.
type Reservation struct {
	st         *State
	reqDur     int64 // ns the request moved reqTAT by
	tokDur     int64 // ns the tokens moved tokTAT by
	tokens     int64
	tokLimit   int64
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

// gcraDur converts n units against a per-window limit into nanoseconds
// of the bucket, rounding up so that rounding never grants extra.
func gcraDur(n, limit int64) int64 {
	if n <= 0 || limit <= 0 {
		return 0
	}
	n = min(n, maxCost)
	return (n*int64(Window) + limit - 1) / limit
}

// Reserve checks every limit of lim for req at now and, if all pass,
// reserves all of req's counters in one step. The Result names the limit
// that refused (Kind) and when it would allow the request, and carries the
// per-minute buckets for the rate-limit headers either way. It does not
// allocate and sends nothing.
func (st *State) Reserve(now time.Time, lim *Limits, req *Request) (Reservation, Result) {
	res := Result{Now: now, Allowed: false}
	if lim.Policy != nil && (!req.RequestOnly || len(req.Model) > 0) && !lim.Policy.AllowsModel(req.Model) {
		res.Kind = KindModel
		var c counters
		st.snapshot(&c)
		res.fill(&c, lim, now.UnixNano())
		st.refused[KindModel].Add(1)
		return Reservation{}, res
	}
	if req.RequestOnly {
		return Reservation{}, st.reserveRequest(now, lim)
	}
	n := now.UnixNano()
	day, month := DayIndex(now), int64(-1) // month: computed when the day changed
	reqDur := gcraDur(1, lim.RequestsPerMinute)
	tokens := max(min(req.Tokens, maxCost), 0)
	tokDur := gcraDur(tokens, lim.TokensPerMinute)
	cost := max(req.Cost, 0)
	if lim.DailyBudget == 0 && lim.MonthlyBudget == 0 {
		cost = 0
	}
	var o, c counters
	for {
		w := st.read(&o)
		c = o
		// A new period starts empty. A caller whose clock still reads the
		// previous period is charged to the counter's current one.
		if c.day < day {
			c.day, c.daySpent, c.dayHeld = day, 0, 0
			if month < 0 {
				month = MonthIndex(now)
			}
		}
		if c.month < month { // a day of the counter's own day is in its month
			c.month, c.monSpent, c.monHeld = month, 0, 0
		}
		kind, retryAt := check(&c, lim, n, reqDur, tokDur, cost)
		if kind != KindNone {
			if !st.stable(w) {
				continue // decided on a torn copy: read again
			}
			res.Kind, res.RetryAt = kind, retryAt
			res.fill(&c, lim, n)
			st.refused[kind].Add(1)
			return Reservation{}, res
		}
		c.inflight++
		if reqDur > 0 {
			c.reqTAT = max(c.reqTAT, n) + reqDur
		}
		if tokDur > 0 {
			c.tokTAT = max(c.tokTAT, n) + tokDur
		}
		c.dayHeld += cost
		c.monHeld += cost
		if st.commit(w, &c) {
			break
		}
	}
	res.Allowed = true
	res.fill(&c, lim, n)
	st.admitted.Add(1)
	return Reservation{st: st, reqDur: reqDur, tokDur: tokDur, tokens: tokens, tokLimit: lim.TokensPerMinute, cost: cost,
		day: c.day, month: c.month, active: true}, res
}

// reserveRequest charges one request against requests_per_minute, the
// one limit a RequestOnly request meets after allowed_models.
func (st *State) reserveRequest(now time.Time, lim *Limits) Result {
	res := Result{Now: now}
	n := now.UnixNano()
	reqDur := gcraDur(1, lim.RequestsPerMinute)
	var c counters
	if reqDur == 0 {
		st.snapshot(&c)
	}
	for reqDur > 0 {
		w := st.read(&c)
		if tat := max(c.reqTAT, n); tat+reqDur-n > int64(Window) {
			if !st.stable(w) {
				continue // decided on a torn copy: read again
			}
			res.Kind, res.RetryAt = KindRequests, tat+reqDur-int64(Window)
			res.fill(&c, lim, n)
			st.refused[KindRequests].Add(1)
			return res
		}
		c.reqTAT = max(c.reqTAT, n) + reqDur
		if st.commit(w, &c) {
			break
		}
	}
	res.Allowed = true
	res.fill(&c, lim, n)
	st.admitted.Add(1)
	return res
}

// check returns the first limit that refuses, and when the request would
// fit. Budgets that are spent come first (they last longest and need a
// human), then the concurrency cap, the per-minute rates, and budgets held
// by requests still running.
func check(c *counters, lim *Limits, now, reqDur, tokDur, cost int64) (Kind, int64) {
	w := int64(Window)
	switch {
	case lim.DailyBudget > 0 && c.daySpent >= lim.DailyBudget:
		return KindDailyBudget, DayEnd(c.day).UnixNano()
	case lim.MonthlyBudget > 0 && c.monSpent >= lim.MonthlyBudget:
		return KindMonthlyBudget, MonthEnd(c.month).UnixNano()
	case lim.MaxConcurrent > 0 && c.inflight >= lim.MaxConcurrent:
		return KindConcurrency, now + int64(time.Second)
	}
	if reqDur > 0 {
		if tat := max(c.reqTAT, now); tat+reqDur-now > w {
			return KindRequests, tat + reqDur - w
		}
	}
	if tokDur > 0 {
		tat := max(c.tokTAT, now)
		switch {
		case tokDur > w:
			// Larger than the whole limit: admitted into a full bucket
			// only, so it is sent once per window rather than never.
			if tat > now {
				return KindTokens, tat
			}
		case tat+tokDur-now > w:
			return KindTokens, tat + tokDur - w
		}
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
// its concurrency slot, once: r is cleared, so later calls do nothing. A
// settle that arrives after the day or month it was reserved in has ended
// only drops the hold (the new period started empty); its cost stays with
// the period it started in, as in the request log.
func (r *Reservation) Settle(now time.Time, u Usage) {
	if !r.active {
		return
	}
	r.active = false
	st := r.st
	n := now.UnixNano()
	tokens, cost := r.tokens, r.cost
	if u.Known {
		tokens, cost = max(min(u.Tokens, maxCost), 0), max(u.Cost, 0)
	}
	if u.Refund {
		tokens, cost = 0, 0
	}
	delta := gcraDur(tokens, r.tokLimit) - r.tokDur
	var c counters
	for {
		w := st.read(&c)
		c.inflight = max(c.inflight-1, 0)
		if u.Refund && r.reqDur > 0 {
			c.reqTAT = max(c.reqTAT-r.reqDur, 0)
		}
		switch {
		case r.tokLimit <= 0:
		case delta > 0: // used more than reserved: charged now
			c.tokTAT = max(c.tokTAT, n) + delta
		default:
			c.tokTAT = max(c.tokTAT+delta, 0)
		}
		if c.day == r.day {
			c.dayHeld = max(c.dayHeld-r.cost, 0)
			c.daySpent += cost
		}
		if c.month == r.month {
			c.monHeld = max(c.monHeld-r.cost, 0)
			c.monSpent += cost
		}
		if st.commit(w, &c) {
			break
		}
	}
	st.settled.Add(1)
	st.settledTokens.Add(tokens)
	st.settledCost.Add(cost)
}

// Bucket is one per-minute limit as the rate-limit headers show it.
type Bucket struct {
	// Limit is 0 when the tenant has no such limit (no headers then).
	Limit     int64
	Remaining int64
	// Reset is how long until the bucket is full again.
	Reset time.Duration
}

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
	RetryAt  int64 // Unix ns
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

// Limited reports whether the tenant has per-minute limits to show in
// headers.
func (r *Result) Limited() bool { return r.Requests.Limit > 0 || r.Tokens.Limit > 0 }

func (r *Result) fill(c *counters, lim *Limits, now int64) {
	w := int64(Window)
	if l := lim.RequestsPerMinute; l > 0 {
		tat := max(c.reqTAT, now)
		interval := gcraDur(1, l)
		r.Requests = Bucket{Limit: l, Remaining: min(max((w-(tat-now))/interval, 0), l), Reset: time.Duration(tat - now)}
	}
	if l := lim.TokensPerMinute; l > 0 {
		tat := max(c.tokTAT, now)
		free := float64(w-(tat-now)) * float64(l) / float64(w)
		r.Tokens = Bucket{Limit: l, Remaining: min(max(int64(math.Floor(free)), 0), l), Reset: time.Duration(tat - now)}
	}
}

// View is a consistent read of a tenant's counters for snapshots.
type View struct {
	InFlight        int64
	Requests        Bucket
	Tokens          Bucket
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
	var c counters
	st.snapshot(&c)
	var r Result
	r.fill(&c, lim, now.UnixNano())
	v := View{InFlight: c.inflight, Requests: r.Requests, Tokens: r.Tokens,
		Admitted: st.admitted.Load(), Settled: st.settled.Load(), SettledTokens: st.settledTokens.Load(), SettledCostNano: st.settledCost.Load()}
	if c.day == DayIndex(now) {
		v.DaySpent, v.DayHeld = c.daySpent, c.dayHeld
	}
	if c.month == MonthIndex(now) {
		v.MonthSpent, v.MonthHeld = c.monSpent, c.monHeld
	}
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
	st.addSpent(at, daySpent, monthSpent)
}

// Rescale converts the per-minute buckets from limits from to limits to
// when a tenant's policy changes. A bucket's debt is kept in nanoseconds
// of its limit's rate, so without rescaling a raised limit would give no
// room until the old debt drained; with it, the tokens and requests used
// stay used and the rest of the new limit is free at once.
func (st *State) Rescale(now time.Time, from, to *Limits) {
	n := now.UnixNano()
	scale := func(tat, old, nw int64) int64 {
		if old <= 0 || nw <= 0 || old == nw || tat <= n {
			return tat
		}
		debt := float64(tat-n) * float64(old) / float64(nw)
		return n + int64(math.Ceil(debt))
	}
	var c counters
	for {
		w := st.read(&c)
		c.reqTAT = scale(c.reqTAT, from.RequestsPerMinute, to.RequestsPerMinute)
		c.tokTAT = scale(c.tokTAT, from.TokensPerMinute, to.TokensPerMinute)
		if st.commit(w, &c) {
			return
		}
	}
}
