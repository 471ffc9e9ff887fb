// Package planner decides one request's routing: which of its model's
// targets are usable now and in which order to try them, when to give up
// (the attempt cap, the caller's deadline), when a failed attempt may be
// retried, whether to wait for a cooling target (and how
// long), and what to tell the caller when every target is out (the
// Retry-After and whether a retry is pointless). It owns no state beyond
// the request and does no I/O: the caller (transport/plan) brings the evidence
// from the actors' published snapshots through Source, claims the chosen
// target (admission, token reservation, probe) and reports back with Take,
// Refuse and Learn. Time comes in as arguments from the caller's injected
// clock; the one real wait is Waiter's timer.
package planner

import (
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/messages"
)

// Skip is why a candidate was passed over at ranking, for metrics.
type Skip int8

// Skip reasons. SkipNone: the candidate is eligible, or ineligible for a
// reason that is not counted (its dialect, or its score).
const (
	SkipNone Skip = iota - 1
	SkipCooling
	SkipCircuit
	SkipExhausted
	SkipBudget
	// SkipService: the target's supervised service is not running as the
	// gateway's own child (never tried, never waited for).
	SkipService
	NumSkips int = iota - 1
)

// Evidence is what the caller knows about one candidate when ranking:
// the targets snapshot (circuit, cooldown, health), the quota status and
// the token ledger's verdict. Zero values mean "nothing known": a fresh,
// healthy, unlimited target.
type Evidence struct {
	// Unusable marks a candidate that cannot serve this request at all
	// (its provider does not speak the dialect it needs): never tried,
	// never waited for.
	Unusable bool
	// ServiceDown marks a candidate served by a supervised service that
	// is not running as the gateway's own child: never tried, never
	// waited for, counted as SkipService.
	ServiceDown bool

	// From the targets snapshot; Known is false when it has no entry.
	Known               bool
	ConsecutiveFailures int
	ErrorRate           float64
	TTFBMillis          float64 // typical time to first byte (0: unknown)
	Open                bool    // circuit open (half open once CoolUntil passed)
	CoolUntil           time.Time
	// RateLimited: the cooldown is the provider's rate limit (its 429),
	// not a failure.
	RateLimited bool

	// Quota awareness: the status of the target's model on its
	// connection, and when an exhausted one recovers (zero: unknown, one
	// minute is assumed). Budget is the token ledger's verdict for the
	// request's estimate, BudgetEnd when an unaffordable one affords it.
	QuotaAware    bool
	Quota         quota.Status
	QuotaRecovery time.Time
	Budget        routing.Budget
	BudgetEnd     time.Time

	// Weight is the candidate's round-robin weight (≥ 1).
	Weight int
}

// Source gives the planner the candidates' evidence. Implemented by the
// plan stage's State (transport/plan; a pointer into the pooled call:
// passing it allocates nothing).
type Source interface {
	// Evidence fills e for untried candidate i (e arrives zeroed).
	Evidence(i int, now time.Time, e *Evidence)
	// Skipped is told that candidate i was passed over, and why.
	Skipped(i int, why Skip)
}

// Order is how the eligible candidates are ordered.
type Order struct {
	// RoundRobin: rotate the first by Schedule (the model's smooth
	// weighted rotation) at Cursor; else configured (priority) order.
	RoundRobin bool
	Cursor     uint64
	Schedule   []uint16
	// Session, when not 0, is the conversation's key: a round-robin
	// model keeps it on the target its weighted rendezvous score picks
	// (routing.Affinity, over Hashes, the candidates' hashes by
	// position), so the provider's prompt cache keeps hitting.
	Session uint64
	Hashes  []uint64
}

// unknownRecovery is assumed when an exhausted quota gives no reset.
const unknownRecovery = time.Minute

// MaxWaits bounds the wait rounds of one request (each ends in a re-rank;
// a change of any target's state ends one early).
const MaxWaits = 64

