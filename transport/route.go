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

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/actors/targets"
)

// plan is one request's routing state: the ranked candidates, which were
// tried, the token reservation held, and what failed attempts taught about
// recovery. It lives in the pooled call and keeps its buffers.
type plan struct {
	live     []routing.Live
	probe    []bool // candidate's circuit is half open: needs the probe
	order    []int
	tried    []bool
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
	// waitUntil bounds waiting for recovery (gateway clock); waited is
	// the real time spent waiting.
	waitUntil time.Time
	waited    time.Duration
	waits     int
	// retried: the one retry of a failed target, for when nothing else is
	// left, was used; last is the index of the last target tried.
	retried bool
	last    int

	weights []int // round-robin weights of the candidates, by position
	fanout  bool  // a combo: several targets to choose from
	busy    []int // candidates passed over for want of room, this round

	input, est int64
	res        ledgeractor.Reservation
	shared     sharedRes // the reservation's share of the cluster's pools (cluster.go)
	probeID    int       // target whose half-open probe this attempt holds, or -1
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
	return plan{live: p.live[:0], probe: p.probe[:0], order: p.order[:0], tried: p.tried[:0], busy: p.busy[:0], probeID: -1, last: -1}
}

// beginPlan prepares routing for list: token estimate and wait budget.
func (c *call) beginPlan(list []*catalog.Target, weights []int, fanout bool) {
	g, qs, p := c.g, c.g.qs, &c.plan
	p.weights, p.fanout = weights, fanout
	p.probeID, p.last = -1, -1
	for range list {
		p.tried = append(p.tried, false)
	}
	in, out := ledger.Estimate(c.body.B, c.scan.MaxTokens, qs.defOut)
	p.input, p.est = in, in+out
	now := g.clk.Now()
	p.waitUntil = now.Add(qs.maxWait)
	if !c.deadline.IsZero() && c.deadline.Before(p.waitUntil) {
		p.waitUntil = c.deadline
	}
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
	p.live, p.probe, p.recover, p.answerBy = p.live[:0], p.probe[:0], time.Time{}, time.Time{}
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
			in := qs.info.At(t.ID)
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
				qs.m.skips.At(t.ID)[skip].Inc()
			}
			if !rec.IsZero() {
				p.recover = earlier(p.recover, rec)
				p.answerBy = earlier(p.answerBy, rec.Add(expectedTTFB(snap, t.ID)))
			}
		}
	}
	p.order = p.order[:0]
	if c.model.Strategy == config.StrategyRoundRobin && len(list) > 1 {
		p.order = routing.RoundRobin(p.live, c.rc.rr[c.model.Index].Add(1)-1, c.model.ScheduleFor(c.surface), p.order)
	} else {
		p.order = routing.Priority(p.live, p.order)
	}
	p.ranked = true
}

// next returns the next candidate to attempt: eligible and untried, its
// upstream admitted (c.laneLease holds it), its token reservation and (for
// a half-open circuit) its probe claimed; or nil when no untried candidate
// is usable now, with c.refusal set when admission refused.
//
// Candidates are taken in routing order, but one whose upstream has no
// room now is passed over for a later one that has (spill-over, as a
// target at its max_concurrent always was): capacity is per upstream, so a
// model's fast provider serves what its slow one cannot. When none has
// room, the request waits in its lane of the first one's queue.
func (c *call) next(list []*catalog.Target) *catalog.Target {
	p := &c.plan
	if !p.ranked {
		c.rank(list)
	}
	c.refusal, c.refusalRetry = lanes.None, 0
	p.busy = p.busy[:0]
	for _, i := range p.order {
		if p.tried[i] {
			continue
		}
		if !c.tryAdmit(list[i], &c.laneLease) {
			p.busy = append(p.busy, i)
			continue
		}
		if c.claim(list, i, p.probe[i]) {
			for _, j := range p.busy {
				c.noteSkip(list[j])
			}
			return list[i]
		}
	}
	if len(p.busy) == 0 {
		return nil
	}
	first := p.busy[0]
	if r := c.admit(list[first], &c.laneLease); r != lanes.None {
		c.refusal, c.refusalRetry = r, c.laneLease.RetryAfter
		return nil
	}
	if c.claim(list, first, p.probe[first]) {
		return list[first]
	}
	return nil
}

