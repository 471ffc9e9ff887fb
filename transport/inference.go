package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/fit"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/planner"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/translate"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/upstream"
)

// call is the state of one inference request. It is pooled; a streaming
// call lives on after the handler returns, until its relay ends.
type call struct {
	g *Gateway
	// rc is the routing config the request started on (reload.go): it
	// keeps it to its end, whatever reloads happen meanwhile.
	rc      *routingConfig
	ctx     *fasthttp.RequestCtx
	surface catalog.Surface
	format  apierror.Format
	route   edge.Route
	rid     []byte
	ridBuf  [160]byte
	tenant  tenant.ID
	scan    jsonscan.Request
	model   *catalog.Model
	body    *bytebufferpool.ByteBuffer
	out     *bytebufferpool.ByteBuffer
	start   time.Time
	took    time.Duration // from start to settle

	cancel  upstream.Cancel
	token   edge.Token
	stopCtx func() bool

	fallbacks int
	target    *catalog.Target
	// deadline is when the caller stops waiting (zero: it did not say);
	// see readDeadline. attemptStart is when the current attempt was sent.
	deadline     time.Time
	attemptStart time.Time
	// waiter serves waits for a cooling target; kept across uses.
	waiter planner.Waiter

	// streaming relay state
	x        *upstream.Exchange
	rd       sse.Reader
	pending  []byte
	pendOff  []int
	terminal bool
	idle     time.Duration
	closing  atomic.Bool
	respID   []byte
	relayed  bool                // the relay route authenticated it (relay_route.go)
	counting bool                // a count_tokens call (count_tokens.go)
	panicked bool                // handling panicked: the edge's guard answers it (edge/panic.go)
	settled  bool                // settle ran (or started): it runs once
	dw       edge.DeadlineWriter // the stream's writer with its write deadline (edge/deadlines.go)

	// admission (admission.go)
	lease  *ingest.Lease
	bypass bool
	host   context.Context

	plan plan       // routing, token reservation and usage metering (route.go)
	ten  tenantCall // the caller's key, limits reservation, log (tenants.go)

	// admission (lanes.go): the current attempt's lease on its upstream,
	// the priority class, and why admission refused, if it did.
	laneLease    lanes.Lease
	class        admission.Class
	refusal      lanes.Reason
	refusalRetry int
	waited       time.Duration // queued for admission, over all attempts
	// attemptReason is the failure reason of the last attempt.
	attemptReason string
	streamCut     bool
	skips         int
	skipped       [maxSkipNames]int32 // target ids skipped, for the header
	alt           *bytebufferpool.ByteBuffer
	altScan       jsonscan.Request

	// tracing (tracing.go): nil unless a tracer provider is configured
	span, attemptSpan trace.Span

	// translation (translated.go): the attempt's upstream dialect, and
	// when it is not the caller's, the translator, the translated body,
	// the upstream model it was written for and the stream's frame buffer.
	up      catalog.Surface
	tr      *translate.Translator
	tbody   *bytebufferpool.ByteBuffer
	trModel string
	trInfo  *modelinfo.Info
	evbuf   []byte

	// fitting (fitting.go): the fitter and the raw body it fitted; fitted
	// when the attempt sends fbody, fitRan when the fitter's changes are
	// the attempt's; the caller's strict setting; reply, the caller's
	// model name as a JSON string when answers are renamed to it, and
	// rbuf, a renamed answer or event.
	fitter fit.Fitter
	fbody  *bytebufferpool.ByteBuffer
	fitted bool
	fitRan bool
	strict uint8
	reply  []byte
	rbuf   []byte
	// fb is the caller's per-request fallbacks (fallbacks.go).
	fb fallbackReq
	// session affinity (session.go): the conversation's key (0: none
	// found), computed once; hashes, the candidates' hashes.
	session     uint64
	sessionDone bool
	hashes      []uint64
}

var callPool = sync.Pool{New: func() any { return &call{} }}

func (g *Gateway) acquireCall(ctx *fasthttp.RequestCtx, r edge.Route, rid []byte, start time.Time) *call {
	c := callPool.Get().(*call)
	c.g, c.rc, c.ctx, c.surface, c.format, c.route, c.start = g, g.rc.Load(), ctx, r.Spec().Surface, r.Format(), r, start
	c.up = c.surface
	c.rid = append(c.ridBuf[:0], rid...)
	return c
}