// Plan is one request's routing state: the ranked candidates, which were
// tried, and what failed attempts taught about recovery. It keeps its
// buffers across Reset, so a pooled caller plans without allocating.
type Plan struct {
	live  []routing.Live
	probe []bool // candidate's circuit is half open: needs the probe
	order []int
	tried []bool
	// ranked: live and order are current; a wait or Rerank clears it.
	ranked   bool
	attempts int

	// recover is the earliest moment an untried, ineligible candidate
	// becomes usable; hint the earliest recovery learned from failed
	// attempts (Retry-After, reset of the exhausted dimension).
	recover time.Time
	hint    time.Time
	// answerBy is when the earliest recovering candidate would usually
	// have answered (its recovery plus its typical time to first byte).
	answerBy time.Time
	// limited and failing: some candidate is out, as of the last Rank,
	// for a limit (a provider's rate limit, an exhausted quota, a token
	// budget), or because it failed (cooldown or open circuit after
	// errors, timeouts, refused connections).
	limited, failing bool
	// waitUntil bounds waiting for recovery (caller's clock); deadline is
	// when the caller stops waiting (zero: it did not say); maxAttempts
	// caps the attempts.
	waitUntil   time.Time
	deadline    time.Time
	maxAttempts int
	waits       int
	// before counts the attempts on earlier candidate lists (Restart).
	before int
	// retried: the one retry of a failed target, for when nothing else is
	// left, was used; last is the index of the last target tried.
	retried bool
	last    int

	ev Evidence // scratch for Rank
}

// Reset clears p for the next request, keeping its buffers.
func (p *Plan) Reset() {
	*p = Plan{live: p.live[:0], probe: p.probe[:0], order: p.order[:0], tried: p.tried[:0], last: -1}
}

// Restart prepares p for another candidate list of the same request (the
// caller's next fallback model): it forgets the last list's candidates,
// what their failures taught, its waits and its retry, and keeps the
// count of attempts made (Attempts), while the new list gets an attempt
// budget of its own. Begin follows.
func (p *Plan) Restart() {
	before := p.before + p.attempts
	p.Reset()
	p.before = before
}

// Limits bound one request's routing.
type Limits struct {
	// MaxAttempts caps the attempts (retry included).
	MaxAttempts int
	// MaxWait bounds waiting for a recovering target.
	MaxWait time.Duration
	// Deadline is when the caller stops waiting (zero: it did not say):
	// nothing is attempted or waited for past it.
	Deadline time.Time
}

// Begin starts planning over n candidates at now.
func (p *Plan) Begin(n int, now time.Time, l Limits) {
	p.last = -1
	for range n {
		p.tried = append(p.tried, false)
	}
	p.deadline, p.maxAttempts = l.Deadline, l.MaxAttempts
	p.waitUntil = now.Add(l.MaxWait)
	if !l.Deadline.IsZero() && l.Deadline.Before(p.waitUntil) {
		p.waitUntil = l.Deadline
	}
}

// More reports whether another attempt may be made at now: the attempt
// cap is not reached and the caller's deadline has not passed. When it
// reports false the request gives up.
func (p *Plan) More(now time.Time) bool {
	return p.attempts < p.maxAttempts && !p.Expired(now)
}

// Expired reports whether the caller's deadline has passed at now.
func (p *Plan) Expired(now time.Time) bool {
	return !p.deadline.IsZero() && !now.Before(p.deadline)
}

// Ranked reports whether the ranking is current (Rank ran since the last
// wait).
func (p *Plan) Ranked() bool { return p.ranked }

// Rerank makes the next look at the candidates rank them afresh.
func (p *Plan) Rerank() { p.ranked = false }

// Attempts is how many candidates were taken (attempts sent or about to
// be), on every list of the request.
func (p *Plan) Attempts() int { return p.before + p.attempts }

// Candidates is the try order of the eligible candidates as of the last
// Rank (tried ones included: check Tried).
func (p *Plan) Candidates() []int { return p.order }

// Tried reports whether candidate i was taken or refused already.
func (p *Plan) Tried(i int) bool { return p.tried[i] }

// NeedsProbe reports whether candidate i's circuit is half open: taking it
// needs its single probe.
func (p *Plan) NeedsProbe(i int) bool { return p.probe[i] }

// Last is the index of the last candidate taken, or -1.
func (p *Plan) Last() int { return p.last }