// claim finishes taking candidate i, whose upstream is admitted: it
// reserves the token budget and, when probe is set, claims the target's
// single half-open probe. It releases the admission and reports false when
// either is refused.
func (c *call) claim(list []*catalog.Target, i int, probe bool) bool {
	g, qs, p := c.g, c.g.qs, &c.plan
	t := list[i]
	now := g.clk.Now()
	in := qs.info.At(t.ID)
	if qs.aware {
		res, b, end := qs.ledger.Reserve(in.slot, p.est, now)
		if b.Affordable() && res.Active && g.cs != nil {
			// Cluster mode: this node's share of the budget, taken from
			// its pool (atomics; a refill is asynchronous).
			if ok, retry := g.cs.takeLedger(&p.shared, in.slot, p.est, now); !ok {
				qs.ledger.Settle(&res, 0, true)
				b, end = routing.BudgetInsufficient, retry
			}
		}
		if !b.Affordable() { // another request took the budget since rank
			c.releaseLease(lanes.LocalReject, false)
			qs.m.skips.At(t.ID)[skipBudget].Inc()
			p.recover = earlier(p.recover, end)
			p.tried[i] = true
			return false
		}
		p.res = res
	}
	if probe {
		if !g.targets.TryProbe(t.ID, now) { // another request is probing
			c.releaseLease(lanes.LocalReject, false)
			c.settleLedger(0, true)
			qs.m.skips.At(t.ID)[skipCircuit].Inc()
			p.recover = earlier(p.recover, now.Add(time.Second))
			p.tried[i] = true
			return false
		}
		p.probeID = t.ID
	}
	p.tried[i] = true
	p.last = i
	p.attempts++
	// Read the provider's usage only when a budget, a tenant's limits or
	// the request log needs it; ask for the stream's usage chunk then, too.
	p.metering, p.injected, p.usage = p.res.Active || c.ten.meter, false, ledger.Usage{}
	return true
}

// retry returns the last failed target once more when nothing else is
// left: the failure was transient (a 5xx, a timeout, a refused
// connection, a 429) and the provider gave no hint to wait, so one more
// try is likely to succeed and spares the caller a retry of its own. The
// retry is the target's probe: its success closes the circuit the failure
// opened, and only one request retries at a time.
func (c *call) retry(list []*catalog.Target, class messages.FailureClass) *catalog.Target {
	p := &c.plan
	if p.retried || p.last < 0 || !transient(class) || !p.hint.IsZero() || c.expired() {
		return nil
	}
	p.retried = true
	t := list[p.last]
	if r := c.admit(t, &c.laneLease); r != lanes.None {
		c.refusal, c.refusalRetry = r, c.laneLease.RetryAfter
		return nil
	}
	if !c.claim(list, p.last, true) {
		return nil
	}
	c.g.metrics.routes[c.route].retries.Inc()
	return t
}

// transient reports failure classes a retry may cure.
func transient(class messages.FailureClass) bool {
	switch class {
	case messages.Capacity, messages.Timeout, messages.Connect, messages.RateLimit:
		return true
	}
	return false
}

