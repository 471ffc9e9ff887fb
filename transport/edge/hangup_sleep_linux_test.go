//go:build linux

package edge

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

type chanCanceler chan struct{}

func (c chanCanceler) Cancel() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tcpPair is a loopback TCP connection's two ends, closed when the test
// ends: the registry watches real sockets.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// TestSweepSleepsAndWakesForAHangUp: with nothing registered the sweep
// goes to sleep (no timer wake-ups on an idle gateway), and a request
// registered after that wakes it, is armed, and its client's hang-up
// still cancels it.
func TestSweepSleepsAndWakesForAHangUp(t *testing.T) {
	defer func(n int) { sleepAfter = n }(sleepAfter)
	sleepAfter = 1
	reg := newRegistry()
	w := newHangupWatcher(reg, slog.New(slog.DiscardHandler))
	defer w.Close()
	if w.epfd < 0 {
		t.Fatal("epoll unavailable on this linux machine")
	}
	testutil.Until(t, "the idle sweep to sleep", reg.asleep.Load)

	client, server := tcpPair(t)
	cancelled := make(chanCanceler, 1)
	tok := reg.Register(cancelled, 7, server, time.Now().Add(-time.Hour))
	defer reg.Unregister(tok)
	if reg.asleep.Load() {
		t.Fatal("Register with a connection to watch left the sweep asleep")
	}
	testutil.Until(t, "the woken sweep to arm the request", func() bool {
		s := &reg.shards[tok.shard]
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.slots[tok.idx].fd >= 0
	})
	client.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the client hung up and the request was not cancelled within 10 s")
	}
}

// TestRegistrySleepProtocol: sleep returns at once while a watchable
// request is registered (a Register raced the idle count), waits for a
// Register otherwise, and returns false when stopped.
func TestRegistrySleepProtocol(t *testing.T) {
	conn, _ := tcpPair(t)

	reg := newRegistry()
	tok := reg.Register(make(chanCanceler, 1), 1, conn, time.Now())
	if !reg.sleep(make(chan struct{})) || reg.asleep.Load() {
		t.Fatal("sleep with a watchable registration must return true at once and clear the flag")
	}
	reg.Unregister(tok)

	woke := make(chan bool, 1)
	go func() { woke <- reg.sleep(make(chan struct{})) }()
	testutil.Until(t, "sleep to set its flag", reg.asleep.Load)
	tok = reg.Register(make(chanCanceler, 1), 2, conn, time.Now())
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("sleep woken by Register returned false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register with a connection to watch did not wake the sleeping sweep within 10 s")
	}
	reg.Unregister(tok)

	// A registration without a connection to watch does not wake it.
	stop := make(chan struct{})
	go func() { woke <- reg.sleep(stop) }()
	testutil.Until(t, "sleep to set its flag", reg.asleep.Load)
	reg.Unregister(reg.Register(make(chanCanceler, 1), 3, nil, time.Now()))
	if !reg.asleep.Load() {
		t.Fatal("a registration with no connection woke the sweep")
	}
	close(stop)
	if <-woke {
		t.Fatal("sleep stopped returned true")
	}
}
