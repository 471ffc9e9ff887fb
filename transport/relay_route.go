package transport

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/stream"
	"github.com/omniroute/gateway/transport/upstream"
)

// The relay route (POST /api/v1/relay/chat/completions) is a walk of the
// pipeline's steps (relayWalk, inference.go) around the relay's own
// (transport/relayroute: the token, its rate limit and model scope, the
// backend's choice, the Bifrost exchange), which reaches back into the
// pipeline through relayCall, this file's implementation of its port.

// relayChat handles the relay route. It runs on a pooled call so that the
// native path is exactly the /v1/chat/completions pipeline, in-process.
func (g *Gateway) relayChat(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, start time.Time) {
	g.run(g.acquireCall(ctx, edge.Relay, rid, host, start), (*call).relayHandle)
}

// relayHandle is the relay route's walk: its entry (relayWalk), then the
// backend the relay chooses, which may be the rest of the model walk.
func (c *call) relayHandle() bool {
	return c.walk(relayWalk[:]) && c.g.side.relay.Serve((*relayCall)(c), c.relayTok)
}

// relayEnabled refuses the route when no relay token is configured.
func (c *call) relayEnabled() bool {
	if !c.g.side.relay.Enabled() {
		c.fail(relayroute.ErrNotEnabled)
		return false
	}
	return true
}

// relayIdentify is the relay route's identify: the relay token, checked
// and one request of its rate limit spent, in place of a key. Its tenant
// id is the fairness key in the ingest queue.
func (c *call) relayIdentify() bool {
	raw := edge.Credential(&c.ctx.Request.Header)
	tok, e := c.g.side.relay.Admit(&c.ctx.Response.Header, raw, c.g.clk.Now())
	if e != nil {
		c.fail(e)
		return false
	}
	c.relayTok = tok
	c.tenant = c.rc.tenants.IDForKey(raw)
	return true
}

// relayScope refuses a model the relay token does not allow.
func (c *call) relayScope() bool {
	if e := c.g.side.relay.Scope(c.relayTok, c.scan.Model); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// relayCall is the call as the relay sees it (relayroute.Call).
type relayCall call

func (p *relayCall) Ctx() *fasthttp.RequestCtx { return p.ctx }
func (p *relayCall) Fail(e *apierror.Error)    { (*call)(p).fail(e) }
func (p *relayCall) Model() []byte             { return p.scan.Model }
func (p *relayCall) Stream() bool              { return p.scan.Stream }
func (p *relayCall) Catalog() *catalog.Catalog { return p.rc.cat }

// Native is the rest of the model walk after the relay's entry, which
// took the place of its entry: the caller's deadline (read here, so the
// Bifrost backend keeps ignoring it), the model walk, dispatch.
func (p *relayCall) Native() bool {
	c := (*call)(p)
	return c.readDeadline() && c.walk(modelWalk[:]) && c.dispatch()
}

func (p *relayCall) Send(client *upstream.Client, x *upstream.Exchange, host, prefix string) error {
	c := (*call)(p)
	c.track()
	h := &x.Req.Header
	attempt.StartRequest(h, prefix, dia.Of(dia.Chat).Route, host, c.scan.Stream)
	for _, name := range attempt.ForwardedHeaders {
		if v := c.ctx.Request.Header.Peek(name); len(v) > 0 {
			h.SetBytesV(name, v)
		}
	}
	h.SetBytesV("X-Request-Id", c.rid)
	x.Req.SetBodyRaw(c.body.B)
	return client.Do(x, &c.cancel, c.scan.Stream)
}

func (p *relayCall) Drop(x *upstream.Exchange) {
	x.Release()
	(*call)(p).untrack()
}

func (p *relayCall) Hold(x *upstream.Exchange, idle time.Duration) messages.FailureClass {
	c := (*call)(p)
	if _, err := c.stream.HoldStartup(c, &c.att, x, idle, false); err != nil {
		return stream.Classify(x, err)
	}
	return messages.OK
}

func (p *relayCall) Commit(x *upstream.Exchange, idle time.Duration, s relayroute.Source) {
	(*call)(p).commitStream(x, idle, s)
}

func (p *relayCall) Answer(x *upstream.Exchange, by relayroute.Routed) {
	(*call)(p).passThrough(x, by)
	x.Release()
}