// expectedTTFB is how long target id usually takes to answer (0 when
// unknown), for deciding whether a recovery comes in time.
func expectedTTFB(snap *targets.Snapshot, id int) time.Duration {
	if snap == nil || id >= len(snap.Targets) {
		return 0
	}
	return time.Duration(snap.Targets[id].TTFBEWMAMillis * float64(time.Millisecond))
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
// abandonAttempt gives back what the current attempt took when it was
// never sent: its admission, its token reservation (refunded) and its
// half-open probe.
func (c *call) abandonAttempt() {
	c.releaseLease(lanes.LocalReject, false)
	c.releaseAttempt(messages.Request)
	if p := &c.plan; p.probeID >= 0 {
		c.g.targets.ReleaseProbe(p.probeID)
		p.probeID = -1
	}
}

func (c *call) releaseAttempt(class messages.FailureClass) {
	c.tenantAttemptEnded(class) // what it cost the tenant (tenants.go)
	p := &c.plan
	switch class {
	case messages.Timeout, messages.Canceled:
		c.settleLedger(p.input, false)
	default:
		c.settleLedger(0, true)
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
	c.settleLedger(actual, false)
}

// settleLedger settles the attempt's token reservation (and, in cluster
// mode, its share of the cluster's pools) with actual tokens, or refunds
// it.
func (c *call) settleLedger(actual int64, refund bool) {
	p := &c.plan
	if cs := c.g.cs; cs != nil && p.res.Active {
		cs.give(&p.shared, actual, refund)
	}
	c.g.qs.ledger.Settle(&p.res, actual, refund)
}

// waitForRecovery waits, when no untried candidate is usable, for the
// earliest recovery if it comes before the wait budget (and the caller's
// deadline) runs out. It sleeps on a timer and wakes early when the
// targets' state changes (a probe closed a circuit) or the caller leaves;
// it reports false when it did not wait, or the wait ended with the
// caller gone or the gateway draining.
func (c *call) waitForRecovery() bool {
	g, p := c.g, &c.plan
	rec := p.recover
	if rec.IsZero() || rec.After(p.waitUntil) || p.waits >= maxWaits {
		return false
	}
	if !c.deadline.IsZero() && p.answerBy.After(c.deadline) {
		return false // back too late to answer before the caller's deadline
	}
	p.waits++
	changed := g.targets.Changed()
	d := rec.Sub(g.clk.Now())
	if d <= 0 {
		p.ranked = false
		return true
	}
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
		c.timer = time.NewTimer(time.Hour)
	}
	wake := c.wake
	if !c.cancel.Notify(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}) {
		return false
	}
	c.timer.Reset(d)
	realStart := time.Now()
	select {
	case <-c.timer.C:
	case <-changed:
	case <-wake:
	}
	c.timer.Stop()
	c.cancel.Notify(nil)
	select {
	case <-wake:
	default:
	}
	p.waited += time.Since(realStart)
	p.ranked = false
	if c.cancel.Cancelled() || g.draining.Load() {
		return false
	}
	g.metrics.routes[c.route].waited.Inc()
	return true
}

// maxWaits bounds the wait rounds of one request (each ends in a re-rank;
// a change of any target's state ends one early).
const maxWaits = 64

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
	rec := c.earliestRecovery()
	secs := retryAfterSeconds(rec, now)
	g.metrics.routes[c.route].refused.Inc()
	c.fail(&apierror.Error{Status: 429, Type: "rate_limit_error", AnthropicType: "rate_limit_error", Code: "targets_exhausted", RetryAfter: secs,
		Message: "every target of model " + strconv.Quote(c.model.Name) + " is cooling down, out of quota or over its token budget; the earliest recovers in " +
			strconv.Itoa(secs) + "s, retry after that (GET /api/omniroute/quota shows why)"})
	if pointlessRetry(rec, now) {
		c.ctx.Response.Header.Set("X-Should-Retry", "false")
	}
	c.routingHeaders()
}

// pointlessSoon is how far away a recovery must be for a client's own
// retry to be pointless: the SDKs back off for seconds, not minutes.
const pointlessSoon = time.Minute

// pointlessRetry reports whether a client retry cannot succeed before the
// earliest recovery (unknown counts as never).
func pointlessRetry(rec, now time.Time) bool {
	return rec.IsZero() || rec.Sub(now) > pointlessSoon
}

// finalError adjusts the last provider error passed through after
// failover ran out. X-Should-Retry: false tells the SDKs not to retry
// only when a retry is pointless: the failure needs money, a credential
// or a changed request, or nothing recovers within a minute. After a
// transient failure the SDK's own retry (after Retry-After) is what the
// caller wants. A 429 says when the earliest candidate recovers.
func (c *call) finalError(status int, class messages.FailureClass) {
	h := &c.ctx.Response.Header
	now := c.g.clk.Now()
	rec := c.earliestRecovery()
	if !transient(class) || (class == messages.RateLimit && !rec.IsZero() && rec.Sub(now) > pointlessSoon) {
		h.Set("X-Should-Retry", "false")
	}
	if status == 429 && !rec.IsZero() {
		var b [20]byte
		h.SetBytesV("Retry-After", strconv.AppendInt(b[:0], int64(retryAfterSeconds(rec, now)), 10))
	}
}
