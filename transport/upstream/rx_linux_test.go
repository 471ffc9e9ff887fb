//go:build linux

package upstream

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// TestArrivalSplitsProviderAndGateway: the provider answers at least
// 150 ms after the request; the gateway's goroutine is kept from reading
// until the answer is in the socket and another 100 ms have passed. The
// exchange says the provider took at least its 150 ms and the gateway
// waited at least the 100 ms to read it, and the two add up to no more
// than the exchange took. Only bounds that a busy machine cannot move:
// a late server or a slow read lengthens the figures, never shortens
// them below what was held (fixed windows around 150 and 100 ms failed
// when the server itself was scheduled late).
func TestArrivalSplitsProviderAndGateway(t *testing.T) {
	const answerAfter, heldAfter = 150 * time.Millisecond, 100 * time.Millisecond
	var got atomic.Int64 // when the server last read a request (wall clock, ns)
	addr := server(t, func(ctx *fasthttp.RequestCtx) {
		got.Store(time.Now().UnixNano())
		time.Sleep(answerAfter)
		ctx.SetBodyString(`{"ok":true}`)
	})
	c := client(addr, 10*time.Second, 10*time.Second)
	defer c.Close()
	// A first exchange opens the connection; the second measures.
	x, err := do(t, c, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	x.Release()
	x = AcquireExchange()
	defer x.Release()
	x.Req.Header.SetMethod("POST")
	x.Req.SetRequestURI("/v1/chat/completions")
	x.Req.Header.SetHost(c.Addr())
	rx := pooledRx(t, c)
	held := false
	rx.hold = func() {
		if held {
			return
		}
		held = true
		// Wait until the answer is in the socket (peeked, not read),
		// then keep the read back.
		var b [1]byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			n := 0
			_ = rx.raw.Control(func(fd uintptr) {
				n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			})
			if n > 0 {
				break
			}
		}
		time.Sleep(heldAfter)
	}
	start := time.Now()
	if err := c.Do(x, nil, false); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	provider, local := x.Arrival()
	// The answer came at least answerAfter after the server read the
	// request. (provider itself is counted from the request written, a
	// time the client reads after its write returns: a client scheduled
	// late there read 144 ms for the 150.)
	if arrived := x.sent.Add(provider); arrived.UnixNano() < got.Load()+int64(answerAfter) {
		t.Fatalf("provider time %v: the answer's arrival is %v after the server read the request, want at least the %v it took",
			provider, time.Duration(arrived.UnixNano()-got.Load()), answerAfter)
	}
	if local < heldAfter {
		t.Fatalf("local wait %v, want at least the %v the read was held after the answer came (provider %v)", local, heldAfter, provider)
	}
	if provider+local > took {
		t.Fatalf("provider %v + local wait %v exceed the exchange's %v: the answer's arrival is not where the split is", provider, local, took)
	}
}

// pooledRx is the receive-time wrapper of the connection c's pool holds
// (the one an earlier exchange left there), which the next exchange
// reads through.
func pooledRx(t *testing.T, c *Client) *rxConn {
	t.Helper()
	cc, err := c.hc.AcquireConn(time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	rx := rxOf(cc.Conn())
	c.hc.ReleaseConn(cc)
	if rx == nil {
		t.Fatal("the provider connection has no receive times")
	}
	return rx
}

// rxPair returns a loopback connection wrapped for receive times, armed,
// and the peer that writes to it.
func rxPair(tb testing.TB) (rx *rxConn, peer net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		tb.Fatal("accept failed")
	}
	w := wrapRx(c)
	rx, ok := w.(*rxConn)
	if !ok {
		tb.Fatalf("a TCP connection on Linux is not wrapped: %T", w)
	}
	tb.Cleanup(func() { rx.Close(); peer.Close() })
	rx.armed = true
	return rx, peer
}

