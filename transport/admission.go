package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"net"
	"sync"
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
	"github.com/omniroute/gateway/internal/tokenest"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/relayroute"
)

// Admission system 1 in the request path.
//
// Byte stage, for every chat-shaped route, before any body byte is read:
// the internal self-loop bypass (still under the hard cap) → critical
// memory pressure: 503 resource_pressure → declared size over the hard cap:
// 413 → declared size at least the heavy threshold and larger than the
// whole budget: 413 body_exceeds_budget → reserve (fast path, else the
// ingest actor's fair queue) → read. An Expect: 100-continue upload is
// decided the same way in the server's ExpectHandler, so a rejected upload
// never sends its body. A chunked body reserves once its running total
// crosses the heavy threshold, grows its reservation as it keeps coming,
// and stops being read the moment a cap is crossed. Rejected unread bodies
// close the connection instead of being drained.
//
// Structural stage, after the JSON scan: a conversation over
// OMNIROUTE_CHAT_HARD_MAX_MESSAGES is refused (413); a byte-light but
// structurally heavy body (many messages or tools, or many estimated
// tokens) goes through the same gate.
//
// The reservation's bytes go back as soon as the body is no longer held
// (a stream that committed frees its body); its heavy-request slot goes
// back when the request finishes.

// Memory pressure types, re-exported for hosts in other modules that feed
// their own figures through Options.PressureSample (Go's internal/ rule
// keeps internal/pressure private).
type (
	// PressureSample is one memory observation; unknown figures are -1.
	PressureSample = pressure.Sample
	// PressureState is the published severity with the sample behind it.
	PressureState = pressure.State
)

// bypassHeader marks OmniRoute's internal self-loop requests.
const bypassHeader = "X-Omniroute-Admission-Bypass"

// admissionKey is the fasthttp user-value key under which the
// ExpectHandler leaves its decision for the handler: an *ingest.Lease, or
// admittedLight for a body that needs none.
type admissionKey struct{}

type admissionMark struct{ bypass bool }

var (
	admittedLight  = &admissionMark{}
	admittedBypass = &admissionMark{bypass: true}
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
	g.pressure, g.ingest = ph, ih
	if k := ad.SelfLoopKey(); k != "" {
		g.selfLoopKey = []byte(k)
	}
	countCap, _ := ad.CountCap()
	b := a.budget
	g.log.Info("chat ingest budget", "bytes", b.Bytes, "source", string(b.Source), "ceilingBytes", b.CeilingBytes,
		"largeBodyBytes", int64(ad.LargeBodyBytes), "countCap", countCap)
	g.op.AddHealthSection("chatAdmission", g.admissionHealth, nil)
	g.registerAdmissionMetrics()
}

func (g *Gateway) stopAdmission() {
	if g.ingest != nil {
		g.ingest.Stop()
	}
	if g.pressure != nil {
		g.pressure.Stop()
	}
}

// Ingest returns the ingest actor's handle.
func (g *Gateway) Ingest() *ingest.Handle { return g.ingest }

// Pressure returns the resource-pressure actor's handle.
func (g *Gateway) Pressure() *pressureactor.Handle { return g.pressure }

func (g *Gateway) admissionHealth() (any, string) {
	s := g.ingest.Snapshot()
	status := "ok"
	if s.PressureSeverity == pressure.Critical.String() {
		status = "degraded"
	}
	return s, status
}

// isBypass reports the internal self-loop: x-omniroute-admission-bypass:
// internal together with the configured self-loop key as Bearer token
// (compared in constant time). Without a configured key there is no bypass.
func (g *Gateway) isBypass(h *fasthttp.RequestHeader) bool {
	if g.selfLoopKey == nil {
		return false
	}
	v := bytes.TrimSpace(h.Peek(bypassHeader))
	if !bytes.EqualFold(v, []byte("internal")) {
		return false
	}
	a := h.Peek(fasthttp.HeaderAuthorization)
	if len(a) < 7 || !bytes.EqualFold(a[:7], []byte("bearer ")) {
		return false
	}
	return subtle.ConstantTimeCompare(bytes.TrimSpace(a[7:]), g.selfLoopKey) == 1
}

