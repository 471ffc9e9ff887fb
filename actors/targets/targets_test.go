package targets

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// spawnTargets starts a targets actor for names on a fake clock at
// 2026-11-30 12:00 UTC, in an actor system of its own; both stop when the
// test ends.
func spawnTargets(t *testing.T, names ...string) (*Handle, *clock.Fake) {
	t.Helper()
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, names, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h, clk
}

// waitSnap waits until the published snapshot matches cond. Between
// looks it sends the actor its publish tick, whose timer runs on the
// tests' fake clock: the tests move that clock only where time matters
// (cooldowns), and TestSuccessesCoalesce drives the timers themselves.
func waitSnap(t *testing.T, h *Handle, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	return testutil.UntilSnapshot(t, h.Snapshot, func() { h.root.Send(h.pid, tick{}) },
		func(s *Snapshot) bool { return s != nil && cond(s) })
}

func TestOutcomesArePublished(t *testing.T) {
	h, clk := spawnTargets(t, "p/a/m", "p/b/m")
	if s := h.Snapshot(); s == nil || len(s.Targets) != 2 || s.Targets[0].Target != "p/a/m" {
		t.Fatalf("initial snapshot %+v", s)
	}
	at := clk.Now()
	// Successes on a clean target take the coalesced fast path: the TTFB
	// EWMA moves toward each window's mean (150 ms here).
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: 100 * time.Millisecond, At: at})
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: 200 * time.Millisecond, At: at})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.RateLimit, Status: 429, At: at})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503, At: at})
	// A failure publishes at once, carrying the earlier successes with it.
	s := waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].Attempts == 2 })
	a, b := s.Targets[0], s.Targets[1]
	if a.Attempts != 2 || a.Successes != 2 || a.ConsecutiveFailures != 0 || a.TTFBEWMAMillis != 150 {
		t.Fatalf("target a %+v", a)
	}
	if b.ConsecutiveFailures != 2 || b.Failures["rate_limit"] != 1 || b.Failures["capacity"] != 1 || b.LastFailureClass != "capacity" || !b.LastFailureAt.Equal(at) {
		t.Fatalf("target b %+v", b)
	}
	// Request-caused errors and cancellations do not count against a target.
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Request, Status: 400, At: at})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Canceled, At: at})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.OK, At: at})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Connect, MidStream: true, At: at})
	s = waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].Failures["connect"] == 1 })
	b = s.Targets[1]
	if b.Attempts != 5 || b.ConsecutiveFailures != 1 || b.Failures["request"] != 1 || b.Successes != 1 {
		t.Fatalf("after mixed outcomes %+v", b)
	}
	// Out-of-range ids are ignored rather than crashing the actor.
	h.Report(&messages.AttemptFinished{Target: 7, Class: messages.OK})
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.Timeout, At: at})
	waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[0].Failures["timeout"] == 1 })
}

// TestSuccessesCoalesce: successes on a clean target are folded in by one
// flush, not one message each, CoalesceDelay after the first on the
// actor's clock, and published by the next tick; none is lost.
func TestSuccessesCoalesce(t *testing.T) {
	h, clk := spawnTargets(t, "p/a/m")
	for i := 0; i < 1000; i++ {
		h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: time.Millisecond})
	}
	if !h.flushPending.Load() {
		t.Fatal("no flush scheduled after fast-path successes")
	}
	testutil.Drain(t, h.root, h.pid) // the flush timer is armed
	clk.Advance(CoalesceDelay - time.Nanosecond)
	testutil.Drain(t, h.root, h.pid)
	if !h.flushPending.Load() {
		t.Fatal("flushed before CoalesceDelay passed")
	}
	clk.Advance(time.Nanosecond)
	testutil.Drain(t, h.root, h.pid)
	if h.flushPending.Load() {
		t.Fatal("no flush CoalesceDelay after the successes")
	}
	// The flush is not a failure: the tick publishes it.
	clk.Advance(PublishInterval - CoalesceDelay)
	testutil.Drain(t, h.root, h.pid)
	s := h.Snapshot()
	if s.Targets[0].Successes != 1000 || s.Targets[0].Attempts != 1000 || s.Targets[0].TTFBEWMAMillis != 1 {
		t.Fatalf("after coalescing and a tick: %+v", s.Targets[0])
	}
}

// TestAddRegistersTargets: targets added at run time get the next ids,
// are in the snapshot Add waited for, take reports, claim probes, and
// survive a restart of the actor with their names.
func TestAddRegistersTargets(t *testing.T) {
	h, clk := spawnTargets(t, "p/a/m")
	first, err := h.Add([]string{"q/b/m", "q/b/n"})
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 || h.Len() != 3 {
		t.Fatalf("Add gave first id %d and %d targets, want 1 and 3", first, h.Len())
	}
	s := h.Snapshot()
	if len(s.Targets) != 3 || s.Targets[1].Target != "q/b/m" || s.Targets[2].Target != "q/b/n" {
		t.Fatalf("snapshot after Add: %+v", s.Targets)
	}
	h.Report(&messages.AttemptFinished{Target: 2, Class: messages.RateLimit, Status: 429, At: clk.Now()})
	waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[2].Attempts == 1 && s.Targets[2].Open })
	clk.Advance(time.Minute)
	if !h.TryProbe(2, clk.Now()) || h.TryProbe(2, clk.Now()) {
		t.Fatal("the added target's single probe was not claimable exactly once")
	}
	h.root.Send(h.pid, messages.Crash{})
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503, At: clk.Now()})
	s = waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].Attempts == 1 })
	if len(s.Targets) != 3 || s.Targets[2].Target != "q/b/n" || s.Targets[2].Attempts != 1 {
		t.Fatalf("after a restart the added targets lost their names or state: %+v", s.Targets)
	}
}

// TestNoLatencySuccessKeepsTTFB: a success marked NoLatency (a
// count_tokens call) counts as an attempt and a success, and clears a
// failure streak, on the fast path and the actor's path alike, but leaves
// the TTFB average where the model calls put it.
func TestNoLatencySuccessKeepsTTFB(t *testing.T) {
	h, clk := spawnTargets(t, "p/a/m")
	at := clk.Now()
	// Fast path (clean target): one timed success, then quick counts.
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: 100 * time.Millisecond, At: at})
	for i := 0; i < 10; i++ {
		h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: time.Millisecond, At: at, NoLatency: true})
	}
	s := waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[0].Successes == 11 })
	if a := s.Targets[0]; a.Attempts != 11 || a.TTFBEWMAMillis != 100 {
		t.Fatalf("after fast-path counts: %+v, want 11 attempts and the TTFB average still 100 ms", a)
	}
	// Actor path (a failure streak makes the target unclean): the count
	// ends the streak without moving the average.
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.Capacity, Status: 503, At: at})
	waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[0].ConsecutiveFailures == 1 })
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.OK, TTFB: time.Millisecond, At: at, NoLatency: true})
	s = waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[0].Successes == 12 })
	if a := s.Targets[0]; a.ConsecutiveFailures != 0 || a.TTFBEWMAMillis != 100 {
		t.Fatalf("after a count on a failing target: %+v, want the streak cleared and the TTFB average still 100 ms", a)
	}
}
