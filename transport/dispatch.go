package transport

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/upstream"
)

// upstreamError is the last provider answer kept for pass-through when
// failover runs out of targets.
type upstreamError struct {
	status      int
	contentType []byte
	retryAfter  []byte
	body        []byte
	up          catalog.Surface // the dialect of the attempt that answered it
}

// dispatch tries the model's targets in routing order until one answers,
// failing over only on provider-side failures and only before anything was
// written to the caller. Targets that are cooling down, have an open
// circuit, are out of quota or over their token budget are skipped (those
// approaching a limit go last); when none is usable the request waits for
// the earliest recovery if it fits its wait budget. It reports whether a
// relay owns the call.
func (c *call) dispatch() bool {
	if c.model.Strategy == config.StrategyFusion {
		return c.fusion()
	}
	list := c.model.TargetsFor(c.surface)
	if len(c.fb.Models) > 0 {
		return c.runFallbacks(list)
	}
	return c.runTargets(list, c.model.WeightsFor(c.surface), len(list) > 1)
}

// exhaust is what trying candidates left for the answer when none
// served: the last provider error kept, the last failure's class, and
// how many candidates were passed over for want of a free connection.
type exhaust struct {
	last      upstreamError
	lastClass messages.FailureClass
	busy      int
}

// runTargets tries list in routing order (see next). With fanout (a combo)
// each candidate is also probed against the admission lanes and its
// concurrency cap before its attempt (takeTarget): a skipped target costs
// no attempt, and a skip after the first candidate counts as a fallback.
// weights are the round-robin weights of list, by position.
func (c *call) runTargets(list []*catalog.Target, weights []int, fanout bool) bool {
	var x exhaust
	c.beginPlan(list, weights)
	if relay, done := c.runList(list, fanout, &x); done {
		return relay
	}
	c.answerExhausted(list, &x)
	return false
}

// runList tries list (beginPlan planned it) until an attempt answers
// (done, and whether a relay owns the call) or no candidate is left to
// try (not done: x says what failed).
func (c *call) runList(list []*catalog.Target, fanout bool, x *exhaust) (relay, done bool) {
	g := c.g
	// The planner gives up at the attempt cap or the caller's deadline
	// (never sent upstream after it).
	for c.plan.More(g.clk.Now()) {
		t := c.next(list)
		if t == nil && c.plan.Attempts() > 0 && c.lane.Refusal == lanes.None {
			t = c.retry(list, x.lastClass)
		}
		if t == nil {
			if c.lane.Refusal != lanes.None {
				break
			}
			if c.waitForRecovery() {
				continue
			}
			if c.cancel.Cancelled() {
				c.ctx.SetConnectionClose()
				c.ctx.SetStatusCode(499)
				return false, true
			}
			if g.edge.Draining() && c.plan.Attempts() == 0 {
				c.ctx.SetConnectionClose()
				c.fail(errDraining)
				return false, true
			}
			break
		}
		outcome, streaming := c.attempt(t, &x.last, &x.lastClass)
		switch outcome {
		case attemptDone:
			if streaming {
				return true, true // the relay ends the lease
			}
			if c.ctx.Response.StatusCode() >= 300 {
				c.releaseLease(lanes.LocalReject, false)
				c.releaseAttempt(messages.Request) // passed through: not served
			} else if c.counting {
				// A count's quick answer says nothing of how long the
				// upstream takes to answer a prompt: no latency sample
				// for its controller.
				c.releaseLease(lanes.LocalReject, false)
			} else {
				c.releaseLease(lanes.Success, false)
			}
			c.logCombo(fanout, "served")
			return false, true
		case attemptCanceled:
			c.releaseLease(lanes.Cancelled, false)
			c.releaseAttempt(messages.Canceled)
			c.ctx.SetConnectionClose()
			c.ctx.SetStatusCode(499) // nobody reads it; recorded in metrics
			return false, true
		case attemptBusy:
			x.busy++
			c.abandonAttempt()
			c.att.fallbacks++
			continue
		case attemptExpired:
			c.abandonAttempt()
			c.fail(errDeadline("its deadline passed while it waited for its turn"))
			return false, true
		}
		o, drop := admit.OutcomeOf(x.lastClass, c.att.reason)
		c.releaseLease(o, drop)
		c.releaseAttempt(x.lastClass)
		c.att.fallbacks++
	}
	c.logCombo(fanout, "exhausted")
	return false, false
}

