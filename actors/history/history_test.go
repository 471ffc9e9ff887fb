package history

import (
	"fmt"
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
	var p []Point
	testutil.Until(t, fmt.Sprintf("the ring holds %d points", n), func() bool {
		p = h.Points()
		return len(p) >= n
	})
	return p
}

// TestRingKeepsTheLastSamples: samples arrive in order, the ring keeps the
// last Size, and a published slice is never changed by later samples.
func TestRingKeepsTheLastSamples(t *testing.T) {
	sys := testutil.ActorSystem(t)
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
		testutil.Until(t, fmt.Sprintf("tick %d's point", i), func() bool {
			p := h.Points()
			return p[len(p)-1].Limit == int64(i+2)
		})
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
	sys := testutil.ActorSystem(t)
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
	sys := testutil.ActorSystem(t)
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
