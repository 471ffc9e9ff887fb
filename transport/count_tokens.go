package transport

import (
	"context"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/tokenest"
	"github.com/omniroute/gateway/transport/edge"
)

// countTokens answers POST /v1/messages/count_tokens. It is a model call
// like the others, only cheap: the caller's key, deadline and the byte
// stage of ingest admission as for /v1/messages, then the model's targets
// on an Anthropic-dialect (messages) provider in routing order, each
// admitted on its upstream's lanes at the smallest cost (no prompt is
// run) and failed over to the next on a provider-side failure, with the
// targets' circuits and cooldowns honoured and fed by the outcomes. No
// token budget is reserved and no tenant limit is charged: counting
// generates nothing. When no such target is usable (the model has none,
// every one is cooling down or out of quota, or every attempt failed on
// the provider's side) the answer is a local estimate (internal/tokenest:
// a quarter token per ASCII character of the prompt's strings, one per
// other character; at least 1 for a non-empty body), marked
// X-OmniRoute-Token-Count: estimate. A refusal by admission, a missed
// deadline or the caller's own error (a 4xx the provider gave) is answered
// as such, in the Anthropic shape.
func (g *Gateway) countTokens(ctx *fasthttp.RequestCtx, r edge.Route, rid []byte, host context.Context, start time.Time) {
	c := g.acquireCall(ctx, r, rid, start)
	c.surface, c.trans.up, c.counting = catalog.Messages, catalog.Messages, true
	g.metrics.inflight.Add(1)
	g.active.Add(1)
	defer c.abandonOnPanic()
	c.handleCount(host)
	c.applyTenantHeaders()
	c.finish()
}

// handleCount runs a count_tokens call to its answer.
func (c *call) handleCount(host context.Context) {
	if !c.accept(host) {
		return
	}
	c.model = c.rc.cat.Resolve(c.scan.Model)
	if c.model == nil {
		c.fail(errUnknownModel(c.scan.Model))
		return
	}
	// The key's scope: its allowed_models and one request of its rate
	// (tenants.go), whether a provider or the estimate answers.
	if e := c.chargeRequest(c.scan.Model); e != nil {
		c.fail(e)
		return
	}
	list := c.model.TargetsFor(catalog.Messages)
	if !c.model.Surfaces.Has(catalog.Messages) || len(list) == 0 {
		c.estimateCount()
		return
	}
	c.track(host)
	if !c.priority() {
		return
	}
	c.runTargets(list, c.model.WeightsFor(catalog.Messages), len(list) > 1)
}

// estimateCount answers the local estimate.
func (c *call) estimateCount() {
	ctx := c.ctx
	n := tokenest.Estimate(c.body.B, 1<<30).Tokens
	if n == 0 && len(c.body.B) > 2 {
		n = 1 // never 0 for a non-empty request
	}
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	b.B = append(b.B[:0], `{"input_tokens":`...)
	b.B = apierror.AppendInt(b.B, int64(n))
	b.B = append(b.B, '}')
	ctx.ResetBody()
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.Set("X-OmniRoute-Token-Count", "estimate")
	ctx.SetContentType("application/json")
	ctx.SetBody(b.B)
	c.routingHeaders()
}

// countPath is the upstream path of a count, under the provider's base.
const countPath = "/messages/count_tokens"

// setUpstreamAuth writes the provider's credential header.
func setUpstreamAuth(h *fasthttp.RequestHeader, auth, key string) {
	if key == "" {
		return
	}
	switch auth {
	case "bearer":
		v := bytebufferpool.Get()
		v.B = append(append(v.B[:0], "Bearer "...), key...)
		h.SetBytesV(fasthttp.HeaderAuthorization, v.B)
		bytebufferpool.Put(v)
	case "x-api-key":
		h.Set("X-Api-Key", key)
	case "x-goog-api-key":
		h.Set("X-Goog-Api-Key", key)
	}
}