// byteStage decides a request before any byte of its body is read. It
// returns the reservation (nil for a light body), whether the self-loop
// bypass applies, or the rejection. For a body under the heavy threshold
// it costs a few loads and never talks to the actor.
func (g *Gateway) byteStage(ctx *fasthttp.RequestCtx, id tenant.ID, host context.Context) (*ingest.Lease, bool, *apierror.Error) {
	h := g.ingest
	cl := int64(ctx.Request.Header.ContentLength())
	if g.isBypass(&ctx.Request.Header) {
		if cl > h.HardMax() {
			return nil, false, edge.ErrBodyTooLarge(h.HardMax())
		}
		return nil, true, nil
	}
	if h.Critical() {
		h.Shed(messages.ShedResourcePressure)
		return nil, false, errPressure
	}
	if cl > h.HardMax() {
		return nil, false, edge.ErrBodyTooLarge(h.HardMax())
	}
	if cl < h.LargeBody() { // light, or of unknown length (chunked)
		return nil, false, nil
	}
	if cl > h.Budget().Bytes {
		h.Shed(messages.ShedBodyExceedsBudget)
		return nil, false, errExceedsBudget(h.Budget().Bytes)
	}
	if l, ok := h.TryAcquire(cl, true); ok {
		return l, false, nil
	}
	l, out := g.acquireWaiting(ctx, host, id, cl, nil)
	if l == nil {
		return nil, false, g.busy(out)
	}
	return l, false, nil
}

// admitWait lets a client hang-up (through the hang-up watcher) or a
// forced shutdown end a wait in the ingest queue.
type admitWait struct{ gone chan struct{} }

func (w *admitWait) Cancel() {
	select {
	case w.gone <- struct{}{}:
	default:
	}
}

var admitWaitPool = sync.Pool{New: func() any { return &admitWait{gone: make(chan struct{}, 1)} }}

// acquireWaiting queues for a reservation (or, with grow, for more of
// one) while watching for the client leaving.
func (g *Gateway) acquireWaiting(ctx *fasthttp.RequestCtx, host context.Context, id tenant.ID, n int64, grow *ingest.Lease) (*ingest.Lease, messages.IngestOutcome) {
	var gone <-chan struct{}
	var w *admitWait
	var token edge.Token
	if host != nil {
		gone = host.Done()
	} else {
		w = admitWaitPool.Get().(*admitWait)
		select {
		case <-w.gone:
		default:
		}
		token = g.inflight.Register(w, uint32(ctx.ConnID()), ctx.Conn(), time.Now())
		gone = w.gone
	}
	var l *ingest.Lease
	var out messages.IngestOutcome
	if grow != nil {
		if out = grow.Grow(id, n, gone); out == messages.IngestAdmitted {
			l = grow
		}
	} else {
		l, out = g.ingest.Acquire(id, n, true, gone)
	}
	if w != nil {
		g.inflight.Unregister(token)
		admitWaitPool.Put(w)
	}
	return l, out
}

// busy maps a failed reservation to its answer.
func (g *Gateway) busy(out messages.IngestOutcome) *apierror.Error {
	switch out {
	case messages.ShedBodyExceedsBudget:
		return errExceedsBudget(g.ingest.Budget().Bytes)
	case messages.IngestCanceled:
		return errClientGone
	case messages.IngestStopped:
		return errDraining
	}
	return errBusy(out.String(), g.ingest.RetryAfter(2))
}

// admitBytes runs the byte stage for the call, or adopts the decision the
// ExpectHandler already took.
func (c *call) admitBytes() bool {
	ctx := c.ctx
	if v := ctx.UserValue(admissionKey{}); v != nil {
		ctx.RemoveUserValue(admissionKey{})
		switch d := v.(type) {
		case *ingest.Lease:
			c.intake.lease = d
		case *admissionMark:
			c.intake.bypass = d.bypass
		}
		return true
	}
	l, bypass, e := c.g.byteStage(ctx, c.tenant, c.host)
	if e != nil {
		c.reject(e)
		return false
	}
	c.intake.lease, c.intake.bypass = l, bypass
	return true
}

// reject answers with an admission error before the body was (fully)
// read: the connection is closed rather than drained, unless the whole
// body already arrived with the headers (fasthttp reads up to 8 KiB of it
// before the handler runs), when keeping the connection costs nothing.
func (c *call) reject(e *apierror.Error) {
	if cl := c.ctx.Request.Header.ContentLength(); cl < 0 || cl > prefetchedBody || c.body != nil {
		c.closeUnread()
	}
	if e.Reason != "" {
		c.ctx.Response.Header.Set("X-Omniroute-Admission-Reason", e.Reason)
	}
	c.fail(e)
}

// prefetchedBody is how much of a body fasthttp reads with the headers.
const prefetchedBody = 8 << 10

// Lingering after a refused upload: until the client closes, at most
// lingerMax; at most maxLingering connections at once (beyond that they
// close after the answer at once).
const (
	lingerMax    = 5 * time.Second
	maxLingering = 1024
)

