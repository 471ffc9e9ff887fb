package transport

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// Deadlines on a slow client, in both directions.
//
// Reading: the headers have OMNIROUTE_HEADER_TIMEOUT_MS (fasthttp's
// ReadTimeout). A body then gets its own deadline from its size: the
// header timeout plus the declared length at OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC
// (headerReceived), or, for a chunked body, plus what was read so far and
// the next chunkWindow bytes at that rate, re-armed as it arrives
// (extendChunkedDeadline). A body that misses it gets 408 request_timeout;
// one that breaks off gets 400 incomplete_body. A declared length over the
// hard cap is answered 413 at once, before fasthttp waits for any of it.
//
// Writing: fasthttp's WriteTimeout bounds a whole non-streaming response;
// a stream re-arms the deadline before every event (deadlineWriter), capped
// by the upstream exchange's total deadline, so a caller that stops reading
// has its stream ended (and its upstream request cancelled) instead of
// holding an upstream connection indefinitely.

// chunkWindow is how far ahead of what arrived a chunked body's deadline
// reaches.
const chunkWindow = 64 << 10

// bodyDeadline is how long a body of n bytes may take to arrive.
func (g *Gateway) bodyDeadline(n int64) time.Duration {
	rate := int64(g.opts.Env.HTTP.UploadMinRate)
	return g.opts.Env.Server.HeaderTimeout.Duration() + time.Duration(n*int64(time.Second)/rate)
}

// headerReceived runs once a request's headers are read, before fasthttp
// reads any of its body: it sets the body's read deadline, and makes a
// declared length over the hard cap fail at once (fasthttp would first
// wait for up to 8 KiB of it): a one-byte read limit with a deadline
// already past, so that either the handler or serverError answers 413
// without waiting.
func (g *Gateway) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	cl := int64(h.ContentLength())
	switch {
	case cl > int64(g.opts.Env.Ingest.HardMaxBodyBytes):
		g.oversize.Store(h, cl)
		return fasthttp.RequestConfig{MaxRequestBodySize: 1, ReadTimeout: time.Nanosecond}
	case cl > 0:
		return fasthttp.RequestConfig{ReadTimeout: g.bodyDeadline(cl)}
	case cl == -1: // chunked: re-armed as it arrives
		return fasthttp.RequestConfig{ReadTimeout: g.bodyDeadline(chunkWindow)}
	}
	return fasthttp.RequestConfig{}
}

// forgetOversize drops the mark headerReceived left for an oversized
// request that reached a handler.
func (g *Gateway) forgetOversize(ctx *fasthttp.RequestCtx) {
	if int64(ctx.Request.Header.ContentLength()) > int64(g.opts.Env.Ingest.HardMaxBodyBytes) {
		g.oversize.Delete(&ctx.Request.Header)
	}
}

// extendChunkedDeadline re-arms a chunked body's read deadline after
// total bytes arrived since readStart.
func (c *call) extendChunkedDeadline(readStart time.Time, total int64) {
	if conn := c.ctx.Conn(); conn != nil && c.host == nil {
		_ = conn.SetReadDeadline(readStart.Add(c.g.bodyDeadline(total + chunkWindow)))
	}
}

// isTimeout reports a deadline error, however wrapped (fasthttp wraps the
// header read's timeout in errors that do not say Timeout themselves).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

var errBodyTimeout = &apierror.Error{Status: 408, Type: "invalid_request_error", Code: "request_timeout",
	Message: "the request body did not arrive in time (OMNIROUTE_HEADER_TIMEOUT_MS plus its size at OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC); resend it over a faster link or raise the limit"}

// deadlineWriter re-arms the connection's write deadline before each
// write of a stream (at most every rearmEvery), to now + timeout capped by
// limit (zero: no cap). Behind net/http (no connection) it only writes:
// the host server's timeouts apply.
type deadlineWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
	limit   time.Time
	armed   time.Time
}

const rearmEvery = 100 * time.Millisecond

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if d.conn != nil {
		if now := time.Now(); now.Sub(d.armed) >= rearmEvery {
			t := now.Add(d.timeout)
			if !d.limit.IsZero() && d.limit.Before(t) {
				t = d.limit
			}
			_ = d.conn.SetWriteDeadline(t)
			d.armed = now
		}
	}
	return d.w.Write(p)
}

// interruptGrace is how long past the exchange's deadline a stream's
// writes may go on: the read that the deadline cuts ends the relay, and
// the in-band error frame saying so (and the body's last chunk) still has
// to reach the caller. Capped exactly at the deadline, an event read just
// before it failed to write, or the frame did, and the stream just
// stopped.
const interruptGrace = 2 * time.Second

// streamWriter sets d up to wrap a body stream's writer with the
// per-event deadline; limit (the upstream exchange's total deadline, or
// zero) plus interruptGrace caps it.
func (g *Gateway) streamWriter(d *deadlineWriter, ctx *fasthttp.RequestCtx, host bool, w io.Writer, limit time.Time) *deadlineWriter {
	*d = deadlineWriter{w: w, timeout: g.opts.Env.HTTP.WriteTimeout.Duration(), limit: limit}
	if !limit.IsZero() {
		d.limit = limit.Add(interruptGrace)
	}
	if !host {
		d.conn = ctx.Conn()
	}
	return d
}
