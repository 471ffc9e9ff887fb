package transport

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/upstream"
)

type bifrostOutcome uint8

const (
	bifrostDone bifrostOutcome = iota
	bifrostFailed
	bifrostCanceled
)

// relayBifrost forwards the request to Bifrost at base. It reports
// bifrostFailed, with a sanitised detail, only when nothing was written to
// the caller: a connect error, a timeout, a 5xx without a provider error
// body, or a stream that broke before its first event. A provider error
// the relay passes on (a 429, a 4xx, a 5xx with a provider error body) is
// the answer, and clears the relay's cooldown: the relay is up.
func (c *call) relayBifrost(base string, tok *relay.Token, forced bool) (bifrostOutcome, bool, string) {
	g, ctx := c.g, c.ctx
	r := g.side.relay
	hostport, tls, prefix, err := splitBase(base)
	if err != nil {
		return bifrostFailed, false, "invalid Bifrost base URL"
	}
	client := r.client(hostport, tls, g)
	c.track()
	x := upstream.AcquireExchange()
	c.buildRelayRequest(x, hostport, prefix, tok)
	r.m.bifrost.Inc()
	timeout := r.env.BifrostTimeout.Duration()
	if err := client.Do(x, &c.cancel, c.scan.Stream); err != nil {
		x.Release()
		c.untrack()
		switch {
		case errors.Is(err, upstream.ErrCanceled):
			ctx.SetConnectionClose()
			ctx.SetStatusCode(499)
			return bifrostCanceled, false, ""
		case errors.Is(err, upstream.ErrTimeout):
			return bifrostFailed, false, "Bifrost sidecar timed out after " + strconv.FormatInt(timeout.Milliseconds(), 10) + "ms"
		}
		return bifrostFailed, false, "Bifrost sidecar unreachable: " + sanitizeDetail(strings.ReplaceAll(err.Error(), "\n", ": "))
	}
	status := x.Resp.StatusCode()
	if status < 200 || status > 299 {
		if !relay.ProviderError(status, x.Resp.Body()) {
			x.Release()
			c.untrack()
			return bifrostFailed, false, "Bifrost answered HTTP " + strconv.Itoa(status) + " without a provider error"
		}
		c.bifrostAnswer(base, x)
		return bifrostDone, false, ""
	}
	if !c.scan.Stream || !isEventStream(x.Resp.Header.ContentType()) {
		if c.scan.Stream {
			if err := x.Buffer(); err != nil {
				x.Release()
				c.untrack()
				return bifrostFailed, false, "Bifrost answer could not be read: " + sanitizeDetail(err.Error())
			}
		}
		c.bifrostAnswer(base, x)
		return bifrostDone, false, ""
	}
	// A stream commits at its first content event, as on the native path:
	// content-free start-up events (a role-only delta) are held back, so a
	// failure right after them still falls back (or is a 502 when forced)
	// without the caller having seen a byte. After the commit it never
	// falls back, so, as on the native path, the body is freed and its
	// bytes go back to the ingest budget (the heavy slot stays until the
	// stream ends). An error event the provider sends is passed on.
	if _, err := c.holdStartup(x, timeout, false); err != nil {
		class := classifyStreamError(x, err)
		x.Release()
		c.untrack()
		if class == messages.Canceled {
			ctx.SetConnectionClose()
			ctx.SetStatusCode(499)
			return bifrostCanceled, false, ""
		}
		return bifrostFailed, false, "Bifrost stream ended before its first content event (" + class.String() + ")"
	}
	r.cool.Clear(base)
	ctx.SetStatusCode(status)
	copyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	c.bifrostHeaders(x)
	c.stream.x = x // released by finish
	c.stream.idle = timeout
	ctx.SetBodyStream(&bifrostStream{c: c, base: base, forced: forced}, -1)
	c.bodyDone()
	return bifrostDone, true, ""
}

func (c *call) bifrostHeaders(x *upstream.Exchange) {
	h := &c.ctx.Response.Header
	h.Set("X-Routed-By", "bifrost")
	h.Set("X-Routing-Backend", "bifrost")
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		h.SetBytesV("X-Upstream-Request-Id", up)
	}
}

// bifrostAnswer passes a complete Bifrost answer through.
func (c *call) bifrostAnswer(base string, x *upstream.Exchange) {
	c.g.side.relay.cool.Clear(base)
	ctx := c.ctx
	ctx.SetStatusCode(x.Resp.StatusCode())
	copyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentTypeBytes(x.Resp.Header.ContentType())
	c.bifrostHeaders(x)
	if x.Resp.StatusCode() >= 400 {
		c.g.redactErrorHeaders(&ctx.Response.Header)
		ctx.Response.SetBody(c.g.redact.Bytes(x.Resp.Body()))
	} else {
		ctx.Response.SetBody(x.Resp.Body())
	}
	x.Release()
}

