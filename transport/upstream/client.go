// Package upstream is the gateway's HTTP client to providers: one fasthttp
// HostClient (the connection pool) per provider connection, driven by the
// gateway's own exchange loop instead of HostClient.Do.
//
// Why not HostClient.Do: it cannot be interrupted. A caller that disconnects
// while a provider is still generating must cancel the provider request
// within 100 ms, and an SSE relay needs an idle deadline that only data
// events re-arm. Both need the exchange's net.Conn, which HostClient exposes
// through AcquireConn but Do hides. So Do's steps (acquire, write, read
// headers, stream or read the body, release) are repeated here with a Cancel
// that can close the connection from any goroutine and with per-phase
// deadlines: connect, time to first byte, idle between events, total.
package upstream

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Options configures one connection's client.
type Options struct {
	// Addr is host:port.
	Addr string
	TLS  bool
	// ServerName overrides the TLS server name (defaults to Addr's host).
	ServerName string
	MaxConns   int
	// ConnectTimeout bounds dialing; TTFBTimeout bounds the wait for response
	// headers (for a non-streaming call, the whole generation); TotalTimeout
	// bounds the whole exchange including the body.
	ConnectTimeout, TTFBTimeout, TotalTimeout time.Duration
	// MaxResponseBytes bounds a buffered (non-streamed) response body.
	MaxResponseBytes int
	// Verify, when set, is called on every new connection before it is
	// used; an error closes it and fails the exchange as a connect error
	// (a service:// provider proves that its own child accepted it).
	Verify func() error
}

// Client sends exchanges to one upstream address.
type Client struct {
	hc   *fasthttp.HostClient
	opts Options
}

// New returns a client. Close it to drop idle connections.
func New(o Options) *Client {
	hc := &fasthttp.HostClient{
		Addr:                o.Addr,
		IsTLS:               o.TLS,
		MaxConns:            o.MaxConns,
		MaxIdleConnDuration: 60 * time.Second,
		// When every pooled connection is busy, wait briefly for one to free
		// up, then fail with ErrBusy (a local condition, not the provider's).
		MaxConnWaitTimeout:            min(maxConnWait, o.ConnectTimeout),
		ConnPoolStrategy:              fasthttp.LIFO,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		ReadBufferSize:                16 << 10,
		WriteBufferSize:               16 << 10,
		// A plain net.Dialer: fasthttp's default dialer keeps a global DNS
		// cache with a cleaner goroutine that never stops.
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 || timeout > o.ConnectTimeout {
				timeout = o.ConnectTimeout
			}
			conn, err := (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			if o.Verify != nil {
				if verr := o.Verify(); verr != nil {
					conn.Close()
					return nil, &refusedConn{verr}
				}
			}
			return wrapRx(conn), nil
		},
	}
	if o.TLS {
		host, _, _ := net.SplitHostPort(o.Addr)
		if o.ServerName != "" {
			host = o.ServerName
		}
		hc.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return &Client{hc: hc, opts: o}
}

// Close closes idle connections (in-flight exchanges finish on their own).
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Addr is the upstream address.
func (c *Client) Addr() string { return c.opts.Addr }

// Errors an exchange can end with, besides upstream HTTP statuses.
var (
	ErrCanceled = errors.New("upstream: exchange canceled")
	ErrTimeout  = errors.New("upstream: timeout")
	ErrConnect  = errors.New("upstream: cannot connect")
	ErrTooLarge = errors.New("upstream: response body too large")
	// ErrBusy: all MaxConns connections to this upstream stayed busy for
	// the whole wait; the provider was never asked.
	ErrBusy = errors.New("upstream: connection pool exhausted")
)

// refusedConn is a connection Options.Verify refused.
type refusedConn struct{ err error }

func (e *refusedConn) Error() string {
	return "upstream: connection refused by verification: " + e.err.Error()
}
func (e *refusedConn) Unwrap() error { return e.err }

// freshIdle is how long a pooled connection may have been idle and still
// be used without checking that the provider kept it open: servers close
// idle connections after seconds, not milliseconds, and the check costs a
// syscall per request.
const freshIdle = time.Second

// maxConnWait bounds the wait for a free pooled connection.
const maxConnWait = 2 * time.Second

// Cancel aborts an exchange from another goroutine by closing its
// connection. The zero value is ready; it is reusable after Reset.
type Cancel struct {
	mu        sync.Mutex
	conn      net.Conn
	cancelled bool
	notify    func()
}

// Cancel aborts the bound exchange, now or as soon as one is bound.
func (c *Cancel) Cancel() {
	c.mu.Lock()
	c.cancelled = true
	conn, f := c.conn, c.notify
	c.notify = nil
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	if f != nil {
		f()
	}
}

// Notify registers f to run once when Cancel is called, for work that is
// not an exchange (a request waiting in an admission queue, a fan-out). It
// reports false, without registering, when Cancel already ran. Notify(nil)
// clears; f may still run once if Cancel raced with the clear.
func (c *Cancel) Notify(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled && f != nil {
		return false
	}
	c.notify = f
	return true
}

// Cancelled reports whether Cancel was called.
func (c *Cancel) Cancelled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled
}