// closeUnread closes the connection after the answer instead of draining
// the unread body. Closing a socket that still has unread input makes the
// kernel send a reset, which can destroy the answer before the client read
// it (clients then report "connection reset" or "broken pipe" instead of
// the 413 or 503). So the answer is written, the write side is shut, and
// the socket is closed once the client closed its side (the hang-up
// watcher reports it) or lingerMax passed. Nothing more is read.
//
// fasthttp closes a Connection: close response's socket at once, so the
// answer is written from a hijack handler instead (it runs on its own
// goroutine once the handler returned; the context stays valid until it
// ends).
func (c *call) closeUnread() {
	ctx, g := c.ctx, c.g
	ctx.SetConnectionClose()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(conn net.Conn) { g.lingerClose(ctx, conn) })
}

func (g *Gateway) lingerClose(ctx *fasthttp.RequestCtx, c net.Conn) {
	defer func() { // a hijack handler runs on its own goroutine: a panic there would end the process
		if p := recover(); p != nil {
			g.notePanic(edge.Of(ctx.Path()), string(ctx.Response.Header.Peek("X-Request-Id")), "linger", p)
		}
	}()
	raw := c
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		raw = u.UnsafeConn()
	}
	_ = raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	bw := bufio.NewWriterSize(raw, 4096)
	if err := ctx.Response.Write(bw); err != nil || bw.Flush() != nil {
		return
	}
	cw, ok := raw.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if g.lingering.Add(1) > maxLingering {
		g.lingering.Add(-1)
		return
	}
	defer g.lingering.Add(-1)
	w := admitWaitPool.Get().(*admitWait)
	select {
	case <-w.gone:
	default:
	}
	token := g.inflight.Register(w, 0, raw, time.Now())
	t := time.NewTimer(lingerMax)
	if !g.edge.Watchable(raw) {
		t.Reset(lingerDelay)
	}
	select {
	case <-w.gone:
	case <-t.C:
	}
	t.Stop()
	g.inflight.Unregister(token)
	admitWaitPool.Put(w)
}

// lingerDelay is the linger when the client's close cannot be watched.
const lingerDelay = 500 * time.Millisecond

// startReading makes an admitted upload abortable under critical pressure.
func (c *call) startReading() {
	if c.intake.lease != nil {
		c.intake.lease.StartReading(c)
	}
}

// doneReading ends the abortable phase.
func (c *call) doneReading() {
	if c.intake.lease != nil {
		c.intake.lease.DoneReading()
	}
}

// AbortRead stops the upload being read: the blocked read returns at once.
// The ingest actor calls it under critical pressure.
func (c *call) AbortRead() {
	if conn := c.ctx.Conn(); conn != nil {
		_ = conn.SetReadDeadline(time.Now())
	}
}

// bodyProgress runs after every read of the body with the running total.
// It stops an aborted upload, reserves for a chunked body once it crosses
// the heavy threshold, and grows that reservation as the body keeps coming.
func (c *call) bodyProgress(total int64) bool {
	if c.intake.bypass {
		return true
	}
	h := c.g.ingest
	if c.intake.lease != nil {
		if c.intake.lease.Aborted() {
			h.Shed(messages.ShedResourcePressure)
			c.reject(errPressure)
			return false
		}
		if total <= c.intake.lease.Bytes() {
			return true
		}
	} else if total < h.LargeBody() {
		return true
	}
	// A chunked body: reserve what was read, rounded up to the threshold,
	// before reading more.
	if total > h.Budget().Bytes {
		h.Shed(messages.ShedBodyExceedsBudget)
		c.reject(errExceedsBudget(h.Budget().Bytes))
		return false
	}
	step := h.LargeBody()
	target := min((total+step-1)/step*step, h.HardMax(), h.Budget().Bytes)
	if c.intake.lease == nil {
		if l, ok := h.TryAcquire(target, true); ok {
			c.intake.lease = l
		} else if l, out := c.g.acquireWaiting(c.ctx, c.host, c.tenant, target, nil); l != nil {
			c.intake.lease = l
		} else {
			c.reject(c.g.busy(out))
			return false
		}
		c.intake.lease.StartReading(c)
		return true
	}
	if _, out := c.g.acquireWaiting(c.ctx, c.host, c.tenant, target, c.intake.lease); out != messages.IngestAdmitted {
		c.reject(c.g.busy(out))
		return false
	}
	return true
}