// answerExhausted answers a request no candidate served: an admission
// refusal, a prompt no target can take, the caller's deadline, every
// target out (refuse), or the last provider error kept, else what the
// failures were.
func (c *call) answerExhausted(list []*catalog.Target, x *exhaust) {
	g := c.g
	if c.counting && c.lane.Refusal == lanes.None && !c.expired() {
		c.att.fallbacks = max(c.att.fallbacks-1, 0)
		c.estimateCount() // no Anthropic-dialect target could count
		return
	}
	if c.plan.Attempts() == 0 {
		switch {
		case c.lane.Refusal != lanes.None:
			c.failAdmission(c.lane.Refusal, c.lane.RefusalRetry)
		case c.unfit(list):
			c.fail(c.errTooLarge(list))
		case c.expired():
			c.fail(errDeadline("no target could be tried in time"))
		default:
			c.refuse()
		}
		return
	}
	c.att.fallbacks--
	if x.last.status != 0 {
		c.passThroughError(&x.last)
		c.finalError(x.last.status, x.lastClass)
		return
	}
	if x.busy == c.plan.Attempts() {
		c.fail(apierror.New(apierror.CodeUpstreamBusy, c.model.Name).Retry(1))
		return
	}
	e := apierror.New(apierror.CodeUpstreamUnavailable, c.model.Name, x.lastClass.String())
	if x.lastClass == messages.Timeout {
		e = apierror.New(apierror.CodeUpstreamTimeout, c.model.Name)
	}
	c.fail(e.Retry(c.plan.Final(0, x.lastClass, g.clk.Now()).RetryAfter))
}

type attemptOutcome uint8

const (
	attemptDone attemptOutcome = iota
	attemptFailover
	attemptCanceled
	// attemptExpired: the caller's deadline passed before the request
	// could be sent; the provider was not asked.
	attemptExpired
	// attemptBusy: the local pool had no free connection; the provider
	// was not asked, so nothing is reported against the target.
	attemptBusy
)

// attempt sends the request to t. On a provider-side failure it records
// the answer in last and asks for failover.
func (c *call) attempt(t *catalog.Target, last *upstreamError, lastClass *messages.FailureClass) (attemptOutcome, bool) {
	g := c.g
	if !c.prepareAttempt(t) {
		c.att.target = t
		return attemptDone, false // refused in the caller's dialect: nothing was sent
	}
	client := g.client(t.Conn.ID)
	x := upstream.AcquireExchange()
	c.buildRequest(x, t)
	c.att.start = g.clk.Now()
	c.traceAttemptStart(t)
	defer c.traceAttemptEnd()
	if left, ok := c.remaining(c.att.start); ok {
		if left <= 0 {
			// Its turn came (admission, a pooled connection) after the
			// caller's deadline: the caller is gone, never send it.
			x.Release()
			return attemptExpired, false
		}
		x.Limit = time.Now().Add(left) // the caller is gone by then
	}
	err := client.Do(x, &c.cancel, c.scan.Stream)
	if errors.Is(err, upstream.ErrBusy) {
		x.Release()
		return attemptBusy, false
	}
	c.att.reason = ""
	if err != nil {
		class := classifyTransportError(err)
		c.report(t, class, 0, 0)
		x.Release()
		*lastClass = class
		if class == messages.Canceled {
			return attemptCanceled, false
		}
		return attemptFailover, false
	}
	provider, local := x.Arrival()
	c.lane.Answered(&c.g.adm, provider, local)
	status := x.Resp.StatusCode()
	c.observe(t, x, status)
	if status < 200 || status >= 300 {
		c.plan.Verdict = failure.Analyze(status, x.Resp.Body())
		class := c.plan.Verdict.Class
		c.att.reason = c.plan.Verdict.Reason
		c.report(t, class, status, x.TTFB)
		*lastClass = class
		if class.ProviderSide() {
			last.status = status
			last.contentType = append(last.contentType[:0], x.Resp.Header.ContentType()...)
			last.retryAfter = append(last.retryAfter[:0], x.Resp.Header.Peek(fasthttp.HeaderRetryAfter)...)
			last.body = append(last.body[:0], x.Resp.Body()...)
			last.up = c.trans.up
			x.Release()
			return attemptFailover, false
		}
		c.att.target = t
		c.passThrough(x, nil)
		x.Release()
		if c.translating() {
			c.translateAnswer()
		}
		return attemptDone, false
	}
	if !c.scan.Stream || !x.EventStream() {
		c.report(t, messages.OK, status, x.TTFB)
		c.markFirstToken()
		c.att.target = t
		c.meterBody(x)
		if c.scan.Stream {
			// The provider ignored "stream" and sent a plain body.
			if err := x.Buffer(); err != nil {
				x.Release()
				*lastClass = classifyTransportError(err)
				return attemptFailover, false
			}
		}
		c.passThrough(x, nil)
		x.Release()
		if c.translating() {
			c.translateAnswer()
		}
		return attemptDone, false
	}
	class, ok := c.prime(x)
	if !ok {
		c.report(t, class, status, x.TTFB)
		*lastClass = class
		x.Release()
		if class == messages.Canceled {
			return attemptCanceled, false
		}
		last.status = 0 // a failed stream leaves no answer to pass through
		return attemptFailover, false
	}
	c.report(t, messages.OK, status, x.TTFB)
	provider, local = x.Arrival()
	x.Disarm()
	c.lane.FirstByte(&c.g.adm, provider, local) // first token read: the stream's latency sample
	c.markFirstToken()
	c.att.target = t
	c.commitStream(x, c.g.opts.Env.Upstream.IdleTimeout.Duration(), nil)
	return attemptDone, true
}

