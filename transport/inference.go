package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/intake"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/plan"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/stream"
	"github.com/omniroute/gateway/transport/trace"
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
	host    context.Context // the net/http host's request context, nil on fasthttp
	surface catalog.Surface
	format  apierror.Format
	route   edge.Route
	rid     []byte
	ridBuf  [160]byte
	start   time.Time
	tenant  tenant.ID
	scan    jsonscan.Request
	model   *catalog.Model
	body    *bytebufferpool.ByteBuffer
	cancel  upstream.Cancel

	// deadline is when the caller stops waiting (zero: it did not say);
	// see readDeadline.
	deadline time.Time
	relayTok *relayroute.Token // the relay route's token, checked (relay_route.go)
	counting bool              // a count_tokens call (count_tokens.go)

	life   lifeState     // how it is registered and ended (inference.go)
	intake intake.State  // ingest: the byte budget's reservation (transport/intake)
	lane   admit.State   // admit: the lease on the attempt's upstream (transport/admit)
	att    attempt.State // attempt: the target tried, its dialect, translation and fitted body (transport/attempt)
	stream stream.State  // relay: the committed stream (transport/stream)
	trace  trace.State   // the request's spans (transport/trace)

	plan plan.State   // plan: routing, token reservation and usage metering (transport/plan)
	ten  limits.State // the caller's key, limits reservation, log (transport/limits)
	// fb is the caller's per-request fallbacks (transport/plan).
	fb plan.Fallbacks
}

// lifeState is how the call is registered and ended (inference.go).
type lifeState struct {
	token    edge.Token
	stopCtx  func() bool
	panicked bool          // handling panicked: the edge's guard answers it (edge/panic.go)
	settled  bool          // settle ran (or started): it runs once
	took     time.Duration // from start to settle
}

var callPool = sync.Pool{New: func() any { return &call{} }}

func (g *Gateway) acquireCall(ctx *fasthttp.RequestCtx, r edge.Route, rid []byte, host context.Context, start time.Time) *call {
	c := callPool.Get().(*call)
	c.g, c.rc, c.ctx, c.host, c.surface, c.format, c.route, c.start = g, g.rc.Load(), ctx, host, r.Spec().Surface, r.Format(), r, start
	c.att.Begin(c.surface)
	c.rid = append(c.ridBuf[:0], rid...)
	return c
}

func (c *call) release() {
	if c.body != nil {
		bytebufferpool.Put(c.body)
	}
	c.cancel.Reset()
	// The scan keeps its scratch space but not its results: Model aliases
	// this request's body, which goes back to its pool now, and a later
	// call refused before it scans (the request log reads the model) must
	// not see it.
	scan := c.scan
	scan.Reset()
	// The call is rebuilt from its zero value: a field survives only where
	// its stage's recycle (or reset) names it, and those name buffers and
	// scratch space, never a result. A field added to any state is cleared
	// here without anyone remembering to.
	*c = call{scan: scan, plan: c.plan.Recycle(), fb: c.fb.Recycle(), att: c.att.Recycle(),
		stream: c.stream.Recycle()}
	callPool.Put(c)
}

func (c *call) fail(e *apierror.Error) {
	e = c.chargeRefusal(e) // a limited key pays for its refusals (tenants.go)
	c.noteError(e)
	edge.WriteError(c.ctx, c.format, string(c.rid), e)
}

// inference handles the model routes (/v1/chat/completions,
// /v1/messages, /v1/responses, /v1/embeddings): the model walk, then
// settle when the handler ends or, for a committed stream, when its relay
// does.
func (g *Gateway) inference(ctx *fasthttp.RequestCtx, r edge.Route, rid []byte, host context.Context, start time.Time) {
	g.run(g.acquireCall(ctx, r, rid, host, start), (*call).handle)
}

