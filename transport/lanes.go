package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/transport/admit"
)

// The admit stage (package transport/admit): each attempt's lease on its
// target's upstream in the tenant's lane. This file is its glue: the
// Assembly's options and attach for the lanes actor, the model walk's
// priority step, and the call's side of the stage's port (admit.Request).

// PriorityHeader chooses a request's priority class.
const PriorityHeader = admit.PriorityHeader

// LanesOptions are the lanes actor's options: one admission controller
// per upstream, and the tenants' weights.
//
// One upstream per target (upstream index = target id): a target is a
// connection and upstream model, whose capacity belongs to the provider's
// model whichever model of ours routes to it; its cap is the smallest
// max_concurrent any model sets for it (admit.Caps).
func (a *Assembly) LanesOptions() lanes.Options {
	g := a.g
	specs := admit.Upstreams(g.cat.Targets, g.opts.File)
	return lanes.Options{Config: g.opts.Env.Lanes.Config(), Clock: g.clk, Upstreams: specs,
		Logger: g.log.With("component", "admission"), Weight: g.laneWeight}
}

// AttachLanes hands the front end the spawned lanes actor (the
// composition root subscribed its pressure follower to the gateway's
// memory pressure), and registers the admit stage's health section and
// metrics.
func (a *Assembly) AttachLanes(h *lanes.Handle) {
	g := a.g
	g.adm.Attach(h, admission.Class(g.opts.Env.Lanes.DefaultClass))
	g.op.AddHealthSection("adaptiveAdmission", g.adm.Health, admit.Brief)
	g.adm.Register(g.metrics.set)
}

// Lanes returns the admission handle.
func (g *Gateway) Lanes() *lanes.Handle { return g.adm.Lanes() }

// priority decides the request's admission class (admit.State.Priority).
// The last step of the model walk (inference.go): the lanes of the admit
// stage, which dispatch runs per candidate, queue by it.
func (c *call) priority() bool {
	cl, fixed := c.tenantClass()
	if e := c.lane.Priority(&c.g.adm, c.ctx, cl, fixed); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// AdmissionTicket is the call's part of each attempt's admission ticket
// (admit.Request): its tenant, whether it streams, its deadline, the
// cancel that ends a queued wait, and what its cost is priced from.
func (c *call) AdmissionTicket() (lanes.Ticket, admission.Features) {
	return lanes.Ticket{Tenant: c.tenant, Stream: c.scan.Stream, Deadline: c.deadline, Abort: &c.cancel},
		admission.Features{InputTokens: c.plan.Input, Fanout: max(c.scan.N, 1)}
}

// AdmissionWaited traces a wait for admission on t's upstream
// (admit.Request).
func (c *call) AdmissionWaited(t *catalog.Target, waited time.Duration) {
	c.traceAdmissionWait(t, waited)
}

// tryAdmit takes t's upstream for the next attempt if it has room now.
func (c *call) tryAdmit(t *catalog.Target, l *lanes.Lease) bool {
	return c.lane.TryAdmit(&c.g.adm, c, t, l)
}

// admit waits for room on t's upstream (in the tenant's lane).
func (c *call) admit(t *catalog.Target, l *lanes.Lease) lanes.Reason {
	return c.lane.Admit(&c.g.adm, c, c.ctx, t, l)
}

// releaseLease ends the current attempt's lease with its outcome.
func (c *call) releaseLease(o lanes.Outcome, drop bool) { c.lane.Release(&c.g.adm, o, drop) }

// failAdmission answers a refused admission: the caller left (499), or
// the refusal in the caller's dialect with its measured Retry-After.
func (c *call) failAdmission(r lanes.Reason, retry int) {
	if r == lanes.Aborted {
		c.ctx.SetConnectionClose()
		c.ctx.SetStatusCode(499) // the caller left while queued; nobody reads it
		return
	}
	c.routingHeaders()
	c.fail(admit.Refusal(r, retry))
}

// releaseStream ends a committed stream's lease at the end of its relay.
func (c *call) releaseStream() {
	c.lane.ReleaseStream(&c.g.adm, c.cancel.Cancelled() || c.ctx.Response.StatusCode() == 499, c.stream.Cut())
}

// logCombo records a combo's decision at debug level.
func (c *call) logCombo(fanout bool, what string) {
	g := c.g
	if !fanout || !g.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	served := ""
	if c.att.Target != nil {
		served = c.att.Target.Name
	}
	g.log.Debug("combo "+what, "model", c.model.Name, "strategy", c.model.Strategy, "target", served,
		"fallbacks", c.att.Fallbacks, "skipped", c.lane.Skips, "requestId", string(c.rid))
}
