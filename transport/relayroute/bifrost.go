package relayroute

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

type bifrostOutcome uint8

const (
	bifrostDone bifrostOutcome = iota
	bifrostFailed
	bifrostCanceled
)

// bifrost forwards the request to Bifrost at base. It reports
// bifrostFailed, with a sanitised detail, only when nothing was written to
// the caller: a connect error, a timeout, a 5xx without a provider error
// body, or a stream that broke before its first event. A provider error
// the relay passes on (a 429, a 4xx, a 5xx with a provider error body) is
// the answer, and clears the relay's cooldown: the relay is up.
func (r *Route) bifrost(c Call, base string, tok *relay.Token, forced bool) (bifrostOutcome, bool, string) {
	ctx := c.Ctx()
	hostport, tls, prefix, err := splitBase(base)
	if err != nil {
		return bifrostFailed, false, "invalid Bifrost base URL"
	}
	client := r.client(hostport, tls)
	x := upstream.AcquireExchange()
	// The relay's own headers: its key, and who asked; the pipeline's
	// Send adds what every upstream request carries.
	h := &x.Req.Header
	if key := r.env.BifrostKey(); key != "" {
		h.Set(fasthttp.HeaderAuthorization, "Bearer "+key)
	}
	h.Set("X-Relay-Token-Id", tok.Name)
	if ip := ctx.RemoteIP(); ip != nil {
		h.Set("X-Relay-Client-Ip", ip.String())
	}
	r.m.Bifrost.Inc()
	timeout := r.env.BifrostTimeout.Duration()
	if err := c.Send(client, x, hostport, prefix); err != nil {
		c.Drop(x)
		switch {
		case errors.Is(err, upstream.ErrCanceled):
			gone(ctx)
			return bifrostCanceled, false, ""
		case errors.Is(err, upstream.ErrTimeout):
			return bifrostFailed, false, "Bifrost sidecar timed out after " + strconv.FormatInt(timeout.Milliseconds(), 10) + "ms"
		}
		return bifrostFailed, false, "Bifrost sidecar unreachable: " + sanitizeDetail(strings.ReplaceAll(err.Error(), "\n", ": "))
	}
	status := x.Resp.StatusCode()
	if status < 200 || status > 299 {
		if !relay.ProviderError(status, x.Resp.Body()) {
			c.Drop(x)
			return bifrostFailed, false, "Bifrost answered HTTP " + strconv.Itoa(status) + " without a provider error"
		}
		r.cool.Clear(base)
		c.Answer(x, r)
		return bifrostDone, false, ""
	}
	stream := c.Stream()
	if !stream || !x.EventStream() {
		if stream {
			if err := x.Buffer(); err != nil {
				c.Drop(x)
				return bifrostFailed, false, "Bifrost answer could not be read: " + sanitizeDetail(err.Error())
			}
		}
		r.cool.Clear(base)
		c.Answer(x, r)
		return bifrostDone, false, ""
	}
	// A stream commits at its first content event, as on the native path:
	// content-free start-up events (a role-only delta) are held back, so a
	// failure right after them still falls back (or is a 502 when forced)
	// without the caller having seen a byte. After the commit it never
	// falls back, so, as on the native path, the body is freed and its
	// bytes go back to the ingest budget (the heavy slot stays until the
	// stream ends). An error event the provider sends is passed on.
	if class := c.Hold(x, timeout); class != messages.OK {
		c.Drop(x)
		if class == messages.Canceled {
			gone(ctx)
			return bifrostCanceled, false, ""
		}
		return bifrostFailed, false, "Bifrost stream ended before its first content event (" + class.String() + ")"
	}
	r.cool.Clear(base)
	c.Commit(x, timeout, &bifrostStream{r: r, base: base, forced: forced})
	return bifrostDone, true, ""
}

// gone answers a caller who left: 499, and the connection closed.
func gone(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	ctx.SetStatusCode(499)
}

// RoutedBy names Bifrost as the answer's source.
func (r *Route) RoutedBy(h *fasthttp.ResponseHeader, x *upstream.Exchange) {
	h.Set("X-Routed-By", "bifrost")
	h.Set("X-Routing-Backend", "bifrost")
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		h.SetBytesV("X-Upstream-Request-Id", up)
	}
}

// bifrostStream is a committed Bifrost stream as the pipeline's relay
// loop sees its source (Source).
type bifrostStream struct {
	r      *Route
	base   string
	forced bool
}

func (b *bifrostStream) RoutedBy(h *fasthttp.ResponseHeader, x *upstream.Exchange) {
	b.r.RoutedBy(h, x)
}

// Interrupt words the end of a Bifrost stream that broke after its
// commit and, in auto mode, cools the relay (the next requests go native
// until the cooldown ends); it never falls back, because the caller
// already has part of an answer.
func (b *bifrostStream) Interrupt(buf []byte, class messages.FailureClass, eof bool, rid string) []byte {
	r := b.r
	if !b.forced {
		r.cool.Record(b.base, r.clk.Now(), r.env.BifrostCooldown.Duration())
	}
	what := class.String()
	if eof {
		what = "no final event"
	}
	msg := "the Bifrost relay ended the stream before completing it (" + what + "); the answer is incomplete, retry the request"
	return dia.Of(dia.Chat).AppendInterrupt(buf, apierror.New(apierror.CodeStreamInterrupted, msg), rid, dia.StreamPosition{})
}

// splitBase splits a Bifrost base URL into host:port, TLS and path prefix.
func splitBase(base string) (hostport string, tls bool, prefix string, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", false, "", err
	}
	hostport = u.Host
	tls = u.Scheme == "https"
	if u.Port() == "" {
		if tls {
			hostport += ":443"
		} else {
			hostport += ":80"
		}
	}
	return hostport, tls, strings.TrimSuffix(u.Path, "/"), nil
}

// sanitizeDetail shortens an error for a header or message.
func sanitizeDetail(s string) string { return sanitize.Message(s, "relay failure") }