// run takes a pooled call along walk (handle, relayHandle, handleCount),
// which reports whether a relay now owns the call, and settles it unless
// one does. Every model route's handler is this: the in-flight counts,
// the panic guard that gives back what the call holds, and the tenant's
// rate-limit headers on whatever the answer is.
func (g *Gateway) run(c *call, walk func(*call) bool) {
	g.metrics.inflight.Add(1)
	g.active.Add(1)
	defer c.abandonOnPanic()
	streaming := walk(c)
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
	if c.life.settled {
		return
	}
	c.life.settled = true
	g := c.g
	c.settleUsage()
	c.life.took = time.Since(c.start) // one clock read for the log and the metrics
	defer c.traceEnd()                // after the outcome below is recorded
	c.finishTenant()                  // the tenant's limits and the request log (tenants.go)
	c.intake.Release()
	if c.life.token != (edge.Token{}) {
		g.inflight.Unregister(c.life.token)
	}
	if c.life.stopCtx != nil {
		c.life.stopCtx()
	}
	c.releaseStream()
	if !c.life.panicked { // the panic guard counts the request as a 500
		g.metrics.finish(c.route, c.ctx.Response.StatusCode(), c.life.took)
	}
	g.metrics.inflight.Add(-1)
	g.active.Add(-1)
}

// The walk of one request. Each step is one stage's work on the call, a
// method of call in the file of its stage, and reports whether the
// request goes on; a step that reports false has answered the caller
// itself. The order is the policy, and this is the one place it is
// written:
//
//	entry:  screen → identify → readDeadline → ingest → scanBody
//	model:  checkStream → admitStructure → readStrict → resolveModel →
//	        readFallbacks → reserveTenant → track → priority
//	then    dispatch: per candidate, plan (next: rank, claim) → admit
//	        (tryAdmit, admit) → attempt → relay (commitStream, WriteTo)
//	last    settle (finish), once, when the handler or the relay ends
//
// Why this order: no byte of the body is read before the caller is known
// and its deadline read, nor before the ingest budget admitted it; no
// model is resolved before the one scan of the body; no upstream
// capacity is taken (admit) before the tenant's limits reserved what the
// request may cost, so a tenant over its limits never holds a lane
// another tenant could use; the call is tracked just before it may wait
// for or hold that capacity, which a caller who left must give back.
type step func(*call) bool

// entryWalk takes a model call up to a scanned body that names a model.
// Every model route starts with it (the model walk, count_tokens) but
// the relay route, whose entry (relayWalk) is built from its steps around
// the relay's own.
var entryWalk = [...]step{
	(*call).screen,       // the edge's refusals: draining, method, media type
	(*call).identify,     // identify: the caller's key (identity.go)
	(*call).readDeadline, // how long the caller waits (deadline.go)
	(*call).ingest,       // ingest: the byte budget, then the body (transport/intake)
	(*call).scanBody,     // scan: the JSON scan, a model named
}

// relayWalk is the relay route's entry (relay_route.go): the entry walk's
// steps with the relay's own around them: the route refused when no relay
// token is configured, the relay token and its rate limit in place of
// identify, and after the scan the token's model scope. Like every body
// route, no byte of the body is read before the ingest budget admitted
// it. The backend the relay then chooses is Bifrost, or the rest of the
// model walk (relayCall.Native: readDeadline, modelWalk, dispatch).
var relayWalk = [...]step{
	(*call).open,          // the edge's refusals: draining, method
	(*call).relayEnabled,  // the relay route configured (a relay token)
	(*call).jsonBody,      // the media type
	(*call).relayIdentify, // identify: the relay token (relay_route.go)
	(*call).ingest,        // ingest: the byte budget, then the body (transport/intake)
	(*call).scanBody,      // scan: the JSON scan, a model named
	(*call).relayScope,    // the token's model scope
}

// modelWalk takes a scanned model call up to dispatch.
var modelWalk = [...]step{
	(*call).checkStream,    // scan: stream only where the API streams
	(*call).admitStructure, // ingest's structural stage (transport/intake)
	(*call).readStrict,     // X-OmniRoute-Strict (transport/attempt)
	(*call).resolveModel,   // the model and its API; the root span opens (tracing.go)
	(*call).readFallbacks,  // the caller's fallback models (transport/plan)
	(*call).reserveTenant,  // tenant limits, before admission (tenants.go)
	(*call).track,          // hang-up and shutdown can cancel it from here on
	(*call).priority,       // admit: the admission class (transport/admit)
}

