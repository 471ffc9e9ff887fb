package transport

import (
	"strconv"
	"time"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/messages"
)

// plan is one request's routing state: the ranked candidates, which were
// tried, the token reservation held, and what failed attempts taught about
// recovery. It lives in the pooled call and keeps its buffers.
type plan struct {
	live     []routing.Live
	probe    []bool // candidate's circuit is half open: needs the probe
	order    []int
	tried    []bool
	pos      int
	ranked   bool
	attempts int

	// recover is the earliest moment an untried, ineligible candidate
	// becomes usable; hint the earliest recovery learned from failed
	// attempts (Retry-After, reset of the exhausted dimension).
	recover time.Time
	hint    time.Time
	// waitUntil bounds waiting for recovery (gateway clock); waited is
	// the real time spent waiting.
	waitUntil time.Time
	waited    time.Duration
	waits     int

	weights []int // round-robin weights of the candidates, by position
	fanout  bool  // probe each candidate against the lanes first (takeTarget)

	input, est int64
	res        ledgeractor.Reservation
	probeID    int // target whose half-open probe this attempt holds, or -1
	usage      ledger.Usage
	// metering: read the provider's usage report (a reservation is held);
	// injected: include_usage was added upstream, so the usage-only chunk
	// is stripped before it reaches a caller who did not ask for it.
	metering, injected bool

	// Per attempt: the parsed rate-limit headers and the failure verdict,
	// attached to the attempt's report.
	obs     *messages.QuotaObservation
	verdict failure.Verdict
}

// reset clears p for the next request, keeping its buffers.
func (p *plan) reset() plan {
	return plan{live: p.live[:0], probe: p.probe[:0], order: p.order[:0], tried: p.tried[:0], probeID: -1}
}

// begin prepares routing for list: token estimate and wait budget.
func (c *call) beginPlan(list []*catalog.Target, weights []int, fanout bool) {
	g, qs, p := c.g, c.g.qs, &c.plan
	p.weights, p.fanout = weights, fanout
	p.probeID = -1
	for range list {
		p.tried = append(p.tried, false)
	}
	in, out := ledger.Estimate(c.body.B, c.scan.MaxTokens, qs.defOut)
	p.input, p.est = in, in+out
	wait := qs.maxWait
	if d, ok := clientTimeout(c); ok && d/2 < wait {
		// The SDK says how long it will wait: never spend more than half
		// of it waiting for a recovery.
		wait = d / 2
	}
	p.waitUntil = g.clk.Now().Add(wait)
}

