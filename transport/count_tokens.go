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
	c := g.acquireCall(ctx, r, rid, host, start)
	c.surface, c.counting = catalog.Messages, true
	c.att.Begin(catalog.Messages)
	g.run(c, (*call).handleCount)
}

// countWalk takes a count after the entry up to its targets: no
// structural stage, strict mode, fallbacks or reservation (a count runs
// no prompt), the key's scope charged instead.
var countWalk = [...]step{
	(*call).wholeCount,   // a count is answered whole: no "stream"
	(*call).resolveCount, // the model, whatever its APIs
	(*call).chargeCount,  // the key's allowed_models and one request of its rate (tenants.go)
	(*call).countable,    // no Anthropic-dialect target: the estimate answers
	(*call).track,
	(*call).priority,
}

// handleCount walks a count_tokens call to its answer: the entry, the
// count walk, then the model's Anthropic-dialect targets (runTargets: plan,
// admit, attempt). It reports false: a count is answered whole.
func (c *call) handleCount() bool {
	if !c.walk(entryWalk[:]) || !c.walk(countWalk[:]) {
		return false
	}
	list := c.model.TargetsFor(catalog.Messages)
	c.runTargets(list, c.model.WeightsFor(catalog.Messages), len(list) > 1)
	return false
}

// wholeCount refuses "stream": true. Anthropic's count_tokens takes no
// stream member, and a count is answered whole (handleCount hands the
// call back when it returns): a provider that streamed its answer would
// leave the stream writing from a call already back in its pool.
func (c *call) wholeCount() bool {
	if c.scan.Stream {
		c.fail(apierror.New(apierror.CodeInvalidField, c.att.Dialect().CountTokensRoute+" does not stream; remove \"stream\" from the request"))
		return false
	}
	return true
}

// resolveCount resolves the model a count names.
func (c *call) resolveCount() bool {
	c.model = c.rc.cat.Resolve(c.scan.Model)
	if c.model == nil {
		c.fail(errUnknownModel(c.scan.Model))
		return false
	}
	return true
}

// chargeCount charges the key's scope: its allowed_models and one
// request of its rate (tenants.go), whether a provider or the estimate
// answers.
func (c *call) chargeCount() bool {
	if e := c.chargeRequest(c.scan.Model); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// countable answers the local estimate when the model has no
// Anthropic-dialect target to count, and stops the walk then.
func (c *call) countable() bool {
	if !c.model.Surfaces.Has(catalog.Messages) || len(c.model.TargetsFor(catalog.Messages)) == 0 {
		c.estimateCount()
		return false
	}
	return true
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
