package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// server runs a fasthttp handler on loopback for one test.
func server(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: h, CloseOnShutdown: true}
	done := make(chan struct{})
	go func() { _ = s.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = s.Shutdown(); <-done })
	return ln.Addr().String()
}

func client(addr string, ttfb, total time.Duration) *Client {
	return New(Options{Addr: addr, MaxConns: 4, ConnectTimeout: time.Second, TTFBTimeout: ttfb, TotalTimeout: total, MaxResponseBytes: 1 << 20})
}

func do(t *testing.T, c *Client, cancel *Cancel, stream bool) (*Exchange, error) {
	t.Helper()
	x := AcquireExchange()
	x.Req.Header.SetMethod("POST")
	x.Req.SetRequestURI("/v1/chat/completions")
	x.Req.Header.SetHost(c.Addr())
	x.Req.SetBodyString(`{"model":"m"}`)
	return x, c.Do(x, cancel, stream)
}

// failure does one exchange whose answer the test does not read (it is
// released at once) and returns how it ended.
func failure(t *testing.T, c *Client, cancel *Cancel) error {
	t.Helper()
	x, err := do(t, c, cancel, false)
	x.Release()
	return err
}

func TestBufferedAndReuse(t *testing.T) {
	var conns atomic.Int32
	addr := server(t, func(ctx *fasthttp.RequestCtx) {
		if ctx.ConnRequestNum() == 1 {
			conns.Add(1)
		}
		ctx.SetBodyString(`{"ok":true}`)
	})
	c := client(addr, time.Second, 2*time.Second)
	defer c.Close()
	for i := 0; i < 3; i++ {
		x, err := do(t, c, nil, false)
		if err != nil || string(x.Resp.Body()) != `{"ok":true}` {
			t.Fatalf("%d: %v %s", i, err, x.Resp.Body())
		}
		x.Release()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 sequential exchanges; want keep-alive reuse", n)
	}
}

// TestExchangeFailsWith: an exchange ends with the error kind callers
// tell apart: a server slower than the TTFB timeout is ErrTimeout, an
// address nobody listens on ErrConnect, an answer over MaxResponseBytes
// ErrTooLarge.
func TestExchangeFailsWith(t *testing.T) {
	for _, tc := range []struct {
		name        string
		addr        func(t *testing.T) string
		ttfb, total time.Duration
		want        error
	}{
		{"ttfb-timeout", func(t *testing.T) string {
			return server(t, func(ctx *fasthttp.RequestCtx) { time.Sleep(300 * time.Millisecond) })
		}, 50 * time.Millisecond, time.Second, ErrTimeout},
		{"connect-error", func(*testing.T) string {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			return addr
		}, time.Second, time.Second, ErrConnect},
		// Deadlines far past the answer's time: a loaded machine took more
		// than a second to hand over 2 MiB (the size is what is tested).
		{"too-large", func(t *testing.T) string {
			return server(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBody(make([]byte, 2<<20)) })
		}, time.Minute, time.Minute, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(tc.addr(t), tc.ttfb, tc.total)
			defer c.Close()
			if err := failure(t, c, nil); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	addr := server(t, func(ctx *fasthttp.RequestCtx) { <-release })
	defer close(release)
	c := client(addr, 10*time.Second, 10*time.Second)
	defer c.Close()
	var cancel Cancel
	time.AfterFunc(50*time.Millisecond, cancel.Cancel)
	start := time.Now()
	err := failure(t, c, &cancel)
	if !errors.Is(err, ErrCanceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v, want ErrCanceled promptly", err, time.Since(start))
	}
	// A cancel that happened before Do is honoured too.
	err = failure(t, c, &cancel)
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("pre-cancelled: %v", err)
	}
}

func TestStreamingBodyAndIdleDeadline(t *testing.T) {
	addr := server(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			w.WriteString("data: 1\n\n")
			w.Flush()
			time.Sleep(400 * time.Millisecond)
			w.WriteString("data: 2\n\n")
			w.Flush()
		})
	})
	c := client(addr, time.Second, 5*time.Second)
	defer c.Close()
	x, err := do(t, c, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release()
	buf := make([]byte, 64)
	n, err := x.Body().Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "data: 1") {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	x.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = io.ReadAll(x.Body())
	if !errors.Is(x.Classify(err), ErrTimeout) {
		t.Fatalf("idle deadline: %v", err)
	}
}

