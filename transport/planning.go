package transport

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/plan"
)

// The plan stage (package transport/plan): ranking the candidates
// through the planner, the next one's claim (its token reservation and
// half-open probe), the retry, the wait for a recovering target, the
// reservation's settle, the answer when none could be tried; session
// affinity and the caller's fallback models. This file is its glue: the
// steps of the walk that run the stage on the call (readFallbacks, and
// dispatch's per-candidate next, retry, waitForRecovery, ...), the
// fallback models' run over dispatch's candidate lists, and the stage's
// ports: plan.Request on the call (planRequest) and plan.Gateway on the
// gateway (planGateway). The routing actors and settings reach the stage
// in AttachRouting (quota.go), the cluster's port in AttachCluster.

// attachPlan hands the plan stage the routing settings RecordRouting read,
// the gateway's port and the spawned routing actors' handles.
func (g *Gateway) attachPlan() {
	qs := g.qs
	g.plan.Attach(plan.Config{QuotaAware: qs.aware, MaxWait: qs.maxWait, DefaultOutput: qs.defOut,
		MaxAttempts: int(g.opts.Env.Upstream.MaxAttempts)}, (*planGateway)(g), g.targets, g.routing.Ledger(), g.routing.Quota())
}

// readFallbacks reads the body's fallback models (plan.Fallbacks.Read).
// A step of the model walk (inference.go), after the model is resolved
// and before the tenant's limits: their reservation is priced over the
// fallback models' targets too.
func (c *call) readFallbacks() bool {
	if e := c.fb.Read((*planRequest)(c)); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// beginPlan prepares routing for list: token estimate and wait budget
// (plan.State.Prepare).
func (c *call) beginPlan(list []*catalog.Target, weights []int) {
	c.plan.Prepare(&c.g.plan, (*planRequest)(c), list, weights)
}

// next returns the next candidate to attempt, admitted and claimed, or
// nil with c.lane.Refusal set when admission refused (plan.State.Next).
func (c *call) next(list []*catalog.Target) *catalog.Target {
	c.lane.Refusal, c.lane.RefusalRetry = lanes.None, 0
	return c.plan.Next(&c.g.plan, (*planRequest)(c), list)
}

// retry returns the last failed target once more when nothing else is
// left (plan.State.RetryFailed).
func (c *call) retry(list []*catalog.Target, class messages.FailureClass) *catalog.Target {
	return c.plan.RetryFailed(&c.g.plan, (*planRequest)(c), list, class)
}

// abandonAttempt gives back what an attempt never sent took
// (plan.State.Abandon).
func (c *call) abandonAttempt() { c.plan.Abandon(&c.g.plan, (*planRequest)(c)) }

// releaseAttempt settles the reservation of an attempt that will not
// serve the request (plan.State.EndAttempt).
func (c *call) releaseAttempt(class messages.FailureClass) {
	c.plan.EndAttempt(&c.g.plan, (*planRequest)(c), class)
}

// settleUsage settles the serving attempt's reservation at the end of
// the request (plan.State.SettleUsage).
func (c *call) settleUsage() { c.plan.SettleUsage(&c.g.plan) }

// waitForRecovery waits for the earliest recovery when it comes in time
// (plan.State.AwaitRecovery).
func (c *call) waitForRecovery() bool { return c.plan.AwaitRecovery(&c.g.plan, (*planRequest)(c)) }

// refuse answers when no candidate could be tried (plan.State.Refused).
func (c *call) refuse() {
	e, noRetry := c.plan.Refused(&c.g.plan, (*planRequest)(c), c.model.Name)
	c.fail(e)
	if noRetry {
		c.ctx.Response.Header.Set("X-Should-Retry", "false")
	}
	c.routingHeaders()
}

// finalError adjusts the last provider error passed through after
// failover ran out (plan.State.FinalError).
func (c *call) finalError(status int, class messages.FailureClass) {
	c.plan.FinalError(&c.g.plan, &c.ctx.Response.Header, status, class)
}

// runFallbacks tries the requested model's targets, then each fallback
// model's, until one serves; a caller gone, its deadline passed or the
// gateway draining ends the tries. The answer when none served is the
// requested model's (the last failure kept, whatever model it was of).
func (c *call) runFallbacks(list []*catalog.Target) bool {
	var x exhaust
	primary := c.model
	defer func() { c.model = primary }()
	all := list
	for i := -1; i < len(c.fb.Models); i++ {
		m := primary
		if i >= 0 {
			m = c.fb.Models[i]
			if c.cancel.Cancelled() || c.expired() || c.g.edge.Draining() {
				break
			}
			c.plan.Restart()
			all = append(all[:len(all):len(all)], m.TargetsFor(c.surface)...)
		}
		c.model = m
		l := m.TargetsFor(c.surface)
		c.beginPlan(l, m.WeightsFor(c.surface))
		if relay, done := c.runList(l, len(l) > 1, &x); done {
			return relay
		}
	}
	c.model = primary
	c.answerExhausted(all, &x)
	return false
}

// planRequest is the call as the plan stage's port on the request
// (plan.Request).
type planRequest call

func (p *planRequest) Ctx() *fasthttp.RequestCtx           { return p.ctx }
func (p *planRequest) Model() *catalog.Model               { return p.model }
func (p *planRequest) Surface() catalog.Surface            { return p.surface }
func (p *planRequest) Parsed() ([]byte, *jsonscan.Request) { return p.body.B, &p.scan }
func (p *planRequest) Counting() bool                      { return p.counting }
func (p *planRequest) Deadline() time.Time                 { return p.deadline }
func (p *planRequest) Cursor() uint64                      { return p.rc.rr[p.model.Index].Add(1) - 1 }
func (p *planRequest) Fits(t *catalog.Target) bool         { return (*call)(p).fits(t) }
func (p *planRequest) Metered() bool                       { return p.ten.Meter }
func (p *planRequest) Canceller() plan.Canceller           { return &p.cancel }

func (p *planRequest) Resolve(name []byte) (*catalog.Model, *apierror.Error) {
	if m := p.rc.cat.Resolve(name); m != nil {
		return m, nil
	}
	return nil, errUnknownModel(name)
}

// ModelRefused is the tenant limits' answer when the key's
// allowed_models exclude name (limits.State.ModelRefused).
func (p *planRequest) ModelRefused(name []byte) *apierror.Error { return p.ten.ModelRefused(name) }

// AttemptEnded adds an unserved attempt's cost to the tenant's
// (tenants.go).
func (p *planRequest) AttemptEnded(class messages.FailureClass) {
	(*call)(p).tenantAttemptEnded(class)
}

// TryAdmit, WaitAdmit, NoteBusy and DropAdmission are the admit stage's
// (lanes.go, transport/admit) on the attempt's lease; a refusal is kept
// in the call's admit state for dispatch to answer.
func (p *planRequest) TryAdmit(t *catalog.Target) bool {
	return (*call)(p).tryAdmit(t, &p.lane.Lease)
}

func (p *planRequest) WaitAdmit(t *catalog.Target) bool {
	if r := (*call)(p).admit(t, &p.lane.Lease); r != lanes.None {
		p.lane.Refusal, p.lane.RefusalRetry = r, p.lane.Lease.RetryAfter
		return false
	}
	return true
}

func (p *planRequest) NoteBusy(t *catalog.Target) { p.lane.NoteSkip(&p.g.adm, t) }
func (p *planRequest) DropAdmission()             { (*call)(p).releaseLease(lanes.LocalReject, false) }

// Count counts the plan stage's events on the route's series.
func (p *planRequest) Count(e plan.Event) {
	m := p.g.metrics
	switch e {
	case plan.Retried:
		m.routes[p.route].retries.Inc()
	case plan.WaitBegan:
		m.waiting.Add(1)
	case plan.WaitEnded:
		m.waiting.Add(-1)
	case plan.Waited:
		m.routes[p.route].waited.Inc()
	case plan.Refused:
		m.routes[p.route].refused.Inc()
	}
}

// planGateway is the gateway as the plan stage's port (plan.Gateway).
type planGateway Gateway

func (p *planGateway) Now() time.Time { return p.clk.Now() }

// Where reads the target's quota connection, upstream model and ledger
// slot (quota.go's table, grown only before a target's id is published).
func (p *planGateway) Where(target int) (conn, model, slot int) {
	in := p.qs.info.At(target)
	return in.Conn, in.Model, in.Slot
}

func (p *planGateway) CountSkip(target int, why plan.Skip) { p.qs.skips.At(target)[why].Inc() }
func (p *planGateway) ServiceDown(t *catalog.Target) bool  { return (*Gateway)(p).serviceDown(t) }
func (p *planGateway) ServiceDownError(model, service string) *apierror.Error {
	return (*Gateway)(p).errServiceDown(model, service)
}
func (p *planGateway) Draining() bool { return p.edge.Draining() }