// Rank scores the untried candidates from src's evidence and orders the
// eligible ones by o. An ineligible candidate that will recover (cooldown
// or open circuit ending, quota reset, budget window end) moves the
// earliest recovery forward.
func (p *Plan) Rank(src Source, n int, now time.Time, o Order) {
	p.live, p.probe, p.recover, p.answerBy = p.live[:0], p.probe[:0], time.Time{}, time.Time{}
	p.limited, p.failing = false, false
	for i := range n {
		if p.tried[i] {
			p.live, p.probe = append(p.live, routing.Live{}), append(p.probe, false)
			continue
		}
		e := &p.ev // in the plan: a local would escape through src
		*e = Evidence{}
		src.Evidence(i, now, e)
		live, halfOpen, rec, skip := assess(e, now)
		p.live, p.probe = append(p.live, live), append(p.probe, halfOpen)
		if live.Eligible {
			continue
		}
		if skip != SkipNone {
			src.Skipped(i, skip)
			if (skip == SkipCooling || skip == SkipCircuit) && !e.RateLimited {
				p.failing = true
			} else {
				p.limited = true
			}
		}
		if !rec.IsZero() {
			p.recover = earlier(p.recover, rec)
			p.answerBy = earlier(p.answerBy, rec.Add(time.Duration(e.TTFBMillis*float64(time.Millisecond))))
		}
	}
	p.order = p.order[:0]
	switch {
	case o.RoundRobin && n > 1 && o.Session != 0 && len(o.Hashes) == n:
		p.order = routing.Affinity(p.live, o.Session, o.Hashes, p.order)
	case o.RoundRobin && n > 1:
		p.order = routing.RoundRobin(p.live, o.Cursor, o.Schedule, p.order)
	default:
		p.order = routing.Priority(p.live, p.order)
	}
	p.ranked = true
}

// assess turns one candidate's evidence into its ranking entry, whether
// its circuit is half open, when it recovers if it is out, and why.
func assess(e *Evidence, now time.Time) (live routing.Live, halfOpen bool, rec time.Time, skip Skip) {
	skip = SkipNone
	if e.Unusable {
		return routing.Live{Weight: e.Weight}, false, time.Time{}, SkipNone
	}
	if e.ServiceDown {
		return routing.Live{Weight: e.Weight}, false, time.Time{}, SkipService
	}
	cand := routing.Candidate{CapabilityScore: 1, HealthScore: 1, ModelPreference: routing.Some(1)}
	if e.Known {
		cand.HealthScore = 1 / float64(1+e.ConsecutiveFailures)
		if e.ErrorRate > 0 {
			cand.ErrorRate = routing.Some(e.ErrorRate)
		}
		if e.TTFBMillis > 0 {
			cand.LatencyMs = routing.Some(e.TTFBMillis)
		}
		switch {
		case e.Open && now.Before(e.CoolUntil):
			cand.Circuit, rec, skip = routing.CircuitOpen, e.CoolUntil, SkipCircuit
		case e.Open:
			cand.Circuit = routing.CircuitHalfOpen
		case now.Before(e.CoolUntil):
			cand.Cooling, rec, skip = true, e.CoolUntil, SkipCooling
		}
	}
	if e.QuotaAware {
		cand.Quota = e.Quota
		if e.Quota == quota.StatusExhausted {
			r := e.QuotaRecovery
			if r.IsZero() {
				r = now.Add(unknownRecovery)
			}
			rec, skip = later(rec, r), SkipExhausted
		}
		cand.Budget = e.Budget
		if !e.Budget.Affordable() {
			rec, skip = later(rec, e.BudgetEnd), SkipBudget
		}
	}
	score, ok := routing.Score(&cand)
	live = routing.Live{Eligible: ok, Demoted: cand.Quota == quota.StatusApproaching, Score: score, Weight: e.Weight}
	return live, cand.Circuit == routing.CircuitHalfOpen, rec, skip
}

// Take records that candidate i is being attempted.
func (p *Plan) Take(i int) {
	p.tried[i] = true
	p.last = i
	p.attempts++
}

// Refuse records that candidate i could not be taken after all (its token
// budget or its probe went to another request since Rank); it is expected
// back at rec.
func (p *Plan) Refuse(i int, rec time.Time) {
	p.tried[i] = true
	p.recover = earlier(p.recover, rec)
}

// Retry returns the last failed candidate for one more attempt when
// nothing else is left, or -1: only once per request, only after a
// transient failure (a 5xx, a timeout, a refused connection, a 429) that
// gave no hint to wait, and never after the caller's deadline. The retry
// is a probe of the target: its success closes the circuit the failure
// opened.
func (p *Plan) Retry(class messages.FailureClass, now time.Time) int {
	if p.retried || p.last < 0 || !Transient(class) || !p.hint.IsZero() || p.Expired(now) {
		return -1
	}
	p.retried = true
	return p.last
}

// Transient reports failure classes a retry may cure.
func Transient(class messages.FailureClass) bool {
	switch class {
	case messages.Capacity, messages.Timeout, messages.Connect, messages.RateLimit:
		return true
	}
	return false
}

