package transport

import (
	"context"
	"net"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/ingest"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/intake"
	"github.com/omniroute/gateway/transport/relayroute"
)

// The ingest stage (package transport/intake): the ingest byte budget's
// reservation before the body is read, and the structural stage after the
// scan. This file is its glue: the Assembly's options and attach for the
// pressure and ingest actors, the walk's steps that run the stage on the
// call, the call's side of the stage's ports (intake.Request, and
// intake.Edge on the gateway), and the ExpectHandler's decision.

// Memory pressure types, re-exported for hosts in other modules that feed
// their own figures through Options.PressureSample (Go's internal/ rule
// keeps internal/pressure private).
type (
	// PressureSample is one memory observation; unknown figures are -1.
	PressureSample = pressure.Sample
	// PressureState is the published severity with the sample behind it.
	PressureState = pressure.State
)

// PressureOptions resolves the ingest budget once and returns the
// resource-pressure actor's options; IngestConfig uses the same budget.
func (a *Assembly) PressureOptions() pressureactor.Options {
	g := a.g
	e := &g.opts.Env
	override, _ := e.Admission.MaxInflightBytes.Get()
	a.budget = budget.Resolve(override, nil)
	p := &e.Pressure
	cfg := pressure.Config{
		HighRatio: float64(p.PressureHighRatio), CriticalRatio: float64(p.PressureCriticalRatio), RecoveryRatio: float64(p.PressureRecoveryRatio),
		PSIHigh: float64(p.PSIHigh), PSICritical: float64(p.PSICritical), PSIRecovery: float64(p.PSIRecovery),
		SustainHigh: int(p.SustainHigh), SustainCritical: int(p.SustainCritical), SustainRecovery: int(p.SustainRecovery),
	}
	return pressureactor.Options{Config: cfg, Sample: g.opts.PressureSample,
		PSISource: pressure.PSISource(p.PSISource), GoLimitFallback: a.budget.LimitBytes, Clock: g.clk, Log: g.log.With("component", "pressure")}
}

// IngestConfig is the ingest actor's configuration on the budget
// PressureOptions resolved, fed by the spawned pressure actor ph and
// weighting queued bodies by the tenants' policies (tenants.go).
func (a *Assembly) IngestConfig(ph *pressureactor.Handle) ingest.Config {
	g := a.g
	e := &g.opts.Env
	ad := &e.Admission
	countCap, _ := ad.CountCap()
	return ingest.Config{
		Budget: a.budget, LargeBody: int64(ad.LargeBodyBytes), HardMax: int64(e.Ingest.HardMaxBodyBytes),
		CountCap: countCap, Headroom: ad.Headroom(), HeapShedRatio: float64(ad.HeapShedRatio),
		QueueWait: ad.QueueWait.Duration(), MaxQueuedBytes: int64(ad.MaxQueuedBytes),
		Clock: g.clk, Pressure: ph, Log: g.log.With("component", "ingest"),
		Weight: g.tenantWeight, // the tenants' policies (tenants.go)
	}
}

// AttachAdmission hands the front end the spawned pressure and ingest
// actors (the composition root subscribed ingest to pressure), and
// registers the admission health section and metrics.
func (a *Assembly) AttachAdmission(ph *pressureactor.Handle, ih *ingest.Handle) {
	g := a.g
	ad := &g.opts.Env.Admission
	countCap, _ := ad.CountCap() // 0 when unset
	g.intake.Attach(ph, ih, intake.Config{SelfLoopKey: ad.SelfLoopKey(),
		HardMaxMessages: int(ad.HardMaxMessages), HeavyMessages: int(ad.HeavyMessages), HeavyTools: int(ad.HeavyTools),
		HeavyTokens: int(ad.HeavyTokens), CountCap: countCap, Draining: errDraining}, (*intakeEdge)(g))
	b := a.budget
	g.log.Info("chat ingest budget", "bytes", b.Bytes, "source", string(b.Source), "ceilingBytes", b.CeilingBytes,
		"largeBodyBytes", int64(ad.LargeBodyBytes), "countCap", countCap)
	g.op.AddHealthSection("chatAdmission", g.intake.Health, nil)
	g.intake.Register(g.metrics.set)
}

// Ingest returns the ingest actor's handle.
func (g *Gateway) Ingest() *ingest.Handle { return g.intake.Ingest() }

// Pressure returns the resource-pressure actor's handle.
func (g *Gateway) Pressure() *pressureactor.Handle { return g.intake.Pressure() }

// intakeEdge is the gateway as the ingest stage's port on the edge
// (intake.Edge): the edge's in-flight registry and hang-up watcher, and
// the panic log.
type intakeEdge Gateway

func (p *intakeEdge) Register(c edge.Canceler, hint uint32, conn net.Conn, now time.Time) edge.Token {
	return p.inflight.Register(c, hint, conn, now)
}
func (p *intakeEdge) Unregister(t edge.Token)      { p.inflight.Unregister(t) }
func (p *intakeEdge) Watchable(conn net.Conn) bool { return p.edge.Watchable(conn) }
func (p *intakeEdge) NotePanic(ctx *fasthttp.RequestCtx, where string, v any) {
	(*Gateway)(p).notePanic(edge.Of(ctx.Path()), string(ctx.Response.Header.Peek("X-Request-Id")), where, v)
}