// rawServer serves every connection to a loopback listener with serve (on
// the connection and a reader of it), closing the connection when serve
// returns; the listener closes when the test ends.
func rawServer(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return ln.Addr().String()
}

// TestStaleConnectionNotUsed: the server closes a kept-alive connection
// while it is idle; the next exchange must notice before sending and use a
// fresh connection.
func TestStaleConnectionNotUsed(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		// Close without announcing it: the client's pooled
		// connection is now stale.
	})
	c := client(addr, time.Second, time.Second)
	defer c.Close()
	for i := 0; i < 3; i++ {
		time.Sleep(freshIdle + 50*time.Millisecond) // idle long enough to be checked
		x, err := do(t, c, nil, false)
		if err != nil || string(x.Resp.Body()) != "ok" {
			t.Fatalf("exchange %d: %v", i, err)
		}
		x.Release()
	}
}

func TestPoolExhaustedIsBusy(t *testing.T) {
	release := make(chan struct{})
	addr := server(t, func(ctx *fasthttp.RequestCtx) { <-release })
	c := New(Options{Addr: addr, MaxConns: 1, ConnectTimeout: 200 * time.Millisecond, TTFBTimeout: 5 * time.Second, TotalTimeout: 5 * time.Second, MaxResponseBytes: 1 << 20})
	defer c.Close()
	first := make(chan error, 1)
	go func() {
		err := failure(t, c, nil)
		first <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the first exchange take the only connection
	err := failure(t, c, nil)
	close(release)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first exchange: %v", err)
	}
}

// TestNoResendAfterWrite: a reused connection that breaks after the request
// was written is an error, never a second send (inference costs money).
func TestNoResendAfterWrite(t *testing.T) {
	var requests atomic.Int32
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader) {
		for n := 0; ; n++ {
			var req fasthttp.Request
			if err := req.Read(br); err != nil {
				return
			}
			requests.Add(1)
			if n == 1 {
				return // read the second request, then drop the connection
			}
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	c := client(addr, time.Second, time.Second)
	defer c.Close()
	x, err := do(t, c, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	x.Release()
	if err := failure(t, c, nil); err == nil {
		t.Fatal("broken exchange reported success")
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("server saw %d requests; want 2 (no re-send)", n)
	}
}

func TestCancelNotify(t *testing.T) {
	var c Cancel
	n := 0
	if !c.Notify(func() { n++ }) {
		t.Fatal("Notify refused before Cancel")
	}
	c.Cancel()
	c.Cancel()
	if n != 1 {
		t.Fatalf("notify ran %d times, want once", n)
	}
	if c.Notify(func() { n++ }) {
		t.Fatal("Notify accepted after Cancel")
	}
	c.Reset()
	if !c.Notify(func() { n += 10 }) || !c.Notify(nil) {
		t.Fatal("Notify after Reset")
	}
	c.Cancel()
	if n != 1 {
		t.Fatalf("a cleared notify ran: %d", n)
	}
}

// TestVerifyRefusesANewConnection: a connection Options.Verify refuses is
// closed before anything is written on it, and the exchange fails as a
// connect error; once it verifies, the request goes through.
func TestVerifyRefusesANewConnection(t *testing.T) {
	var got atomic.Int32
	addr := server(t, func(ctx *fasthttp.RequestCtx) {
		got.Add(1)
		ctx.SetBodyString(`{"ok":true}`)
	})
	var ok atomic.Bool
	c := New(Options{Addr: addr, MaxConns: 4, ConnectTimeout: time.Second, TTFBTimeout: time.Second, TotalTimeout: 2 * time.Second, MaxResponseBytes: 1 << 20,
		Verify: func() error {
			if !ok.Load() {
				return errors.New("not the service's own child")
			}
			return nil
		}})
	defer c.Close()
	err := failure(t, c, nil)
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "not the service's own child") || got.Load() != 0 {
		t.Fatalf("a refused connection: %v; the server got %d requests", err, got.Load())
	}
	ok.Store(true)
	x, err := do(t, c, nil, false)
	defer x.Release()
	if err != nil || x.Resp.StatusCode() != 200 || got.Load() != 1 {
		t.Fatalf("a verified connection: %v %d", err, got.Load())
	}
}