func (c *call) report(t *catalog.Target, class messages.FailureClass, status int, ttfb time.Duration) {
	g := c.g
	g.metrics.target(t.ID).attempts[class].Inc()
	if status != 0 {
		g.metrics.upstreamStatus(t.ID, status)
	}
	// A count's quick answer is no sample of the target's latency (as for
	// its lanes, see runTargets): it still closes circuits and clears
	// streaks, but leaves the TTFB histogram and the average routing
	// reads alone.
	if class == messages.OK && !c.counting {
		g.metrics.target(t.ID).ttfb.Update(ttfb.Seconds())
	}
	c.traceAttemptOutcome(class, status, ttfb)
	m := &messages.AttemptFinished{Target: t.ID, Class: class, Status: status, TTFB: ttfb, Started: c.att.start, At: g.clk.Now(), NoLatency: c.counting}
	c.plan.Annotate(m, m.At)
	g.targets.Report(m)
}

// reportMidStream records a failure after the stream was committed: the
// attempt was already counted as a success, so only the failure is added.
func (c *call) reportMidStream(class messages.FailureClass) {
	g := c.g
	g.targets.Report(&messages.AttemptFinished{Target: c.att.target.ID, Class: class, MidStream: true, Started: c.att.start, At: g.clk.Now()})
}

// classifyTransportError names the failure class of an exchange's error,
// its exchange or its stream's (classifyStreamError).
func classifyTransportError(err error) messages.FailureClass {
	switch {
	case errors.Is(err, upstream.ErrCanceled):
		return messages.Canceled
	case errors.Is(err, upstream.ErrTimeout):
		return messages.Timeout
	case errors.Is(err, upstream.ErrTooLarge), errors.Is(err, sse.ErrEventTooLarge):
		return messages.Protocol
	}
	return messages.Connect
}