// buildRelayRequest fills x.Req: POST <prefix> + the chat route with
// the caller's body unchanged, the relay's own key, and who asked.
func (c *call) buildRelayRequest(x *upstream.Exchange, hostport, prefix string, tok *relay.Token) {
	r := c.g.side.relay
	req := &x.Req
	h := &req.Header
	c.startRequest(h, prefix, dia.Of(dia.Chat).Route, hostport)
	for _, name := range forwardedRequestHeaders {
		if v := c.ctx.Request.Header.Peek(name); len(v) > 0 {
			h.SetBytesV(name, v)
		}
	}
	if key := r.env.BifrostKey(); key != "" {
		h.Set(fasthttp.HeaderAuthorization, "Bearer "+key)
	}
	h.Set("X-Relay-Token-Id", tok.Name)
	if ip := c.ctx.RemoteIP(); ip != nil {
		h.Set("X-Relay-Client-Ip", ip.String())
	}
	h.SetBytesV("X-Request-Id", c.rid)
	req.SetBodyRaw(c.body.B)
}

// bifrostStream relays a committed Bifrost stream, one write per event.
type bifrostStream struct {
	c       *call
	base    string
	forced  bool
	closing atomic.Bool
}

func (b *bifrostStream) Read([]byte) (int, error) { return 0, io.EOF }

// SupportsBodyWriteTo makes fasthttp call WriteTo with a writer that
// flushes per Write.
func (b *bifrostStream) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the held events, then every later one. The idle deadline
// (BIFROST_TIMEOUT_MS) is re-armed per event. A break after the commit
// ends the stream with an in-band error and, in auto mode, cools the relay
// (the next requests go native until the cooldown ends); it never falls
// back, because the caller already has part of an answer.
func (b *bifrostStream) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = b.c.streamPanic(p)
		}
	}()
	edge.ProbePanic("stream")
	c := b.c
	return b.relay(c.g.edge.StreamWriter(&c.stream.dw, c.ctx, c.host != nil, w, c.stream.x.Deadline()))
}

func (b *bifrostStream) relay(w io.Writer) (int64, error) {
	c := b.c
	x := c.stream.x
	total, err := c.writeHeld(w)
	if err != nil {
		return total, err
	}
	events := len(c.stream.pendOff)
	sawFinish := bytes.Contains(c.stream.pending, finishReasonSet)
	for !c.stream.terminal {
		x.SetReadDeadline(time.Now().Add(c.stream.idle))
		ev, err := c.stream.rd.Next()
		if err != nil {
			if err == io.EOF && sawFinish {
				// Some OpenAI-compatible servers end without [DONE].
				n, werr := w.Write(dia.DoneFrame)
				total += int64(n)
				x.MarkEOF()
				c.g.metrics.routes[c.route].events.Add(events)
				return total, werr
			}
			class := classifyStreamError(x, err)
			if class == messages.Canceled {
				break
			}
			g := c.g
			g.metrics.routes[c.route].cut.Inc()
			if !b.forced {
				r := g.side.relay
				r.cool.Record(b.base, g.clk.Now(), r.env.BifrostCooldown.Duration())
			}
			what := class.String()
			if err == io.EOF {
				what = "no final event"
			}
			msg := "the Bifrost relay ended the stream before completing it (" + what + "); the answer is incomplete, retry the request"
			buf := dia.Of(dia.Chat).AppendInterrupt(make([]byte, 0, 256), apierror.New(apierror.CodeStreamInterrupted, msg), string(c.rid), dia.StreamPosition{})
			n, werr := w.Write(buf)
			total += int64(n)
			c.g.metrics.routes[c.route].events.Add(events)
			return total, werr
		}
		raw, isErr := ev.Raw, c.isErrorEvent(ev)
		if isErr { // the provider's own error event, passed on: redacted
			raw = c.g.redact.Bytes(raw)
		}
		n, err := w.Write(raw)
		total += int64(n)
		if err != nil {
			c.cancel.Cancel()
			c.g.metrics.routes[c.route].events.Add(events)
			return total, err
		}
		events++
		if !sawFinish && bytes.Contains(ev.Data, finishReasonSet) {
			sawFinish = true
		}
		if isErr || c.isTerminal(ev) {
			c.stream.terminal = true
		}
	}
	c.g.metrics.routes[c.route].events.Add(events)
	if c.stream.terminal {
		c.drain(x)
	}
	return total, nil
}

// Close ends the call once.
func (b *bifrostStream) Close() error {
	if b.closing.CompareAndSwap(false, true) {
		defer func() {
			if p := recover(); p != nil {
				b.c.closePanic(p)
			}
		}()
		b.c.finish()
	}
	return nil
}