// TestRxConnReadsLikeTheConnection: armed reads return the same bytes,
// the end of stream as io.EOF and a passed deadline as a timeout.
func TestRxConnReadsLikeTheConnection(t *testing.T) {
	rc, srv := rxPair(t)
	_ = rc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [16]byte
	if _, err := rc.Read(b[:]); !isTimeout(err) {
		t.Fatalf("a read past its deadline: %v, want a timeout", err)
	}
	_ = rc.SetReadDeadline(time.Time{})
	before := time.Now()
	if _, err := srv.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	n, err := rc.Read(b[:])
	if err != nil || string(b[:n]) != "hello" {
		t.Fatalf("armed read: %q %v", b[:n], err)
	}
	if rc.rx.Before(before.Add(-time.Millisecond)) || rc.at.Before(rc.rx) {
		t.Fatalf("receive time %v, read at %v, write at %v: want write ≤ receive ≤ read", rc.rx, rc.at, before)
	}
	// A read whose deadline had passed before it began never reaches the
	// socket: it must say it read nothing, not repeat the count of the
	// read before it. A stale count made the reader above take that many
	// bytes of its reused buffer, an earlier exchange's answer, for this
	// one's: a caller got another request's 200 when its deadline fell
	// between two reads.
	_ = rc.SetReadDeadline(time.Now().Add(-time.Second))
	if n, err := rc.Read(b[:]); n != 0 || !isTimeout(err) {
		t.Fatalf("an armed read past its deadline after one of %d bytes: %d bytes, %v; want 0 bytes and a timeout", len("hello"), n, err)
	}
	_ = rc.SetReadDeadline(time.Time{})
	rc.armed = false
	_, _ = srv.Write([]byte("plain"))
	if n, err := rc.Read(b[:]); err != nil || string(b[:n]) != "plain" {
		t.Fatalf("disarmed read: %q %v", b[:n], err)
	}
	rc.armed = true
	_ = srv.Close()
	if _, err := rc.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

// TestRxTimeParsesControlMessages: the receive time is found among other
// control messages, and malformed buffers give none (never a panic).
func TestRxTimeParsesControlMessages(t *testing.T) {
	want := time.Unix(1700000000, 123456789)
	ts := cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, tsBytes(want))
	other := cmsg(syscall.SOL_IP, 8, []byte{1, 2, 3, 4})
	for _, tc := range []struct {
		name string
		oob  []byte
		ok   bool
	}{
		{"alone", ts, true},
		{"after another", append(append([]byte{}, other...), ts...), true},
		{"none", other, false},
		{"empty", nil, false},
		{"truncated header", ts[:8], false},
		{"length past the end", append(lenOf(ts, 4096), ts[16:]...), false},
		{"zero length", lenOf(ts, 0), false},
	} {
		got, ok := rxTime(tc.oob)
		if ok != tc.ok || ok && !got.Equal(want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, want, tc.ok)
		}
	}
}

func FuzzRxTime(f *testing.F) {
	f.Add(cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, tsBytes(time.Unix(1, 2))))
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0, 1, 0, 0, 0, 35, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, ok := rxTime(b); !ok && !got.IsZero() {
			t.Fatalf("no time found but %v returned", got)
		}
	})
}

func tsBytes(t time.Time) []byte {
	ts := syscall.NsecToTimespec(t.UnixNano())
	return unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
}

func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, syscall.CmsgSpace(len(data)))
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(syscall.CmsgLen(len(data)))
	copy(b[syscall.CmsgLen(0):], data)
	return b
}

// lenOf is a copy of a control message's header with its length set.
func lenOf(m []byte, n int) []byte {
	b := append([]byte{}, m[:16]...)
	(*syscall.Cmsghdr)(unsafe.Pointer(&b[0])).SetLen(n)
	return b
}

// TestDeadlinePassedBeforeTheReadIsATimeout: the caller's deadline passes
// after the request is written but before the gateway's goroutine gets to
// read the answer (a busy machine). The exchange must end in a timeout,
// never in an answer made of an earlier exchange's bytes: the pooled
// reader's buffer still holds the first answer, and a read that reported
// the previous read's count handed those bytes over as this answer.
func TestDeadlinePassedBeforeTheReadIsATimeout(t *testing.T) {
	var n atomic.Int32
	addr := server(t, func(ctx *fasthttp.RequestCtx) {
		if n.Add(1) > 1 {
			time.Sleep(300 * time.Millisecond)
		}
		ctx.SetBodyString(`{"answer":` + strconv.Itoa(int(n.Load())) + `}`)
	})
	c := client(addr, 10*time.Second, 10*time.Second)
	defer c.Close()
	x, err := do(t, c, nil, false)
	if err != nil || string(x.Resp.Body()) != `{"answer":1}` {
		t.Fatalf("first exchange: %q, %v", x.Resp.Body(), err)
	}
	x.Release()
	rx := pooledRx(t, c)
	const limit = 50 * time.Millisecond
	rx.hold = func() { time.Sleep(2 * limit) } // the read begins after the deadline
	x = AcquireExchange()
	defer x.Release()
	x.Req.Header.SetMethod("POST")
	x.Req.SetRequestURI("/v1/chat/completions")
	x.Req.Header.SetHost(c.Addr())
	x.Req.SetBodyString(`{"model":"m"}`)
	x.Limit = time.Now().Add(limit)
	if err := c.Do(x, nil, false); !errors.Is(err, ErrTimeout) {
		t.Fatalf("an exchange whose deadline passed before its answer was read: status %d body %q, error %v; want ErrTimeout",
			x.Resp.StatusCode(), x.Resp.Body(), err)
	}
}
