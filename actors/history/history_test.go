package history

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// waitLen polls until the ring holds at least n points.
func waitLen(t *testing.T, h *Handle, n int) []Point {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p := h.Points(); len(p) >= n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("ring has %d points, want %d", len(h.Points()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRingKeepsTheLastSamples: samples arrive in order, the ring keeps the
// last Size, and a published slice is never changed by later samples.
func TestRingKeepsTheLastSamples(t *testing.T) {
	sys := testutil.NewActorSystem()
	defer sys.Shutdown()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var n atomic.Int64
	h, err := Spawn(sys, Options{Manual: true, Size: 3, Clock: clk, Sample: func(now time.Time) Point {
		return Point{At: now, Limit: n.Add(1)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	first := h.Points()
	if len(first) != 1 || first[0].Limit != 1 {
		t.Fatalf("first %+v", first)
	}
	for i := 0; i < 4; i++ {
		clk.Advance(time.Second)
		h.Tick()
		deadline := time.Now().Add(5 * time.Second)
		for h.Points()[len(h.Points())-1].Limit != int64(i+2) {
			if time.Now().After(deadline) {
				t.Fatalf("tick %d: points %+v", i, h.Points())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	p := h.Points()
	if len(p) != 3 || p[0].Limit != 3 || p[1].Limit != 4 || p[2].Limit != 5 || !p[0].At.Before(p[2].At) {
		t.Fatalf("ring %+v", p)
	}
	if len(first) != 1 || first[0].Limit != 1 {
		t.Fatalf("a published slice changed: %+v", first)
	}
}

// TestRestartKeepsTheRing: a panic restarts the actor and the ring goes on
// from where it was.
func TestRestartKeepsTheRing(t *testing.T) {
	sys := testutil.NewActorSystem()
	defer sys.Shutdown()
	var n atomic.Int64
	h, err := Spawn(sys, Options{Manual: true, Sample: func(time.Time) Point { return Point{Limit: n.Add(1)} }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	h.Tick()
	waitLen(t, h, 2)
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	h.Tick()
	p := waitLen(t, h, 3)
	if p[2].Limit != 3 {
		t.Fatalf("after restart %+v", p)
	}
}

// TestTimerSamples: without Manual the actor samples by itself.
func TestTimerSamples(t *testing.T) {
	sys := testutil.NewActorSystem()
	defer sys.Shutdown()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Interval: 10 * time.Millisecond, Clock: clk, Sample: func(time.Time) Point { return Point{} }})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "the sampling timer armed", func() bool { return clk.Pending() == 1 })
	for i := 0; i < 3; i++ {
		clk.Advance(10 * time.Millisecond) // one interval of the actor's clock: one sample
	}
	waitLen(t, h, 3)
	h.Stop()
	h.Stop()
}
