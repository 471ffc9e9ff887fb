package transport

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/planner"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/messages"
)

// plan is one request's routing state: the planner's decisions
// (internal/planner: ranking, tried candidates, recovery, waiting), the
// token reservation held and what the attempt's answer said. It lives in
// the pooled call and keeps its buffers.
type plan struct {
	planner.Plan

	weights []int // round-robin weights of the candidates, by position
	fanout  bool  // a combo: several targets to choose from
	busy    []int // candidates passed over for want of room, this round
	// list is the candidate list being planned (for Evidence).
	list []*catalog.Target
	// snap is the targets snapshot of the current ranking.
	snap *targets.Snapshot

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

	// svcDown names the supervised service of a candidate passed over
	// because it is not running as the gateway's own child (sidecars.go).
	svcDown string

	// sess is the conversation's session affinity (session.go).
	sess sessionState
	// waiter serves waits for a cooling target; kept across uses.
	waiter planner.Waiter
}

// reset clears p for the next request, keeping its buffers.
func (p *plan) reset() plan {
	q := plan{Plan: p.Plan, busy: p.busy[:0], probeID: -1, waiter: p.waiter, sess: sessionState{hashes: p.sess.hashes[:0]}}
	q.Plan.Reset()
	return q
}

// beginPlan prepares routing for list: token estimate and wait budget.
func (c *call) beginPlan(list []*catalog.Target, weights []int, fanout bool) {
	g, qs, p := c.g, c.g.qs, &c.plan
	p.weights, p.fanout, p.list = weights, fanout, list
	p.probeID = -1
	maxWait := qs.maxWait
	if c.counting {
		// A count runs no prompt: it costs its upstream the least, and
		// with no target usable the estimate answers at once.
		maxWait = 0
	} else {
		in, out := ledger.Estimate(c.body.B, c.scan.MaxTokens, c.scan.N, qs.defOut)
		p.input, p.est = in, in+out
	}
	p.Begin(len(list), g.clk.Now(), planner.Limits{MaxAttempts: int(g.opts.Env.Upstream.MaxAttempts), MaxWait: maxWait, Deadline: c.deadline})
}

// rank has the planner score the untried candidates from the published
// snapshots and order the eligible ones by the model's strategy.
func (c *call) rank(list []*catalog.Target) {
	p := &c.plan
	p.list, p.snap = list, c.g.targets.Snapshot()
	var o planner.Order
	if c.model.Strategy == config.StrategyRoundRobin && len(list) > 1 {
		o = planner.Order{RoundRobin: true, Cursor: c.rc.rr[c.model.Index].Add(1) - 1, Schedule: c.model.ScheduleFor(c.surface)}
		if !c.plan.sess.done { // once per request: the body does not change
			c.plan.sess.key, c.plan.sess.done = c.sessionKey(), true
		}
		if c.plan.sess.key != 0 {
			o.Session, o.Hashes = c.plan.sess.key, c.targetHashes(list)
		}
	}
	p.Rank(c, len(list), c.g.clk.Now(), o)
	p.snap = nil
}

// Evidence gives the planner what the snapshots say about candidate i
// (planner.Source).
func (c *call) Evidence(i int, now time.Time, e *planner.Evidence) {
	qs, p := c.g.qs, &c.plan
	t := p.list[i]
	e.Weight = p.weights[i]
	if c.counting && !t.Conn.Provider.APIs.Has(catalog.Messages) {
		e.Unusable = true // only an Anthropic-dialect provider counts tokens
		return
	}
	if c.g.serviceDown(t) {
		e.ServiceDown, p.svcDown = true, t.Conn.Provider.Service
		return
	}
	if !c.counting && !c.fits(t) {
		e.Unusable = true // the prompt is above its window, or it takes no tools
		return
	}
	if snap := p.snap; snap != nil && t.ID < len(snap.Targets) {
		st := &snap.Targets[t.ID]
		e.Known = true
		e.ConsecutiveFailures, e.ErrorRate, e.TTFBMillis = st.ConsecutiveFailures, st.ErrorRate, st.TTFBEWMAMillis
		e.Open, e.CoolUntil, e.RateLimited = st.Open, st.CoolUntil, st.RateLimited
	}
	if qs.aware {
		in := qs.info.At(t.ID)
		e.QuotaAware = true
		e.Quota = qs.quota.ModelStatus(in.conn, in.model, now)
		if e.Quota == quota.StatusExhausted {
			e.QuotaRecovery = qs.quota.Recovery(in.conn, in.model)
		}
		// A count generates nothing (its estimate is 0 tokens) but is one
		// request of the provider's request budget.
		e.Budget, e.BudgetEnd = qs.ledger.Check(in.slot, p.est, now)
	}
}

