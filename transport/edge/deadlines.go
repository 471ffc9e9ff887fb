package edge

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/quota"
)

// Deadlines on a slow client, in both directions, and the caller's own.
//
// Reading: the headers have OMNIROUTE_HEADER_TIMEOUT_MS (fasthttp's
// ReadTimeout). A body then gets its own deadline from its size: the
// header timeout plus the declared length at OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC
// (headerReceived), or, for a chunked body, plus what was read so far and
// the next ChunkWindow bytes at that rate, re-armed as it arrives (the
// pipeline's body read, with BodyDeadline). A body that misses it gets 408
// request_timeout; one that breaks off gets 400 incomplete_body. A declared
// length over the hard cap is answered 413 at once, before fasthttp waits
// for any of it.
//
// Writing: fasthttp's WriteTimeout bounds a whole non-streaming response;
// a stream re-arms the deadline before every event (DeadlineWriter), capped
// by the upstream exchange's total deadline, so a caller that stops reading
// has its stream ended (and its upstream request cancelled) instead of
// holding an upstream connection indefinitely.
//
// The caller's deadline: what it says it will wait (CallerTimeout), which
// the pipeline never waits or sends upstream past.

// TimeoutHeader states the caller's deadline in whole milliseconds, for
// clients that do not send the SDKs' X-Stainless-Timeout.
const TimeoutHeader = "X-Omniroute-Timeout-Ms"

// MaxCallerTimeout bounds a stated deadline (a day), so an absurd value
// cannot overflow the clock arithmetic.
const MaxCallerTimeout = 24 * time.Hour

// CallerTimeout reads what the caller says it will wait: X-Stainless-Timeout
// (seconds, sent by the official OpenAI and Anthropic SDKs) and
// x-omniroute-timeout-ms; the shorter wins, capped at MaxCallerTimeout. 0
// means the caller stated none. An unreadable X-Stainless-Timeout is
// ignored (it is the SDK's header, not ours); an unreadable gateway header
// is ErrInvalidTimeout.
func CallerTimeout(h *fasthttp.RequestHeader) (time.Duration, *apierror.Error) {
	var d time.Duration
	if v := h.Peek("X-Stainless-Timeout"); len(v) > 0 {
		if s, ok := quota.ParseSeconds(v); ok && s > 0 {
			d = s
		}
	}
	if v := h.Peek(TimeoutHeader); len(v) > 0 {
		ms, ok := parseMillis(v)
		if !ok {
			return 0, ErrInvalidTimeout
		}
		if d == 0 || ms < d {
			d = ms
		}
	}
	return min(d, MaxCallerTimeout), nil
}

// parseMillis reads a positive whole number of milliseconds.
func parseMillis(v []byte) (time.Duration, bool) {
	if len(v) > 12 {
		return 0, false
	}
	n, ok := ascii.ParseDigits(v)
	if !ok || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// ErrInvalidTimeout answers an unreadable x-omniroute-timeout-ms.
var ErrInvalidTimeout = apierror.New(apierror.CodeInvalidTimeout)

// ChunkWindow is how far ahead of what arrived a chunked body's deadline
// reaches.
const ChunkWindow = 64 << 10

// BodyDeadline is how long a body of n bytes may take to arrive.
func (e *Edge) BodyDeadline(n int64) time.Duration {
	rate := int64(e.env.HTTP.UploadMinRate)
	return e.env.Server.HeaderTimeout.Duration() + time.Duration(n*int64(time.Second)/rate)
}

// headerReceived runs once a request's headers are read, before fasthttp
// reads any of its body: it sets the body's read deadline, and makes a
// declared length over the hard cap fail at once (fasthttp would first
// wait for up to 8 KiB of it): a one-byte read limit with a deadline
// already past, so that either the handler or serverError answers 413
// without waiting.
func (e *Edge) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	cl := int64(h.ContentLength())
	switch {
	case cl > int64(e.env.Ingest.HardMaxBodyBytes):
		e.oversize.Store(h, cl)
		return fasthttp.RequestConfig{MaxRequestBodySize: 1, ReadTimeout: time.Nanosecond}
	case cl > 0:
		return fasthttp.RequestConfig{ReadTimeout: e.BodyDeadline(cl)}
	case cl == -1: // chunked: re-armed as it arrives
		return fasthttp.RequestConfig{ReadTimeout: e.BodyDeadline(ChunkWindow)}
	}
	return fasthttp.RequestConfig{}
}

// forgetOversize drops the mark headerReceived left for an oversized
// request that reached a handler.
func (e *Edge) forgetOversize(ctx *fasthttp.RequestCtx) {
	if int64(ctx.Request.Header.ContentLength()) > int64(e.env.Ingest.HardMaxBodyBytes) {
		e.oversize.Delete(&ctx.Request.Header)
	}
}

// IsTimeout reports a deadline error, however wrapped (fasthttp wraps the
// header read's timeout in errors that do not say Timeout themselves).
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// DeadlineWriter re-arms the connection's write deadline before each
// write of a stream (at most every rearmEvery), to now + timeout capped by
// limit (zero: no cap). Behind net/http (no connection) it only writes:
// the host server's timeouts apply.
type DeadlineWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
	limit   time.Time
	armed   time.Time
}

const rearmEvery = 100 * time.Millisecond

func (d *DeadlineWriter) Write(p []byte) (int, error) {
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

// StreamWriter sets d up to wrap a body stream's writer with the
// per-event deadline; limit (the upstream exchange's total deadline, or
// zero) plus interruptGrace caps it. host: the gateway runs behind
// net/http, whose connection is not the edge's.
func (e *Edge) StreamWriter(d *DeadlineWriter, ctx *fasthttp.RequestCtx, host bool, w io.Writer, limit time.Time) *DeadlineWriter {
	*d = DeadlineWriter{w: w, timeout: e.env.HTTP.WriteTimeout.Duration(), limit: limit}
	if !limit.IsZero() {
		d.limit = limit.Add(interruptGrace)
	}
	if !host {
		d.conn = ctx.Conn()
	}
	return d
}