// Reset clears the cancel for reuse.
func (c *Cancel) Reset() {
	c.mu.Lock()
	c.conn, c.cancelled, c.notify = nil, false, nil
	c.mu.Unlock()
}

func (c *Cancel) bind(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return false
	}
	c.conn = conn
	return true
}

func (c *Cancel) unbind() {
	c.mu.Lock()
	c.conn = nil
	c.mu.Unlock()
}

// Exchange is one request and its response on one pooled connection.
// Acquire with AcquireExchange; the caller fills Req, calls Do, reads the
// response, then calls Release.
type Exchange struct {
	Req  fasthttp.Request
	Resp fasthttp.Response
	// TTFB is the time from sending the request to reading the headers.
	TTFB time.Duration
	// Limit, when set, ends the exchange by then at the latest (the
	// caller's own deadline); the client's timeouts apply as well.
	Limit time.Time

	client *Client
	cancel *Cancel
	conn   net.Conn
	// rx is the connection's receive-time reader (nil where the kernel
	// gives none), armed from the request written until Disarm; sent is
	// when the request was written.
	rx       *rxConn
	sent     time.Time
	br       *bufio.Reader
	release  func(reuse bool)
	deadline time.Time
	stream   io.Reader
	eof      bool
}

var exchangePool = sync.Pool{New: func() any { return new(Exchange) }}

// AcquireExchange returns a clean exchange from the pool.
func AcquireExchange() *Exchange { return exchangePool.Get().(*Exchange) }

// Do sends x.Req and reads the response headers. When stream is true and
// the response is a 2xx, the body is left unread for Body/NextDeadline;
// otherwise the body is read fully (bounded by MaxResponseBytes).
func (c *Client) Do(x *Exchange, cancel *Cancel, stream bool) error {
	x.client, x.cancel = c, cancel
	start := time.Now()
	x.deadline = start.Add(c.opts.TotalTimeout)
	if !x.Limit.IsZero() && x.Limit.Before(x.deadline) {
		x.deadline = x.Limit
	}
	err := c.roundTrip(x, stream, start)
	if err != nil && x.conn != nil {
		x.finish(false)
	}
	return err
}

func (c *Client) roundTrip(x *Exchange, stream bool, start time.Time) error {
	for {
		cc, err := c.hc.AcquireConn(c.opts.ConnectTimeout, false)
		if err != nil {
			if errors.Is(err, fasthttp.ErrNoFreeConns) {
				return ErrBusy
			}
			if isTimeout(err) {
				return ErrTimeout
			}
			return errors.Join(ErrConnect, err)
		}
		// A pooled connection the provider closed while it sat idle has its
		// FIN waiting in the socket: drop it and take another. Requests are
		// never re-sent after a failure (inference is not idempotent and
		// costs money), so stale connections must be caught here.
		if last := cc.LastUseTime(); last.After(cc.CreatedTime()) && time.Since(last) > freshIdle && peerClosed(cc.Conn()) {
			c.hc.CloseConn(cc)
			continue
		}
		x.conn = cc.Conn()
		x.rx = rxOf(x.conn)
		hc := c.hc
		x.release = func(reuse bool) {
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		}
		if x.cancel != nil && !x.cancel.bind(x.conn) {
			return ErrCanceled
		}
		return c.exchange(x, stream, start)
	}
}

func (c *Client) exchange(x *Exchange, stream bool, start time.Time) error {
	conn := x.conn
	if err := conn.SetWriteDeadline(minTime(start.Add(c.opts.TTFBTimeout), x.deadline)); err != nil {
		return x.classify(err)
	}
	bw := c.hc.AcquireWriter(conn)
	err := x.Req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	c.hc.ReleaseWriter(bw)
	if err != nil {
		return x.classify(err)
	}
	x.sent = time.Now()
	if x.rx != nil {
		x.rx.armed, x.rx.rx, x.rx.at = true, time.Time{}, time.Time{}
	}
	if err := conn.SetReadDeadline(minTime(start.Add(c.opts.TTFBTimeout), x.deadline)); err != nil {
		return x.classify(err)
	}
	x.br = c.hc.AcquireReader(conn)
	x.Resp.StreamBody = stream
	if err := x.Resp.ReadLimitBody(x.br, c.opts.MaxResponseBytes); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return ErrTooLarge
		}
		return x.classify(err)
	}
	x.TTFB = time.Since(start)
	if !stream {
		x.eof = true
		return nil
	}
	x.stream = x.Resp.BodyStream()
	if code := x.Resp.StatusCode(); code >= 200 && code < 300 {
		return nil
	}
	// An error answer to a streaming request: buffer it so the gateway can
	// classify it and, when failover is exhausted, pass it through.
	return x.buffer(1 << 20)
}