func (c *call) release() {
	if c.body != nil {
		bytebufferpool.Put(c.body)
	}
	if c.out != nil {
		bytebufferpool.Put(c.out)
	}
	if c.alt != nil {
		bytebufferpool.Put(c.alt)
	}
	if c.x != nil {
		c.x.Release()
	}
	c.releaseTranslation()
	c.cancel.Reset()
	if c.fbody != nil {
		bytebufferpool.Put(c.fbody)
	}
	pending, offs, rd, scan, altScan, pl, waiter, evbuf := c.pending[:0], c.pendOff[:0], c.rd, c.scan, c.altScan, c.plan.reset(), c.waiter, c.evbuf[:0]
	fitter, reply, rbuf, fb, hashes := c.fitter, c.reply[:0], c.rbuf[:0], c.fb.reset(), c.hashes[:0]
	// The scans keep their scratch space but not their results: Model
	// aliases this request's body, which goes back to its pool now, and a
	// later call refused before it scans (the request log reads the model)
	// must not see it.
	scan.Reset()
	altScan.Reset()
	*c = call{pending: pending, pendOff: offs, rd: rd, scan: scan, altScan: altScan, plan: pl, waiter: waiter, evbuf: evbuf,
		fitter: fitter, reply: reply, rbuf: rbuf, fb: fb, hashes: hashes}
	callPool.Put(c)
}

func (c *call) fail(e *apierror.Error) {
	e = c.chargeRefusal(e) // a limited key pays for its refusals (tenants.go)
	c.noteError(e)
	edge.WriteError(c.ctx, c.format, string(c.rid), e)
}

// inference handles /v1/chat/completions, /v1/messages and /v1/responses.
func (g *Gateway) inference(ctx *fasthttp.RequestCtx, r edge.Route, rid []byte, host context.Context, start time.Time) {
	c := g.acquireCall(ctx, r, rid, start)
	g.metrics.inflight.Add(1)
	g.active.Add(1)
	defer c.abandonOnPanic()
	streaming := c.handle(host)
	c.applyTenantHeaders()
	if streaming {
		return // the relay finishes the call
	}
	c.finish()
}

// finish records the outcome and returns the call to the pool. It runs
// exactly once per call: at handler end, or at the end of a relay.
func (c *call) finish() {
	c.settle()
	c.release()
}

// settle gives back everything the call holds (token reservation, ingest
// and lane leases, the in-flight registration) and records its outcome.
// It runs at most once: a panic inside it must not make the panic guard
// give the same leases back twice.
func (c *call) settle() {
	if c.settled {
		return
	}
	c.settled = true
	g := c.g
	c.settleUsage()
	c.took = time.Since(c.start) // one clock read for the log and the metrics
	defer c.traceEnd()           // after the outcome below is recorded
	c.finishTenant()             // the tenant's limits and the request log (tenants.go)
	c.releaseAdmission()
	if c.token != (edge.Token{}) {
		g.inflight.Unregister(c.token)
	}
	if c.stopCtx != nil {
		c.stopCtx()
	}
	c.releaseStream()
	if !c.panicked { // the panic guard counts the request as a 500
		g.metrics.finish(c.route, c.ctx.Response.StatusCode(), c.took)
	}
	g.metrics.inflight.Add(-1)
	g.active.Add(-1)
}

// handle runs the request up to the response (or the commit of a stream).
// It reports whether a relay now owns the call.
func (c *call) handle(host context.Context) bool {
	if !c.accept(host) {
		return false
	}
	if c.scan.Stream && !dia.Of(dia.ID(c.surface)).Streams {
		c.fail(apierror.New(apierror.CodeInvalidField, c.surface.Route()+" does not stream; remove \"stream\" from the request"))
		return false
	}
	if !c.admitStructure() || !c.readStrict() {
		return false
	}
	c.model = c.rc.cat.Resolve(c.scan.Model)
	c.traceStart()
	if c.model == nil {
		c.fail(errUnknownModel(c.scan.Model))
		return false
	}
	if len(c.model.TargetsFor(c.surface)) == 0 || (c.model.Strategy == config.StrategyFusion && !c.model.Surfaces.Has(c.surface)) {
		c.fail(errWrongSurface(c.model, c.surface))
		return false
	}
	if !c.readFallbacks() { // the caller's fallback models (fallbacks.go)
		return false
	}
	if !c.reserveTenant() { // tenant limits, before admission (tenants.go)
		return false
	}
	c.track(host)
	if !c.priority() {
		return false
	}
	return c.dispatch()
}