// Caller is the call's identity for the ingest stage (intake.Request):
// its fasthttp context, the net/http host's context and its tenant.
func (c *call) Caller() (*fasthttp.RequestCtx, context.Context, tenant.ID) {
	return c.ctx, c.host, c.tenant
}

// AbortRead stops the upload being read: the blocked read returns at once.
// The ingest actor calls it under critical pressure (intake.Request).
func (c *call) AbortRead() {
	if conn := c.ctx.Conn(); conn != nil {
		_ = conn.SetReadDeadline(time.Now())
	}
}

// admitBytes runs the byte stage for the call, or adopts the decision the
// ExpectHandler already took.
func (c *call) admitBytes() bool {
	if e := c.intake.AdmitBytes(&c.g.intake, c); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// bodyProgress runs after every read of the body with the running total
// (intake.State.Progress).
func (c *call) bodyProgress(total int64) bool {
	if e := c.intake.Progress(&c.g.intake, c, total); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// admitStructure runs the structural stage after the JSON scan
// (intake.State.Structure). A step of the model walk (inference.go): it
// needs the scan's counts, and comes before any model or tenant work is
// spent on a body it may refuse.
func (c *call) admitStructure() bool {
	if e := c.intake.Structure(&c.g.intake, c, c.scan.Messages, c.scan.Tools, c.body.B); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// bodyDone frees the request body once nothing needs it any more (a
// stream committed: no further failover) and returns its bytes to the
// budget; the heavy-request slot stays until the request finishes.
func (c *call) bodyDone() {
	if x := c.stream.Exchange(); x != nil {
		x.Req.ResetBody() // it pointed into the buffers freed below
	}
	if c.body != nil {
		bytebufferpool.Put(c.body)
		c.body = nil
	}
	c.att.BodyDone()
	c.intake.BodyDone()
}

// expectAdmission decides an Expect: 100-continue upload to a chat-shaped
// route or the relay route before its body is sent: the same checks as the
// handler up to the reservation, which it leaves in the request's user
// values. It returns the status for fasthttp (100 to continue), and false
// for other routes.
func (g *Gateway) expectAdmission(ctx *fasthttp.RequestCtx) (int, bool) {
	var r edge.Route
	f := apierror.OpenAI
	if id, ok := dia.ByRoute(ctx.Path()); ok {
		s := catalog.Surface(id)
		r, f = edge.SurfaceRoute(s), formatFor(s)
	} else if r = edge.Of(ctx.Path()); r != edge.Relay {
		return 0, false
	}
	var e *apierror.Error
	switch {
	case !ctx.IsPost():
		e = edge.ErrMethod("POST")
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "POST")
	case r == edge.Relay && !g.side.relay.Enabled():
		e = relayroute.ErrNotEnabled
	case !edge.IsJSONMediaType(ctx.Request.Header.ContentType()):
		e = errMediaType
	}
	if e == nil {
		var id tenant.ID
		if r == edge.Relay {
			id, e = g.expectRelayCaller(ctx)
		} else {
			id, e = g.expectCaller(ctx)
		}
		if e == nil {
			var l *ingest.Lease
			var bypass bool
			if l, bypass, e = g.intake.ByteStage(ctx, id, nil); e == nil {
				intake.Leave(ctx, l, bypass)
			}
		}
	}
	if e == nil {
		return fasthttp.StatusContinue, true
	}
	var ridBuf [160]byte
	rid := g.edge.RequestID(ridBuf[:0], &ctx.Request.Header)
	ctx.Response.Header.SetBytesV("X-Request-Id", rid)
	edge.SetAnthropicRequestID(&ctx.Response.Header, f, rid)
	if e.Reason != "" {
		ctx.Response.Header.Set("X-Omniroute-Admission-Reason", e.Reason)
	}
	edge.WriteError(ctx, f, string(rid), e)
	g.metrics.request(r, e.Status)
	return e.Status, true
}

// expectCaller identifies the caller of a chat-shaped route for the
// ExpectHandler, as the handler does (identify).
func (g *Gateway) expectCaller(ctx *fasthttp.RequestCtx) (tenant.ID, *apierror.Error) {
	id, _, decision := g.lim.Identify(g.rc.Load().tenants, edge.Credential(&ctx.Request.Header), edge.IsLoopback(ctx))
	return id, keyError(decision)
}

// expectRelayCaller checks the relay token for the ExpectHandler, as the
// relay handler does (its rate limit is the handler's: it is spent once,
// when the request is served). The token's tenant id is the fairness key.
func (g *Gateway) expectRelayCaller(ctx *fasthttp.RequestCtx) (tenant.ID, *apierror.Error) {
	raw := edge.Credential(&ctx.Request.Header)
	tok, e := g.side.relay.Authenticate(raw, g.clk.Now())
	if e != nil {
		return tenant.ID{}, e
	}
	ctx.Response.Header.Set("X-Relay-Token", tok.Name)
	return g.rc.Load().tenants.IDForKey(raw), nil
}
