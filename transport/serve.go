package transport

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/ops"
)

// serve routes one request. host is the net/http request context when the
// gateway runs behind HTTPHandler, nil on fasthttp.
func (g *Gateway) serve(ctx *fasthttp.RequestCtx, host context.Context) {
	start := time.Now()
	var ridBuf [160]byte
	rid := ridBuf[:0]
	if id := ctx.Request.Header.Peek("X-Request-Id"); validClientRequestID(id) {
		rid = append(rid, id...)
	} else {
		rid = g.rids.next(rid)
	}
	ctx.Response.Header.SetBytesV("X-Request-Id", rid)

	g.forgetOversize(ctx)
	path := ctx.Path()
	r := routeOf(path)
	if ctx.IsHead() {
		// HEAD is GET without the body: every GET route answers it, and
		// fasthttp (or net/http) drops the body of a HEAD answer. The
		// method is put back for that once the handler is done (this
		// defer runs after the panic guard's).
		ctx.Request.Header.SetMethod(fasthttp.MethodGet)
		defer ctx.Request.Header.SetMethod(fasthttp.MethodHead)
	}
	switch r {
	case routeMessages, routeCountTokens:
		setAnthropicRequestID(&ctx.Response.Header, apierror.Anthropic, rid)
	case routeModels, routeOther:
		setAnthropicRequestID(&ctx.Response.Header, otherFormat(path, &ctx.Request.Header), rid)
	}
	// fasthttp does not recover a handler's panic: the process would die.
	// The guard answers 500 internal_error instead (panic.go).
	defer func() {
		if p := recover(); p != nil {
			g.handlerPanic(ctx, r, rid, start, p)
		}
	}()
	probePanic("handler")
	if !g.guardBrowser(ctx, r, rid) {
		g.metrics.finish(r, ctx.Response.StatusCode(), time.Since(start))
		return
	}
	switch r {
	case routeChat, routeMessages, routeResponses, routeEmbeddings:
		g.inference(ctx, r, rid, host, start)
		return // inference records its own metrics (streams finish later)
	case routeRelay:
		g.relayChat(ctx, rid, host, start)
		return // finished like an inference call
	case routeModels:
		g.models(ctx, rid)
	case routeCountTokens:
		g.countTokens(ctx, r, rid, host, start)
		return // finished like an inference call
	case routeRoot:
		g.root(ctx, rid)
	case routeHealth:
		if p := string(path); p == healthzPath || p == readyzPath {
			g.probe(ctx, rid)
			break
		}
		g.healthHandler(ctx)
	case routeMetrics:
		if !ctx.IsGet() {
			writeError(ctx, apierror.OpenAI, string(rid), errMethod("GET"))
			break
		}
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		g.metrics.write(ctx)
	case routeManagement:
		switch string(path) { // the operator APIs (package ops)
		case ops.PreviewPath:
			g.ops.Preview(ctx, rid)
		case ops.QuotaPath:
			g.ops.Quota(ctx, rid)
		case ops.RequestsPath:
			g.ops.Requests(ctx, rid)
		case ops.UsagePath:
			g.ops.Usage(ctx, rid)
		case ops.ReloadPath:
			g.ops.Reload(ctx, rid)
		default:
			if ops.IsDashboardPath(path) {
				g.ops.Dashboard(ctx, path, rid)
				break
			}
			if ops.IsKeysPath(path) {
				g.ops.Keys(ctx, rid)
				break
			}
			g.ops.Services(ctx, path, rid, host)
		}
	default:
		writeError(ctx, otherFormat(path, &ctx.Request.Header), string(rid), errNotFound(string(path)))
	}
	g.metrics.finish(r, ctx.Response.StatusCode(), time.Since(start))
}

// expect decides an Expect: 100-continue upload before its body is sent:
// chat-shaped routes run their admission checks (which include the hard
// cap), other routes only the hard cap, so a rejected body never crosses
// the network.
func (g *Gateway) expect(ctx *fasthttp.RequestCtx) (status int) {
	defer func() {
		if p := recover(); p != nil {
			g.notePanic(routeOf(ctx.Path()), string(ctx.Request.Header.Peek("X-Request-Id")), "expect", p)
			ctx.SetConnectionClose()
			status = fasthttp.StatusInternalServerError
		}
	}()
	g.forgetOversize(ctx)
	if g.draining.Load() {
		return fasthttp.StatusServiceUnavailable
	}
	if status, ok := g.expectAdmission(ctx); ok {
		return status
	}
	if cl := ctx.Request.Header.ContentLength(); cl > int(g.opts.Env.Ingest.HardMaxBodyBytes) {
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// serverError renders fasthttp's own errors (malformed requests, header
// timeouts, a declared body over the hard cap) as JSON instead of plain
// text.
func (g *Gateway) serverError(ctx *fasthttp.RequestCtx, err error) {
	e := &apierror.Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: "bad_request",
		Message: "malformed HTTP request; check the request line and headers"}
	var small *fasthttp.ErrSmallBuffer
	if _, over := g.oversize.LoadAndDelete(&ctx.Request.Header); over {
		e = errBodyTooLarge(int64(g.opts.Env.Ingest.HardMaxBodyBytes))
	} else if errors.As(err, &small) {
		e = &apierror.Error{Status: fasthttp.StatusRequestHeaderFieldsTooLarge, Type: "invalid_request_error", Code: "headers_too_large",
			Message: "request headers are too large; send fewer or shorter headers"}
	} else if isTimeout(err) {
		e = &apierror.Error{Status: fasthttp.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request headers were not received within OMNIROUTE_HEADER_TIMEOUT_MS; resend the request"}
	}
	ctx.SetConnectionClose()
	writeError(ctx, apierror.OpenAI, "", e)
}

// rootBody names the gateway and where its pages are, for GET /.
const rootBody = `{"name":"omniroute","description":"OmniRoute AI gateway: OpenAI and Anthropic APIs under /v1","dashboard":"` + ops.DashboardPath + `","health":"` + healthzPath + `"}`

// root answers GET / (and HEAD /, which clients such as Claude Code send
// at start to see that the base URL answers) with 200.
func (g *Gateway) root(ctx *fasthttp.RequestCtx, rid []byte) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET, HEAD")
		writeError(ctx, apierror.OpenAI, string(rid), errMethod("GET or HEAD"))
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(rootBody)
}
