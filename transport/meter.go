package transport

import (
	"bytes"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
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
		c.plan.obs = p
	}
}

// meterBody reads the usage report of a buffered answer.
func (c *call) meterBody(x *upstream.Exchange) {
	if c.plan.metering {
		ledger.ParseUsage(x.Resp.Body(), &c.plan.usage)
	}
}

var (
	usageKey     = []byte(`"usage"`)
	emptyChoices = []byte(`"choices":[]`)
)

// meterEvent reads usage from a stream event: the chat usage chunk,
// Anthropic's message_start and cumulative message_delta, the Responses
// API's terminal response. It reports whether the event must be dropped:
// the usage-only chat chunk the gateway asked for on a caller's behalf.
func (c *call) meterEvent(ev *sse.Event) bool {
	p := &c.plan
	if !p.metering {
		return false
	}
	switch c.trans.up {
	case catalog.Chat:
		if !bytes.Contains(ev.Data, usageKey) {
			return false
		}
		ledger.ParseUsage(ev.Data, &p.usage)
		return p.injected && bytes.Contains(ev.Data, emptyChoices)
	case catalog.Messages:
		switch string(ev.Name) {
		case "message_start", "message_delta":
			ledger.ParseUsage(ev.Data, &p.usage)
		}
	case catalog.Responses:
		switch string(ev.Name) {
		case "response.completed", "response.incomplete", "response.failed":
			ledger.ParseUsage(ev.Data, &p.usage)
		}
	}
	return false
}

// injectUsage builds a streaming chat body that asks for the usage chunk
// when a token budget needs the real usage and the caller did not ask for
// it; the chunk is stripped again before it reaches the caller.
func (c *call) injectUsage(req *fasthttp.Request, t *catalog.Target) bool {
	if c.trans.up != catalog.Chat || !c.scan.Stream || c.scan.IncludeUsage || !c.plan.metering {
		return false
	}
	model := c.upstreamModel(t)
	if c.att.out == nil {
		c.att.out = bytebufferpool.Get()
	}
	c.att.out.B = jsonscan.AppendIncludeUsage(c.att.out.B[:0], c.body.B, &c.scan, model)
	req.SetBodyRaw(c.att.out.B)
	c.plan.injected = true
	return true
}