// Skipped counts a candidate the planner passed over (planner.Source).
func (c *call) Skipped(i int, why planner.Skip) {
	c.g.qs.m.skips.At(c.plan.list[i].ID)[why].Inc()
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
	if !p.Ranked() {
		c.rank(list)
	}
	c.lane.Refusal, c.lane.RefusalRetry = lanes.None, 0
	p.busy = p.busy[:0]
	for _, i := range p.Candidates() {
		if p.Tried(i) {
			continue
		}
		if !c.tryAdmit(list[i], &c.lane.Lease) {
			p.busy = append(p.busy, i)
			continue
		}
		if c.claim(list, i, p.NeedsProbe(i)) {
			for _, j := range p.busy {
				c.lane.NoteSkip(&c.g.adm, list[j])
			}
			return list[i]
		}
	}
	if len(p.busy) == 0 {
		return nil
	}
	first := p.busy[0]
	if r := c.admit(list[first], &c.lane.Lease); r != lanes.None {
		c.lane.Refusal, c.lane.RefusalRetry = r, c.lane.Lease.RetryAfter
		return nil
	}
	if c.claim(list, first, p.NeedsProbe(first)) {
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
			p.Refuse(i, end)
			return false
		}
		p.res = res
	}
	if probe {
		if !g.targets.TryProbe(t.ID, now) { // another request is probing
			c.releaseLease(lanes.LocalReject, false)
			c.settleLedger(0, true)
			qs.m.skips.At(t.ID)[skipCircuit].Inc()
			p.Refuse(i, now.Add(time.Second))
			return false
		}
		p.probeID = t.ID
	}
	p.Take(i)
	// Read the provider's usage only when a budget, a tenant's limits or
	// the request log needs it; ask for the stream's usage chunk then, too.
	// A count's answer (input_tokens) is no usage: it spent none.
	p.metering, p.injected, p.usage = (p.res.Active || c.ten.Meter) && !c.counting, false, ledger.Usage{}
	return true
}

// retry returns the last failed target once more when nothing else is
// left (planner.Plan.Retry says when). The retry is the target's probe:
// its success closes the circuit the failure opened, and only one request
// retries at a time.
func (c *call) retry(list []*catalog.Target, class messages.FailureClass) *catalog.Target {
	p := &c.plan
	i := p.Retry(class, c.g.clk.Now())
	if i < 0 {
		return nil
	}
	t := list[i]
	if r := c.admit(t, &c.lane.Lease); r != lanes.None {
		c.lane.Refusal, c.lane.RefusalRetry = r, c.lane.Lease.RetryAfter
		return nil
	}
	if !c.claim(list, i, true) {
		return nil
	}
	c.g.metrics.routes[c.route].retries.Inc()
	return t
}

// annotate attaches the attempt's headers, verdict and probe flag to its
// report and has the planner learn when the target may recover.
func (p *plan) annotate(m *messages.AttemptFinished, now time.Time) {
	m.Quota, m.Reason, m.RetryAfter = p.obs, p.verdict.Reason, p.verdict.RetryAfter
	if p.probeID == m.Target {
		m.Probe, p.probeID = true, -1
	}
	p.Learn(m.Class, p.obs, m.RetryAfter, now)
	p.obs, p.verdict = nil, failure.Verdict{}
}

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

