package transport

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/transport/edge"
)

// edgePorts is the gateway as the HTTP edge (package edge) sees it: the
// handler of every row of the route table, and the Pipeline port (request
// metrics, the panic log, the Expect decision). Like opsReads, it is a
// view of Gateway so that the ports' method names stay out of the
// Gateway's own set.
type edgePorts Gateway

// newEdge builds the HTTP edge on g, with g's handlers for the
// pipeline's rows and the operator layer's for the operator rows (health,
// the probes, the operator APIs).
func (g *Gateway) newEdge() (*edge.Edge, error) {
	p := (*edgePorts)(g)
	h := g.op.Handlers()
	h[edge.HandleInference] = p.serveInference
	h[edge.HandleCountTokens] = p.serveCountTokens
	h[edge.HandleRelay] = p.serveRelay
	h[edge.HandleModels] = answers(g.models)
	h[edge.HandleMetrics] = p.serveMetrics
	return edge.New(edge.Config{Env: &g.opts.Env, Log: g.log, Clock: g.clk, Pipeline: p, Handlers: h})
}

// The Pipeline port.

func (p *edgePorts) Finished(r edge.Route, status int, took time.Duration) {
	p.metrics.finish(r, status, took)
}

func (p *edgePorts) Panicked(r edge.Route, rid, where string, v any) {
	(*Gateway)(p).notePanic(r, rid, where, v)
}

func (p *edgePorts) ExpectBody(ctx *fasthttp.RequestCtx) (int, bool) {
	return (*Gateway)(p).expectAdmission(ctx)
}

// The handlers. Inference, count_tokens and the relay record their own
// end (a stream ends after the handler returns).

func (p *edgePorts) serveInference(ctx *fasthttp.RequestCtx, r edge.Request) bool {
	(*Gateway)(p).inference(ctx, r.Route, r.RID, r.Host, r.Start)
	return true
}

func (p *edgePorts) serveCountTokens(ctx *fasthttp.RequestCtx, r edge.Request) bool {
	(*Gateway)(p).countTokens(ctx, r.Route, r.RID, r.Host, r.Start)
	return true
}

func (p *edgePorts) serveRelay(ctx *fasthttp.RequestCtx, r edge.Request) bool {
	(*Gateway)(p).relayChat(ctx, r.RID, r.Host, r.Start)
	return true
}

func (p *edgePorts) serveMetrics(ctx *fasthttp.RequestCtx, _ edge.Request) bool {
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	p.metrics.write(ctx)
	return false
}

// answers adapts a handler that answers in full given the request id
// (models).
func answers(f func(ctx *fasthttp.RequestCtx, rid []byte)) edge.HandlerFunc {
	return func(ctx *fasthttp.RequestCtx, r edge.Request) bool {
		f(ctx, r.RID)
		return false
	}
}
