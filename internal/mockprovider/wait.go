package mockprovider

import (
	"net"
	"syscall"
	"time"
)

// pollInterval is how often a waiting request checks whether its client is
// still there; it bounds how late a departure is noticed (~5–10 ms).
const pollInterval = 5 * time.Millisecond

type waitResult uint8

const (
	waitElapsed  waitResult = iota // the delay passed
	waitAcquired                   // a slot was taken
	waitGone                       // the client closed the connection
	waitClosing                    // the server is shutting down
	waitReleased                   // the behaviour that held the request was replaced
)

// connWatch observes one request's connection without consuming from it.
// The raw connection is looked up on the first wait, so requests that never
// wait (the benchmark's default) pay nothing.
type connWatch struct {
	conn  net.Conn
	raw   syscall.RawConn // nil when the connection cannot be peeked
	ready bool
}

func (w *connWatch) peekable() bool {
	if !w.ready {
		w.ready = true
		if w.conn != nil {
			w.raw = rawConnOf(w.conn)
		}
	}
	return w.raw != nil
}

// gone reports whether the peer has closed the connection.
func (w *connWatch) gone() bool { return w.peekable() && peerClosed(w.raw) }

// wait blocks for d (forever when d < 0), or until granted fires (a slot
// is the request's), release is closed, the client leaves or the server
// closes. granted and release may be nil.
func (s *Server) wait(w *connWatch, d time.Duration, granted, release <-chan struct{}) waitResult {
	if d == 0 && granted == nil && release == nil {
		return waitElapsed
	}
	var timerC <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timerC = t.C
	}
	var tickC <-chan time.Time
	if w.peekable() {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		tickC = t.C
	}
	for {
		select {
		case <-timerC:
			return waitElapsed
		case <-granted:
			return waitAcquired
		case <-release:
			return waitReleased
		case <-s.closing:
			return waitClosing
		case <-tickC:
			if w.gone() {
				return waitGone
			}
		}
	}
}

// resetConn aborts c so the peer sees a TCP RST rather than an orderly FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