// walk runs steps in order until one stops the request.
func (c *call) walk(steps []step) bool {
	for _, s := range steps {
		if !s(c) {
			return false
		}
	}
	return true
}

// handle walks a model call to its answer (or the commit of a stream):
// the entry, the model walk, then dispatch, which runs plan, admit,
// attempt and relay per candidate. It reports whether a relay now owns
// the call.
func (c *call) handle() bool {
	return c.walk(entryWalk[:]) && c.walk(modelWalk[:]) && c.dispatch()
}

// screen refuses what the edge already knows is wrong before any work:
// a draining gateway, a method other than POST, a body that is not JSON.
func (c *call) screen() bool {
	return c.open() && c.jsonBody()
}

// open refuses a request while the gateway drains, and any method but
// POST.
func (c *call) open() bool {
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
	return true
}

// jsonBody refuses a body not declared as JSON (a missing type too: see
// edge/browser.go).
func (c *call) jsonBody() bool {
	if !edge.IsJSONMediaType(c.ctx.Request.Header.ContentType()) {
		c.fail(errMediaType)
		return false
	}
	return true
}

// ingest runs the byte stage of admission and reads the body under the
// hard cap: the body is read only once the ingest budget admitted it.
func (c *call) ingest() bool {
	return c.admitBytes() && c.readBody()
}

// scanBody scans the body once (the one JSON pass every later stage
// reads) and requires a model named by a string.
func (c *call) scanBody() bool {
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

// checkStream refuses "stream" on an API that does not stream
// (embeddings): the first refusal the scan makes possible.
func (c *call) checkStream() bool {
	if c.scan.Stream && !dia.Of(dia.ID(c.surface)).Streams {
		c.fail(apierror.New(apierror.CodeInvalidField, c.surface.Route()+" does not stream; remove \"stream\" from the request"))
		return false
	}
	return true
}

// resolveModel resolves the model the body names and checks it serves
// the route's API. The root span opens here, once the model is known
// (tracing.go), even for a model that is then refused.
func (c *call) resolveModel() bool {
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
	return true
}

// track registers the call so a client hang-up or a forced shutdown can
// cancel its upstream exchange. On fasthttp the client socket is watched
// once the request has waited armDelay; behind net/http, the host's request
// context does the same job. It is the last step before the request holds
// upstream capacity, which a caller who left must give back.
func (c *call) track() bool {
	g := c.g
	var conn net.Conn
	if c.host == nil {
		conn = c.ctx.Conn()
	}
	c.life.token = g.inflight.Register(&c.cancel, uint32(c.ctx.ConnID()), conn, c.start)
	if c.host != nil {
		cancel := &c.cancel
		c.life.stopCtx = context.AfterFunc(c.host, cancel.Cancel)
	}
	return true
}

// untrack undoes track, so that a relay call whose Bifrost attempt failed
// before answering can be tracked again by the native pipeline.
func (c *call) untrack() {
	g := c.g
	if c.life.token != (edge.Token{}) {
		g.inflight.Unregister(c.life.token)
		c.life.token = edge.Token{}
	}
	if c.life.stopCtx != nil {
		c.life.stopCtx()
		c.life.stopCtx = nil
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
	ctx := c.ctx
	limit := int64(c.g.opts.Env.Ingest.HardMaxBodyBytes)
	cl := int64(ctx.Request.Header.ContentLength())
	if cl > limit {
		c.g.intake.CloseUnread(c.ctx)
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
		c.intake.StartReading(c)
		readStart, chunked := time.Now(), cl < 0
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if int64(len(b)) > limit {
				c.body.B = b
				c.g.intake.CloseUnread(c.ctx)
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
		c.intake.DoneReading()
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
		return apierror.InvalidJSON(se.Error())
	case errors.Is(err, jsonscan.ErrNotObject):
		return apierror.InvalidJSON("the top-level value must be an object")
	case errors.As(err, &de):
		return apierror.New(apierror.CodeDuplicateField, de.Error())
	case errors.As(err, &fe):
		return apierror.New(apierror.CodeInvalidField, "request body "+fe.Error()+"; the gateway budgets and prices requests on it")
	}
	return apierror.InvalidJSON(err.Error())
}