// readAllLimit reads r fully into a pooled-size buffer, failing past limit.
func readAllLimit(r io.Reader, limit int) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Arrival splits the time since the request was written into the
// provider's and the gateway's own, as of the last read: provider is from
// the write to when the kernel received what that read returned, local
// from then to when the gateway's read returned (its wait for a CPU).
// Call it right after reading what the latency sample ends on (the
// headers, or a stream's first content event). Without receive times
// (not Linux, or no read yet) the provider's time runs to now and local
// is 0.
func (x *Exchange) Arrival() (provider, local time.Duration) {
	if x.sent.IsZero() {
		return 0, 0
	}
	if x.rx == nil || x.rx.at.IsZero() {
		return time.Since(x.sent), 0
	}
	return max(0, x.rx.rx.Sub(x.sent)), max(0, x.rx.at.Sub(x.rx.rx))
}

// Disarm ends the receive-time reads: the rest of the answer is read the
// plain way.
func (x *Exchange) Disarm() {
	if x.rx != nil {
		x.rx.armed = false
	}
}

// Body is the unread response body of a streaming exchange.
func (x *Exchange) Body() io.Reader { return x.stream }

// SetReadDeadline moves the read deadline for the next body reads; it is
// capped by the exchange's total deadline. Relays call it with
// last-data-event + idle timeout, so comments never extend it.
func (x *Exchange) SetReadDeadline(t time.Time) {
	if x.conn != nil {
		_ = x.conn.SetReadDeadline(minTime(t, x.deadline))
	}
}

// Deadline is when the whole exchange must be over
// (OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS after it started): a relay writing
// the stream to a slow caller stops there too.
func (x *Exchange) Deadline() time.Time { return x.deadline }

// MarkEOF records that the body was read to its end, so the connection can
// be reused.
func (x *Exchange) MarkEOF() { x.eof = true }

// Classify maps a body read error to the exchange's error vocabulary.
func (x *Exchange) Classify(err error) error { return x.classify(err) }

func (x *Exchange) classify(err error) error {
	switch {
	case err == nil:
		return nil
	case x.cancel != nil && x.cancel.Cancelled():
		return ErrCanceled
	case isTimeout(err):
		return ErrTimeout
	}
	return err
}

// Release returns the connection (kept alive only if the body was fully
// read and nobody cancelled) and the exchange to the pool.
func (x *Exchange) Release() {
	if x.conn != nil {
		x.finish(x.eof)
	}
	x.Req.Reset()
	x.Resp.Reset()
	x.client, x.cancel, x.stream, x.br = nil, nil, nil, nil
	x.TTFB, x.eof, x.Limit, x.sent = 0, false, time.Time{}, time.Time{}
	exchangePool.Put(x)
}

func (x *Exchange) finish(reuse bool) {
	x.Disarm()
	x.rx = nil
	if x.stream != nil {
		_ = x.Resp.CloseBodyStream()
		x.stream = nil
	}
	if x.cancel != nil {
		x.cancel.unbind()
		if x.cancel.Cancelled() {
			reuse = false
		}
	}
	reuse = reuse && !x.Resp.ConnectionClose()
	if reuse {
		_ = x.conn.SetDeadline(time.Time{})
	}
	if x.br != nil {
		x.client.hc.ReleaseReader(x.br)
		x.br = nil
	}
	x.release(reuse)
	x.conn, x.release = nil, nil
}

// rxOf finds the receive-time reader under c (also under TLS).
func rxOf(c net.Conn) *rxConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	r, _ := c.(*rxConn)
	return r
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func isTimeout(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// EventStream reports whether the answer is a server-sent event stream
// (its Content-Type is text/event-stream).
func (x *Exchange) EventStream() bool {
	return bytes.HasPrefix(bytes.TrimSpace(x.Resp.Header.ContentType()), eventStreamType)
}

var eventStreamType = []byte("text/event-stream")

// Buffer reads the rest of a streamed body into Resp, bounded by
// MaxResponseBytes (for a provider that answered a streaming request with a
// plain body).
func (x *Exchange) Buffer() error {
	if x.stream == nil {
		return nil
	}
	return x.buffer(x.client.opts.MaxResponseBytes)
}

// buffer reads the rest of the streamed body (at most limit bytes, by the
// exchange's deadline) into the response, which is then a plain body.
func (x *Exchange) buffer(limit int) error {
	if err := x.conn.SetReadDeadline(x.deadline); err != nil {
		return x.classify(err)
	}
	body, err := readAllLimit(x.stream, limit)
	_ = x.Resp.CloseBodyStream()
	x.stream = nil
	if err != nil {
		return x.classify(err)
	}
	x.eof = true
	x.Resp.SetBodyRaw(body)
	return nil
}