// admitStructure runs the structural stage after the JSON scan: a
// conversation over the message limit is refused, and a byte-light but
// structurally heavy body takes a heavy slot as a large one does. A step
// of the model walk (inference.go): it needs the scan's counts, and comes
// before any model or tenant work is spent on a body it may refuse.
func (c *call) admitStructure() bool {
	a := &c.g.opts.Env.Admission
	if limit := int(a.HardMaxMessages); limit > 0 && c.scan.Messages > limit {
		c.fail(errHistoryTooLong(limit))
		return false
	}
	if c.intake.bypass || c.intake.lease != nil {
		return true
	}
	heavy := c.scan.Messages >= int(a.HeavyMessages) || c.scan.Tools >= int(a.HeavyTools)
	if !heavy && !tokenest.Estimate(c.body.B, int(a.HeavyTokens)).Heavy(int(a.HeavyTokens)) {
		return true
	}
	h := c.g.ingest
	l, ok := h.TryAcquire(h.LargeBody(), true)
	if !ok {
		var out messages.IngestOutcome
		if l, out = c.g.acquireWaiting(c.ctx, c.host, c.tenant, h.LargeBody(), nil); l == nil {
			e := errStructureBusy(h.RetryAfter(1))
			switch out {
			case messages.IngestCanceled:
				e = errClientGone
			case messages.IngestStopped:
				e = errDraining
			}
			if out.IsShed() {
				c.ctx.Response.Header.Set("X-Omniroute-Admission-Reason", out.String())
			}
			c.fail(e)
			return false
		}
	}
	l.DoneReading() // the body is already read: nothing to abort
	c.intake.lease = l
	return true
}

// bodyDone frees the request body once nothing needs it any more (a
// stream committed: no further failover) and returns its bytes to the
// budget; the heavy-request slot stays until the request finishes.
func (c *call) bodyDone() {
	if c.stream.x != nil {
		c.stream.x.Req.ResetBody() // it pointed into the buffers freed below
	}
	if c.body != nil {
		bytebufferpool.Put(c.body)
		c.body = nil
	}
	if c.att.out != nil {
		bytebufferpool.Put(c.att.out)
		c.att.out = nil
	}
	if c.intake.lease != nil {
		c.intake.lease.ReleaseBytes()
	}
}

// releaseAdmission returns the reservation at the end of the request.
func (c *call) releaseAdmission() {
	if c.intake.lease != nil {
		c.intake.lease.Release()
		c.intake.lease = nil
	}
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
			l, bypass, e = g.byteStage(ctx, id, nil)
			switch {
			case e != nil:
			case l != nil:
				ctx.SetUserValue(admissionKey{}, l) // released by the handler, or by fasthttp (io.Closer) if it never runs
			case bypass:
				ctx.SetUserValue(admissionKey{}, admittedBypass)
			default:
				ctx.SetUserValue(admissionKey{}, admittedLight)
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
	id, _, decision := g.identifyCaller(g.rc.Load(), credential(&ctx.Request.Header), edge.IsLoopback(ctx))
	return id, keyError(decision)
}

// expectRelayCaller checks the relay token for the ExpectHandler, as the
// relay handler does (its rate limit is the handler's: it is spent once,
// when the request is served). The token's tenant id is the fairness key.
func (g *Gateway) expectRelayCaller(ctx *fasthttp.RequestCtx) (tenant.ID, *apierror.Error) {
	raw := credential(&ctx.Request.Header)
	tok, e := g.side.relay.Authenticate(raw, g.clk.Now())
	if e != nil {
		return tenant.ID{}, e
	}
	ctx.Response.Header.Set("X-Relay-Token", tok.Name)
	return g.rc.Load().tenants.IDForKey(raw), nil
}

// Admission errors: status, type, code and message as OmniRoute answers
// them, in the caller's dialect.
var (
	errPressure   = apierror.New(apierror.CodeResourcePressure).WithReason(messages.ShedResourcePressure.String()).Retry(2)
	errClientGone = apierror.New(apierror.CodeClientClosedRequest)
)

func errExceedsBudget(b int64) *apierror.Error {
	return apierror.New(apierror.CodeBodyExceedsBudget, max(1, b>>20)).WithReason(messages.ShedBodyExceedsBudget.String())
}

func errBusy(reason string, retryAfter int) *apierror.Error {
	return apierror.New(apierror.CodeChatAdmissionBusy, "Chat admission capacity is temporarily unavailable. Retry shortly.").WithReason(reason).Retry(retryAfter)
}

func errStructureBusy(retryAfter int) *apierror.Error {
	return apierror.New(apierror.CodeChatAdmissionBusy, "Local chat admission capacity is busy for this structurally heavy request; upstream provider routing was not attempted. Retry shortly.").
		WithReason(messages.BusyStructureLimit.String()).Retry(retryAfter)
}

func errHistoryTooLong(limit int) *apierror.Error {
	return apierror.New(apierror.CodeChatHistoryTooLarge, limit).WithReason(messages.RefusedMessageLimit.String())
}

// intakeState is the ingest stage's state: the ingest budget's
// reservation (nil for a light body) and whether the internal self-loop
// bypass applies.
type intakeState struct {
	lease  *ingest.Lease
	bypass bool
}