// passThroughHeaders are upstream response headers the caller sees.
func copyResponseHeaders(dst *fasthttp.ResponseHeader, src *fasthttp.ResponseHeader) {
	for k, v := range src.All() {
		if skipResponseHeader(k) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
}

func skipResponseHeader(k []byte) bool {
	switch len(k) {
	case 4:
		return equalFoldASCII(k, "date")
	case 6:
		return equalFoldASCII(k, "server")
	case 7:
		return equalFoldASCII(k, "trailer")
	case 10:
		return equalFoldASCII(k, "connection") || equalFoldASCII(k, "keep-alive") || equalFoldASCII(k, "set-cookie")
	case 12:
		return equalFoldASCII(k, "x-request-id") || equalFoldASCII(k, "content-type")
	case 14:
		return equalFoldASCII(k, "content-length")
	case 17:
		return equalFoldASCII(k, "transfer-encoding")
	}
	return len(k) > 6 && equalFoldASCII(k[:6], "proxy-")
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// passThrough writes the upstream answer as the response. A success is
// passed through byte for byte; an error answer's headers and body are
// redacted first (a provider may echo the key it was sent). by names the
// answer's source when it is not a target (the Bifrost relay), else nil.
func (c *call) passThrough(x *upstream.Exchange, by relayroute.Routed) {
	ctx := c.ctx
	status := x.Resp.StatusCode()
	ctx.SetStatusCode(status)
	copyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentTypeBytes(x.Resp.Header.ContentType())
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		ctx.Response.Header.SetBytesV("X-Upstream-Request-Id", up)
	}
	c.routed(x, by)
	if status >= 400 {
		c.g.redactErrorHeaders(&ctx.Response.Header)
		ctx.Response.SetBody(c.g.redact.Bytes(x.Resp.Body()))
		return
	}
	if c.translating() {
		ctx.Response.SetBody(x.Resp.Body()) // translateAnswer renders it
		return
	}
	ctx.Response.SetBody(c.renamed(x.Resp.Body()))
}

// passThroughError replays the last provider error after failover ran out.
func (c *call) passThroughError(e *upstreamError) {
	ctx := c.ctx
	ctx.SetStatusCode(e.status)
	if len(e.contentType) > 0 {
		ctx.Response.Header.SetContentTypeBytes(e.contentType)
	}
	if len(e.retryAfter) > 0 {
		ctx.Response.Header.SetBytesV(fasthttp.HeaderRetryAfter, e.retryAfter)
	}
	c.routingHeaders()
	ctx.Response.SetBody(c.g.redact.Bytes(e.body))
	if e.up != c.surface { // in the caller's dialect, whatever the current attempt's
		c.translateKeptError(e.up)
	}
}

// routingHeaders tell the caller which target served it and how many
// fallbacks happened.
func (c *call) routingHeaders() {
	h := &c.ctx.Response.Header
	if c.att.target != nil {
		h.Set("X-OmniRoute-Target", c.att.target.Name)
	}
	var b [20]byte
	h.SetBytesV("X-OmniRoute-Fallbacks", strconv.AppendInt(b[:0], int64(c.att.fallbacks), 10))
	if c.att.fallbacks > 0 {
		c.g.metrics.routes[c.route].fallback.Add(c.att.fallbacks)
	}
	if c.lane.Skips > 0 {
		c.lane.SkippedHeader(h, c.g.targetName)
	}
}

// forwardedRequestHeaders are caller headers passed to the provider: the
// dialects' version and beta headers (the table's CallerHeaders) and the
// ones every API reads.
var forwardedRequestHeaders = append(slices.Clone(dia.CallerHeaders), "User-Agent", "Idempotency-Key")

// betaHeader is the Anthropic beta header, the one a provider's beta
// policy (providers.*.anthropic_beta) filters.
var betaHeader = dia.Of(dia.Messages).BetaHeader

// buildRequest fills x.Req for target t: path, auth, selected caller
// headers, and the body with only "model" rewritten.
func (c *call) buildRequest(x *upstream.Exchange, t *catalog.Target) {
	req := &x.Req
	p := t.Conn.Provider
	h := &req.Header
	path := c.upDialect().Path
	if c.counting {
		path = c.upDialect().CountTokensPath
	}
	c.startRequest(h, p.BasePath, path, c.g.client(t.Conn.ID).Addr())
	for _, name := range forwardedRequestHeaders {
		if c.trans.up != c.surface && !dia.ForwardsTranslated(name, dia.ID(c.trans.up)) {
			continue // another dialect's headers mean nothing to this provider
		}
		v := c.ctx.Request.Header.Peek(name)
		if len(v) > 0 && name == betaHeader && p.Beta != nil {
			buf := bytebufferpool.Get()
			if v = p.FilterBeta(buf.B[:0], v); len(v) > 0 {
				h.SetBytesV(name, v)
			}
			bytebufferpool.Put(buf)
			continue
		}
		if len(v) > 0 {
			h.SetBytesV(name, v)
		}
	}
	if d := c.upDialect(); d.VersionHeader != "" && len(h.Peek(d.VersionHeader)) == 0 {
		h.Set(d.VersionHeader, d.Version)
	}
	for _, kv := range p.Headers {
		h.Set(kv[0], kv[1])
	}
	setUpstreamAuth(h, p.Auth, t.Conn.APIKey())
	h.SetBytesV("X-Request-Id", c.rid)
	if c.translating() {
		req.SetBodyRaw(c.trans.tbody.B) // the translator wrote the upstream model
		return
	}
	if c.fitting.fitted {
		req.SetBodyRaw(c.fitting.fbody.B) // the fitter wrote the model and the usage request
		return
	}
	if c.att.alt == nil && c.injectUsage(req, t) {
		return
	}
	body, scan := c.body.B, &c.scan
	if c.att.alt != nil { // a fusion judge: the caller's request plus the panel's answers
		body, scan = c.att.alt.B, &c.att.altScan
	}
	up := c.upstreamModel(t)
	if up == "" {
		req.SetBodyRaw(body)
		return
	}
	if c.att.out == nil {
		c.att.out = bytebufferpool.Get()
	}
	c.att.out.B = jsonscan.AppendWithModel(c.att.out.B[:0], body, scan, up)
	req.SetBodyRaw(c.att.out.B)
}

// startRequest writes what every upstream request (a target's, the
// Bifrost relay's) starts with: POST base+path to host, a JSON body, the
// answer wanted as events for a stream, and no compression (a stream is
// relayed as its bytes arrive).
func (c *call) startRequest(h *fasthttp.RequestHeader, base, path, host string) {
	h.SetMethod(fasthttp.MethodPost)
	uri := bytebufferpool.Get()
	uri.B = append(append(uri.B[:0], base...), path...)
	h.SetRequestURIBytes(uri.B)
	bytebufferpool.Put(uri)
	h.SetHost(host)
	h.SetContentType("application/json")
	if c.scan.Stream {
		h.Set(fasthttp.HeaderAccept, "text/event-stream")
	} else {
		h.Set(fasthttp.HeaderAccept, "application/json")
	}
	h.Set(fasthttp.HeaderAcceptEncoding, "identity")
}

// upstreamModel is the model name to write into the body sent to t, or ""
// when the caller's body already names it. A name resolved through an
// alias, pattern or the default model is replaced by the configured
// model's (or the target's upstream) name, so the provider never sees the
// alias.
func (c *call) upstreamModel(t *catalog.Target) string {
	scan := &c.scan
	if c.att.alt != nil {
		scan = &c.att.altScan
		if t.UpstreamModel == "" || t.UpstreamModel == string(scan.Model) {
			return ""
		}
		return t.UpstreamModel
	}
	if up := upstreamName(t); up != string(scan.Model) {
		return up
	}
	return ""
}

// attemptState is the attempt stage's state: the target of the current
// (at the end, the serving) attempt and when it was sent, how many
// fallbacks the request took, the last failure's reason, the body
// rewritten for the target, and for a fusion judge the body it is sent
// instead of the caller's (alt, scanned in altScan).
type attemptState struct {
	target    *catalog.Target
	start     time.Time
	fallbacks int
	reason    string // the last failed attempt's reason (failure.Verdict)
	out       *bytebufferpool.ByteBuffer
	alt       *bytebufferpool.ByteBuffer
	altScan   jsonscan.Request
}

// recycle gives the attempt's bodies back and returns the state for the
// next call, keeping only the judge scan's scratch space.
func (a *attemptState) recycle() attemptState {
	if a.out != nil {
		bytebufferpool.Put(a.out)
	}
	if a.alt != nil {
		bytebufferpool.Put(a.alt)
	}
	scan := a.altScan
	scan.Reset() // its results alias the judge body, gone now
	return attemptState{altScan: scan}
}
