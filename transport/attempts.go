package transport

import (
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/upstream"
)

// The attempt stage (package transport/attempt): one attempt on one
// target, its upstream dialect and translator, the body fitted to the
// target's model, the upstream request, the answer passed through and
// its usage metered. This file is its glue: the steps of the dispatch
// loop (dispatch.go) that run the stage on the call, and the call's side
// of the stage's port (attempt.Request).

// AttemptBody is the caller's body and its scan (attempt.Request).
func (c *call) AttemptBody() ([]byte, *jsonscan.Request) {
	if c.body == nil {
		return nil, &c.scan
	}
	return c.body.B, &c.scan
}

// AttemptModel is the model serving the request (attempt.Request).
func (c *call) AttemptModel() *catalog.Model { return c.model }

// AttemptFallbacks is the model the caller named when its fallbacks are
// on, and whether the body carries the fallback fields (attempt.Request).
func (c *call) AttemptFallbacks() (*catalog.Model, bool) { return c.fb.Primary, c.fb.Present }

// Counting reports a count_tokens call (attempt.Request).
func (c *call) Counting() bool { return c.counting }

// TargetInfo is what the gateway believes about target t's model: the
// routing config's entry, else nothing known (attempt.Request).
func (c *call) TargetInfo(t *catalog.Target) *modelinfo.Info {
	if t.ID < len(c.rc.info) && c.rc.info[t.ID] != nil {
		return c.rc.info[t.ID]
	}
	return attempt.UnknownInfo()
}

// Metering is the plan's usage metering (transport/plan) (attempt.Request).
func (c *call) Metering() (bool, *ledger.Usage, *bool) {
	return c.plan.Metering, &c.plan.Usage, &c.plan.Injected
}

// RequestID is the request's id (attempt.Request).
func (c *call) RequestID() []byte { return c.rid }

// prepareAttempt prepares the attempt on t (attempt.State.Prepare). A
// refusal is answered 400 in the caller's dialect: it returns false.
func (c *call) prepareAttempt(t *catalog.Target) bool {
	if e := c.att.Prepare(&c.g.att, c, t); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// buildRequest fills x.Req for target t (attempt.State.BuildRequest).
func (c *call) buildRequest(x *upstream.Exchange, t *catalog.Target) {
	c.att.BuildRequest(c, &c.ctx.Request.Header, x, t, c.g.client(t.Conn.ID).Addr())
}

// passThrough writes the upstream answer as the response: its status and
// headers, the headers that name its source (routed: by's when it is not
// a target, the Bifrost relay; else nil), then its body.
func (c *call) passThrough(x *upstream.Exchange, by relayroute.Routed) {
	attempt.PassHeaders(c.ctx, x)
	c.routed(x, by)
	c.att.PassBody(&c.g.att, c.ctx, x)
}

// passThroughError replays the last provider error after failover ran out.
func (c *call) passThroughError(e *attempt.Kept) {
	e.ReplayStatus(c.ctx)
	c.routingHeaders()
	c.att.ReplayBody(&c.g.att, c.ctx, e, c.rid)
}

// translateAnswer rewrites a non-stream answer into the caller's dialect
// (attempt.State.TranslateAnswer); one that cannot be read is answered
// 502.
func (c *call) translateAnswer() {
	if e := c.att.TranslateAnswer(c.ctx, c.rid); e != nil {
		c.fail(e)
	}
}

// readStrict reads X-OmniRoute-Strict; a value other than true or false
// is a 400. A step of the model walk (inference.go): a bad header is
// refused before the tenant's limits reserve anything for the request;
// fitting reads the setting per attempt.
func (c *call) readStrict() bool {
	if e := c.att.ReadStrict(c.ctx.Request.Header.Peek("X-Omniroute-Strict")); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// fits reports whether target t can take the request at all
// (attempt.Fits).
func (c *call) fits(t *catalog.Target) bool {
	return attempt.Fits(c.TargetInfo(t), c.plan.Input, c.scan.Tools)
}