// releaseAttempt settles the reservation of an attempt that will not
// serve the request: a refund when the provider refused or was never
// reached, the input estimate when it may have started working (timeout,
// caller gone).
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
		actual = p.usage.Tokens()
	}
	c.settleLedger(actual, false)
}

// settleLedger settles the attempt's token reservation (and, in cluster
// mode, its share of the cluster's pools) with actual tokens, or refunds
// it.
func (c *call) settleLedger(actual int64, refund bool) {
	p := &c.plan
	if cs := c.g.cs; cs != nil && p.res.Active {
		cs.give(&p.shared, actual, 0, refund)
	}
	c.g.qs.ledger.Settle(&p.res, actual, refund)
}

// waitForRecovery waits, when no untried candidate is usable, for the
// earliest recovery if the planner says it comes in time (planner.Plan.Wait).
// It sleeps on the planner's timer and wakes early when the targets' state
// changes (a probe closed a circuit) or the caller leaves; it reports false
// when it did not wait, or the wait ended with the caller gone or the
// gateway draining.
func (c *call) waitForRecovery() bool {
	g, p := c.g, &c.plan
	changed := g.targets.Changed()
	d, ok := p.Wait(g.clk.Now())
	if !ok {
		return false
	}
	if d <= 0 {
		return true
	}
	g.metrics.waiting.Add(1)
	end, _ := c.plan.waiter.Wait(d, changed, &c.cancel)
	g.metrics.waiting.Add(-1)
	if end == planner.WaitCancelled || g.edge.Draining() {
		return false
	}
	g.metrics.routes[c.route].waited.Inc()
	return true
}

// refuse answers when no candidate could be tried: every target is
// cooling down, has an open circuit, is out of quota or over its token
// budget, and the earliest recovery is beyond the wait budget. When each
// is out because it failed, the provider is down: 503
// targets_unavailable. When any is out for a limit (a provider's 429, an
// exhausted quota, a token budget), 429 targets_exhausted. Both carry
// Retry-After, the earliest recovery.
func (c *call) refuse() {
	g := c.g
	if c.plan.svcDown != "" && c.plan.EarliestRecovery().IsZero() {
		// Nothing else will recover: the model's targets wait for their
		// service to run again.
		c.fail(g.errServiceDown(c.model.Name, c.plan.svcDown))
		c.routingHeaders()
		return
	}
	r := c.plan.Refusal(g.clk.Now())
	g.metrics.routes[c.route].refused.Inc()
	after := strconv.Itoa(r.RetryAfter)
	if r.Outage {
		c.fail(apierror.New(apierror.CodeTargetsUnavailable, c.model.Name, after).Retry(r.RetryAfter))
	} else {
		c.fail(apierror.New(apierror.CodeTargetsExhausted, c.model.Name, after).Retry(r.RetryAfter))
	}
	if r.NoRetry {
		c.ctx.Response.Header.Set("X-Should-Retry", "false")
	}
	c.routingHeaders()
}

// finalError adjusts the last provider error passed through after
// failover ran out, as the planner advises (planner.Plan.Final):
// X-Should-Retry: false when a retry is pointless, a 429's Retry-After
// set to when the earliest candidate recovers, and a 5xx that gave none
// a Retry-After.
func (c *call) finalError(status int, class messages.FailureClass) {
	h := &c.ctx.Response.Header
	f := c.plan.Final(status, class, c.g.clk.Now())
	if f.NoRetry {
		h.Set("X-Should-Retry", "false")
	}
	if f.RetryAfter > 0 && (status == 429 || len(h.Peek(fasthttp.HeaderRetryAfter)) == 0) {
		var b [20]byte
		h.SetBytesV(fasthttp.HeaderRetryAfter, strconv.AppendInt(b[:0], int64(f.RetryAfter), 10))
	}
}