// clientTimeout reads the caller's own request timeout, as the official
// SDKs announce it (X-Stainless-Timeout, seconds).
func clientTimeout(c *call) (time.Duration, bool) {
	v := c.ctx.Request.Header.Peek("X-Stainless-Timeout")
	if len(v) == 0 {
		return 0, false
	}
	return quota.ParseSeconds(v)
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

// rank scores the untried candidates from the published snapshots and
// orders the eligible ones by the model's strategy.
func (c *call) rank(list []*catalog.Target) {
	g, qs, p := c.g, c.g.qs, &c.plan
	now := g.clk.Now()
	snap := g.targets.Snapshot()
	p.live, p.probe, p.recover = p.live[:0], p.probe[:0], time.Time{}
	weights := p.weights
	for i, t := range list {
		if p.tried[i] {
			p.live, p.probe = append(p.live, routing.Live{}), append(p.probe, false)
			continue
		}
		cand := routing.Candidate{CapabilityScore: 1, HealthScore: 1, ModelPreference: routing.Some(1)}
		var rec time.Time
		skip := -1
		if snap != nil && t.ID < len(snap.Targets) {
			st := &snap.Targets[t.ID]
			cand.HealthScore = 1 / float64(1+st.ConsecutiveFailures)
			if st.ErrorRate > 0 {
				cand.ErrorRate = routing.Some(st.ErrorRate)
			}
			if st.TTFBEWMAMillis > 0 {
				cand.LatencyMs = routing.Some(st.TTFBEWMAMillis)
			}
			switch {
			case st.Open && now.Before(st.CoolUntil):
				cand.Circuit, rec, skip = routing.CircuitOpen, st.CoolUntil, skipCircuit
			case st.Open:
				cand.Circuit = routing.CircuitHalfOpen
			case now.Before(st.CoolUntil):
				cand.Cooling, rec, skip = true, st.CoolUntil, skipCooling
			}
		}
		if qs.aware {
			in := &qs.info[t.ID]
			cand.Quota = qs.quota.ModelStatus(in.conn, in.model, now)
			if cand.Quota == quota.StatusExhausted {
				r := qs.quota.Recovery(in.conn, in.model)
				if r.IsZero() {
					r = now.Add(time.Minute)
				}
				rec, skip = later(rec, r), skipExhausted
			}
			b, end := qs.ledger.Check(in.slot, p.est, now)
			cand.Budget = b
			if !b.Affordable() {
				rec, skip = later(rec, end), skipBudget
			}
		}
		score, ok := routing.Score(&cand)
		p.live = append(p.live, routing.Live{Eligible: ok, Demoted: cand.Quota == quota.StatusApproaching, Score: score, Weight: weights[i]})
		p.probe = append(p.probe, cand.Circuit == routing.CircuitHalfOpen)
		if !ok {
			if skip >= 0 {
				qs.m.skips[t.ID][skip].Inc()
			}
			p.recover = earlier(p.recover, rec)
		}
	}
	p.order = p.order[:0]
	if c.model.Strategy == config.StrategyRoundRobin && len(list) > 1 {
		p.order = routing.RoundRobin(p.live, g.rr[c.model.Index].Add(1)-1, c.model.ScheduleFor(c.surface), p.order)
	} else {
		p.order = routing.Priority(p.live, p.order)
	}
	p.pos, p.ranked = 0, true
}

// next returns the next candidate to attempt, with its token reservation
// and (for a half-open circuit) its probe claimed, or nil when no untried
// candidate is usable now.
func (c *call) next(list []*catalog.Target) *catalog.Target {
	g, qs, p := c.g, c.g.qs, &c.plan
	if !p.ranked {
		c.rank(list)
	}
	for p.pos < len(p.order) {
		i := p.order[p.pos]
		p.pos++
		t := list[i]
		// The parent's admission covers its first dispatch, as for a
		// single-target model; only the work beyond it (a fallback after a
		// failure) is fan-out that the lanes may refuse under congestion.
		if !c.takeTarget(t, p.fanout && p.attempts > 0) { // at its cap, or refused by the lanes
			if p.pos > 1 {
				c.fallbacks++
			}
			continue
		}
		now := g.clk.Now()
		in := &qs.info[t.ID]
		if qs.aware {
			res, b, end := qs.ledger.Reserve(in.slot, p.est, now)
			if !b.Affordable() { // another request took the budget since rank
				c.releaseTarget()
				qs.m.skips[t.ID][skipBudget].Inc()
				p.recover = earlier(p.recover, end)
				continue
			}
			p.res = res
		}
		if p.probe[i] {
			if !g.targets.TryProbe(t.ID, now) { // another request is probing
				c.releaseTarget()
				qs.ledger.Settle(&p.res, 0, true)
				qs.m.skips[t.ID][skipCircuit].Inc()
				p.recover = earlier(p.recover, now.Add(time.Second))
				continue
			}
			p.probeID = t.ID
		}
		p.tried[i] = true
		p.attempts++
		// Read the provider's usage only when a budget needs it; ask for
		// the stream's usage chunk then, too.
		p.metering, p.injected, p.usage = p.res.Active, false, ledger.Usage{}
		return t
	}
	return nil
}

// annotate attaches the attempt's headers, verdict and probe flag to its
// report and learns when the target may recover.
func (p *plan) annotate(m *messages.AttemptFinished, now time.Time) {
	m.Quota, m.Reason, m.RetryAfter = p.obs, p.verdict.Reason, p.verdict.RetryAfter
	if p.probeID == m.Target {
		m.Probe, p.probeID = true, -1
	}
	if m.Class.ProviderSide() {
		var rec time.Time
		if p.obs != nil && p.obs.HasRetryAfter {
			rec = now.Add(p.obs.RetryAfter)
		}
		if m.RetryAfter > 0 {
			rec = later(rec, now.Add(m.RetryAfter))
		}
		rec = later(rec, p.obs.ExhaustedUntil())
		if !rec.IsZero() {
			p.hint = earlier(p.hint, rec)
		}
	}
	p.obs, p.verdict = nil, failure.Verdict{}
}

// releaseAttempt settles the reservation of an attempt that will not
// serve the request: a refund when the provider refused or was never
// reached, the input estimate when it may have started working (timeout,
// caller gone).
func (c *call) releaseAttempt(class messages.FailureClass) {
	p := &c.plan
	switch class {
	case messages.Timeout, messages.Canceled:
		c.g.qs.ledger.Settle(&p.res, p.input, false)
	default:
		c.g.qs.ledger.Settle(&p.res, 0, true)
	}
	p.metering, p.injected = false, false
}

// settleUsage settles the serving attempt's reservation at the end of the
// request: the provider's usage report when one was seen (for a stream cut
// short, what was reported so far), else the estimate.
func (c *call) settleUsage() {
	p := &c.plan
	if !p.res.Active {
		return
	}
	actual := p.est
	if p.usage.Seen {
		actual = p.usage.Total()
	}
	c.g.qs.ledger.Settle(&p.res, actual, false)
}

// waitForRecovery waits, when no untried candidate is usable, for the
// earliest recovery if it comes before the wait budget runs out. It
// reports false when it did not wait (or the caller left).
func (c *call) waitForRecovery() bool {
	g, p := c.g, &c.plan
	rec := p.recover
	if rec.IsZero() || rec.After(p.waitUntil) || p.waits >= maxWaits {
		return false
	}
	p.waits++
	realStart := time.Now()
	budget := g.qs.maxWait - p.waited
	for {
		if c.cancel.Cancelled() || g.draining.Load() {
			return false
		}
		now := g.clk.Now()
		elapsed := time.Since(realStart)
		if !now.Before(rec) || elapsed >= budget {
			p.waited += elapsed
			p.ranked = false
			if elapsed >= budget && now.Before(rec) {
				return false // the clock did not get there in real time
			}
			g.metrics.routes[c.route].waited.Inc()
			return true
		}
		time.Sleep(min(rec.Sub(now), 20*time.Millisecond, budget-elapsed))
	}
}

// maxWaits bounds the wait rounds of one request (each ends in a re-rank).
const maxWaits = 32

// earliestRecovery is when some candidate of the request is expected back.
func (c *call) earliestRecovery() time.Time {
	return earlier(c.plan.recover, c.plan.hint)
}

// retryAfterSeconds rounds the time until t up to whole seconds (≥ 1).
func retryAfterSeconds(t, now time.Time) int {
	d := t.Sub(now)
	if d <= 0 {
		return 1
	}
	return int((d + time.Second - 1) / time.Second)
}

// refuse answers when no candidate could be tried: every target is
// cooling down, has an open circuit, is out of quota or over its token
// budget, and the earliest recovery is beyond the wait budget.
func (c *call) refuse() {
	g := c.g
	now := g.clk.Now()
	secs := retryAfterSeconds(c.earliestRecovery(), now)
	g.metrics.routes[c.route].refused.Inc()
	c.fail(&apierror.Error{Status: 429, Type: "rate_limit_error", AnthropicType: "rate_limit_error", Code: "targets_exhausted", RetryAfter: secs,
		Message: "every target of model " + strconv.Quote(c.model.Name) + " is cooling down, out of quota or over its token budget; the earliest recovers in " +
			strconv.Itoa(secs) + "s, retry after that (GET /api/omniroute/quota shows why)"})
	c.ctx.Response.Header.Set("X-Should-Retry", "false")
	c.routingHeaders()
}

// finalError adjusts the last provider error passed through after
// failover ran out: the SDK must not multiply retries the gateway already
// made, and a 429 says when the earliest candidate recovers.
func (c *call) finalError(status int) {
	h := &c.ctx.Response.Header
	h.Set("X-Should-Retry", "false")
	if status == 429 {
		if rec := c.earliestRecovery(); !rec.IsZero() {
			var b [20]byte
			h.SetBytesV("Retry-After", strconv.AppendInt(b[:0], int64(retryAfterSeconds(rec, c.g.clk.Now())), 10))
		}
	}
}
