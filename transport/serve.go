package transport

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
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

	r := routeOther
	path := ctx.Path()
	switch string(path) {
	case "/v1/chat/completions":
		r = routeChat
		g.inference(ctx, catalog.Chat, rid, host, start)
		return // inference records its own metrics (streams finish later)
	case "/v1/messages":
		r = routeMessages
		g.inference(ctx, catalog.Messages, rid, host, start)
		return
	case "/v1/responses":
		r = routeResponses
		g.inference(ctx, catalog.Responses, rid, host, start)
		return
	case "/v1/models":
		r = routeModels
		g.models(ctx, rid)
	case "/api/monitoring/health":
		r = routeHealth
		g.healthHandler(ctx)
	case "/api/v1/relay/chat/completions":
		g.relayChat(ctx, rid, host, start)
		return // finished like an inference call
	case "/api/omniroute/route/preview":
		r = routeManagement
		g.routePreview(ctx, string(rid))
	case "/api/omniroute/quota":
		r = routeManagement
		g.quotaReport(ctx, string(rid))
	case "/metrics":
		r = routeMetrics
		if !ctx.IsGet() {
			writeError(ctx, apierror.OpenAI, string(rid), errMethod("GET"))
			break
		}
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		g.metrics.write(ctx)
	default:
		if g.managementRoute(ctx, path, rid, host) {
			r = routeManagement
			break
		}
		writeError(ctx, apierror.OpenAI, string(rid), errNotFound(string(path)))
	}
	g.metrics.request(r, ctx.Response.StatusCode())
	g.metrics.duration[r].UpdateDuration(start)
}

// expect decides an Expect: 100-continue upload before its body is sent:
// chat-shaped routes run their admission checks (which include the hard
// cap), other routes only the hard cap, so a rejected body never crosses
// the network.
func (g *Gateway) expect(ctx *fasthttp.RequestCtx) int {
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

// serverError renders fasthttp's own parse errors (malformed requests,
// header timeouts) as JSON instead of plain text.
func (g *Gateway) serverError(ctx *fasthttp.RequestCtx, err error) {
	status := fasthttp.StatusBadRequest
	code := "bad_request"
	msg := "malformed HTTP request"
	if _, ok := err.(*fasthttp.ErrSmallBuffer); ok {
		status, code, msg = fasthttp.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "request headers are too large"
	} else if netErr, ok := err.(interface{ Timeout() bool }); ok && netErr.Timeout() {
		status, code, msg = fasthttp.StatusRequestTimeout, "request_timeout", "request headers or body were not received in time"
	}
	writeError(ctx, apierror.OpenAI, "", &apierror.Error{Status: status, Code: code, Message: msg})
}