// Learn takes what a failed attempt's answer says about recovery: the
// rate-limit headers (Retry-After, the reset of an exhausted dimension)
// and a retry hint from the error body. Only provider-side failures
// teach.
func (p *Plan) Learn(class messages.FailureClass, obs *messages.QuotaObservation, bodyRetry time.Duration, now time.Time) {
	if !class.ProviderSide() {
		return
	}
	var rec time.Time
	if obs != nil && obs.HasRetryAfter {
		rec = now.Add(obs.RetryAfter)
	}
	if bodyRetry > 0 {
		rec = later(rec, now.Add(bodyRetry))
	}
	rec = later(rec, obs.ExhaustedUntil())
	if !rec.IsZero() {
		p.hint = earlier(p.hint, rec)
	}
}

// Wait decides, when no untried candidate is usable, whether to wait for
// the earliest recovery and for how long (≤ 0: it is due, re-rank now).
// It waits only when the recovery comes within the wait budget (which
// Begin capped at the caller's deadline), when the recovered candidate
// would usually answer before the caller's deadline, and for at most
// MaxWaits rounds. A wait it allows makes the next look re-rank.
func (p *Plan) Wait(now time.Time) (time.Duration, bool) {
	rec := p.recover
	if rec.IsZero() || rec.After(p.waitUntil) || p.waits >= MaxWaits {
		return 0, false
	}
	if !p.deadline.IsZero() && p.answerBy.After(p.deadline) {
		return 0, false // back too late to answer before the caller's deadline
	}
	p.waits++
	p.ranked = false
	return rec.Sub(now), true
}

// EarliestRecovery is when some candidate is expected back (zero: not
// known).
func (p *Plan) EarliestRecovery() time.Time { return earlier(p.recover, p.hint) }

// PointlessSoon is how far away a recovery must be for a client's own
// retry to be pointless: the SDKs back off for seconds, not minutes.
const PointlessSoon = time.Minute

// Refusal is what to answer when no candidate could be tried: every
// target is cooling down, has an open circuit, is out of quota or over its
// token budget, and the earliest recovery is beyond the wait budget.
type Refusal struct {
	// RetryAfter is the whole seconds until the earliest recovery (≥ 1).
	RetryAfter int
	// NoRetry: a client retry cannot succeed soon (X-Should-Retry: false).
	NoRetry bool
	// Outage: every candidate is out because it failed (none for a rate
	// limit, a quota or a budget): the service is unavailable, not the
	// caller limited (503 rather than 429).
	Outage bool
}

// Refusal is the answer when no candidate was tried.
func (p *Plan) Refusal(now time.Time) Refusal {
	rec := p.EarliestRecovery()
	return Refusal{RetryAfter: RetryAfterSeconds(rec, now), NoRetry: rec.IsZero() || rec.Sub(now) > PointlessSoon,
		Outage: p.failing && !p.limited}
}

// Final is how to adjust the last provider error passed through after
// failover ran out.
type Final struct {
	// NoRetry tells the SDKs not to retry (X-Should-Retry: false): the
	// failure needs money, a credential or a changed request, or nothing
	// recovers within PointlessSoon. After a transient failure the SDK's
	// own retry (after Retry-After) is what the caller wants.
	NoRetry bool
	// RetryAfter, when > 0, is the seconds until the earliest candidate
	// recovers: it replaces a 429's Retry-After, and is the Retry-After
	// of a provider failure (a 5xx, or none answered) that sent none.
	RetryAfter int
}

// Final is the advice for the last error (its status, 0 when no provider
// answered, and failure class).
func (p *Plan) Final(status int, class messages.FailureClass, now time.Time) Final {
	rec := p.EarliestRecovery()
	var f Final
	if !Transient(class) || (class == messages.RateLimit && !rec.IsZero() && rec.Sub(now) > PointlessSoon) {
		f.NoRetry = true
	}
	switch {
	case status == 429 && !rec.IsZero():
		f.RetryAfter = RetryAfterSeconds(rec, now)
	case (status == 0 || status >= 500) && Transient(class):
		f.RetryAfter = RetryAfterSeconds(rec, now) // 1 when nothing is known
	}
	return f
}

// RetryAfterSeconds rounds the time until t up to whole seconds (≥ 1).
func RetryAfterSeconds(t, now time.Time) int {
	d := t.Sub(now)
	if d <= 0 {
		return 1
	}
	return int((d + time.Second - 1) / time.Second)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