// accept runs a model call's entry checks, up to a scanned body that
// names a model: draining, method, media type, the caller's key, its
// deadline, the byte stage of admission and the body read under the cap.
// It answers the refusal itself and reports false then.
func (c *call) accept(host context.Context) bool {
	g, ctx := c.g, c.ctx
	if g.edge.Draining() {
		ctx.SetConnectionClose()
		c.fail(errDraining)
		return false
	}
	if !ctx.IsPost() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "POST")
		c.fail(edge.ErrMethod("POST"))
		return false
	}
	if !edge.IsJSONMediaType(ctx.Request.Header.ContentType()) { // missing too: see edge/browser.go
		c.fail(errMediaType)
		return false
	}
	id, decision := c.identify()
	switch decision {
	case tenantMissing:
		c.fail(errMissingKey)
		return false
	case tenantInvalid:
		c.fail(errInvalidKey)
		return false
	case tenant.Retired:
		c.fail(errRetiredKey)
		return false
	}
	c.tenant = id
	if !c.readDeadline() {
		return false
	}
	if !c.admitBytes(host) {
		return false
	}
	if !c.readBody() {
		return false
	}
	if err := jsonscan.ScanRequest(c.body.B, &c.scan); err != nil {
		c.fail(describeScanError(err))
		return false
	}
	if c.scan.ModelStart < 0 || !c.scan.ModelIsString || len(c.scan.Model) == 0 {
		c.fail(errMissingModel)
		return false
	}
	return true
}

// track registers the call so a client hang-up or a forced shutdown can
// cancel its upstream exchange. On fasthttp the client socket is watched
// once the request has waited armDelay; behind net/http, the host's request
// context does the same job.
func (c *call) track(host context.Context) {
	g := c.g
	var conn net.Conn
	if host == nil {
		conn = c.ctx.Conn()
	}
	c.token = g.inflight.Register(&c.cancel, uint32(c.ctx.ConnID()), conn, c.start)
	if host != nil {
		cancel := &c.cancel
		c.stopCtx = context.AfterFunc(host, cancel.Cancel)
	}
}

const (
	tenantAllowed = tenant.Allowed
	tenantMissing = tenant.MissingKey
	tenantInvalid = tenant.InvalidKey
)

// readBody reads the request body under the hard size cap. A declared size
// over the cap is refused before any byte is read, and the connection is
// closed instead of draining the upload.
func (c *call) readBody() bool {
	if c.body != nil {
		return true // read already (the relay route reads it to decide)
	}
	ctx := c.ctx
	limit := int64(c.g.opts.Env.Ingest.HardMaxBodyBytes)
	cl := int64(ctx.Request.Header.ContentLength())
	if cl > limit {
		c.closeUnread()
		c.fail(edge.ErrBodyTooLarge(limit))
		return false
	}
	c.body = bytebufferpool.Get()
	if !ctx.Request.IsBodyStream() {
		c.body.B = append(c.body.B[:0], ctx.Request.Body()...)
	} else {
		r := ctx.RequestBodyStream()
		if cl > 0 && int64(cap(c.body.B)) < cl {
			c.body.B = make([]byte, 0, cl)
		}
		b := c.body.B[:0]
		c.startReading()
		readStart, chunked := time.Now(), cl < 0
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if int64(len(b)) > limit {
				c.body.B = b
				c.closeUnread()
				c.fail(edge.ErrBodyTooLarge(limit))
				return false
			}
			if !c.bodyProgress(int64(len(b))) {
				c.body.B = b
				return false
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				c.body.B = b
				ctx.SetConnectionClose()
				if edge.IsTimeout(err) {
					c.fail(edge.ErrBodyTimeout)
					return false
				}
				c.fail(apierror.New(apierror.CodeIncompleteBody))
				return false
			}
			if chunked && n > 0 {
				c.extendChunkedDeadline(readStart, int64(len(b)))
			}
		}
		c.body.B = b
		c.doneReading()
	}
	if len(c.body.B) == 0 {
		c.fail(errEmptyBody)
		return false
	}
	return true
}

func describeScanError(err error) *apierror.Error {
	var se *jsonscan.SyntaxError
	var de *jsonscan.DuplicateFieldError
	var fe *jsonscan.FieldValueError
	switch {
	case errors.As(err, &se):
		return errInvalidJSON(se.Error())
	case errors.Is(err, jsonscan.ErrNotObject):
		return errInvalidJSON("the top-level value must be an object")
	case errors.As(err, &de):
		return apierror.New(apierror.CodeDuplicateField, de.Error())
	case errors.As(err, &fe):
		return apierror.New(apierror.CodeInvalidField, "request body "+fe.Error()+"; the gateway budgets and prices requests on it")
	}
	return errInvalidJSON(err.Error())
}
