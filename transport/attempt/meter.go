package attempt

import (
	"bytes"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/transport/upstream"
)

// MeterBody reads the usage report of a buffered answer, in the
// upstream's dialect (the table's parser).
func (st *State) MeterBody(r Request, x *upstream.Exchange) {
	if on, usage, _ := r.Metering(); on {
		st.Dialect().BodyUsage(x.Resp.Body(), usage)
	}
}

var emptyChoices = []byte(`"choices":[]`)

// MeterEvent reads usage from a stream event the upstream's dialect says
// carries it (the table's UsageEvents: the chat usage chunk, Anthropic's
// message_start and cumulative message_delta, the Responses API's
// terminal response). It reports whether the event must be dropped: the
// usage-only chat chunk the gateway asked for on a caller's behalf
// (injectUsage).
func (st *State) MeterEvent(r Request, ev *sse.Event) bool {
	on, usage, injected := r.Metering()
	if !on {
		return false
	}
	d := st.Dialect()
	if !d.IsUsage(ev) {
		return false
	}
	d.EventUsage(ev, usage)
	return *injected && bytes.Contains(ev.Data, emptyChoices)
}

// injectUsage builds a streaming chat body that asks for the usage chunk
// when a token budget needs the real usage and the caller did not ask for
// it; the chunk is stripped again before it reaches the caller.
func (st *State) injectUsage(r Request, req *fasthttp.Request, t *catalog.Target) bool {
	on, _, injected := r.Metering()
	body, scan := r.AttemptBody()
	if st.Up != catalog.Chat || !scan.Stream || scan.IncludeUsage || !on {
		return false
	}
	model := st.upstreamModel(r, t)
	if st.out == nil {
		st.out = bytebufferpool.Get()
	}
	st.out.B = jsonscan.AppendIncludeUsage(st.out.B[:0], body, scan, model)
	req.SetBodyRaw(st.out.B)
	*injected = true
	return true
}
