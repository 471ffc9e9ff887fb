package transport

import (
	"bytes"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

// observe parses the response's rate-limit headers through the target's
// explicit mapping (and the retry hint of any error) into the attempt's
// observation. Nothing is allocated unless there is something to report.
func (c *call) observe(t *catalog.Target, x *upstream.Exchange, status int) {
	in := c.g.qs.info.At(t.ID)
	if in.mapping == nil && status < 300 {
		return
	}
	var b quota.Builder
	b.Reset(in.mapping, c.g.clk.Now())
	for k, v := range x.Resp.Header.All() {
		b.Header(k, v)
	}
	var o messages.QuotaObservation
	if b.Finish(&o) {
		p := new(messages.QuotaObservation)
		*p = o
		c.plan.Obs = p
	}
}

// meterBody reads the usage report of a buffered answer, in the
// upstream's dialect (the table's parser).
func (c *call) meterBody(x *upstream.Exchange) {
	if c.plan.Metering {
		c.upDialect().BodyUsage(x.Resp.Body(), &c.plan.Usage)
	}
}

var emptyChoices = []byte(`"choices":[]`)

// meterEvent reads usage from a stream event the upstream's dialect says
// carries it (the table's UsageEvents: the chat usage chunk, Anthropic's
// message_start and cumulative message_delta, the Responses API's
// terminal response). It reports whether the event must be dropped: the
// usage-only chat chunk the gateway asked for on a caller's behalf
// (injectUsage).
func (c *call) meterEvent(ev *sse.Event) bool {
	p := &c.plan
	if !p.Metering {
		return false
	}
	d := c.upDialect()
	if !d.IsUsage(ev) {
		return false
	}
	d.EventUsage(ev, &p.Usage)
	return p.Injected && bytes.Contains(ev.Data, emptyChoices)
}

// upDialect is the table's row of the attempt's upstream dialect.
func (c *call) upDialect() *dia.Dialect { return dia.Of(dia.ID(c.trans.up)) }

// injectUsage builds a streaming chat body that asks for the usage chunk
// when a token budget needs the real usage and the caller did not ask for
// it; the chunk is stripped again before it reaches the caller.
func (c *call) injectUsage(req *fasthttp.Request, t *catalog.Target) bool {
	if c.trans.up != catalog.Chat || !c.scan.Stream || c.scan.IncludeUsage || !c.plan.Metering {
		return false
	}
	model := c.upstreamModel(t)
	if c.att.out == nil {
		c.att.out = bytebufferpool.Get()
	}
	c.att.out.B = jsonscan.AppendIncludeUsage(c.att.out.B[:0], c.body.B, &c.scan, model)
	req.SetBodyRaw(c.att.out.B)
	c.plan.Injected = true
	return true
}
