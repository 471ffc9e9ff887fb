package admission

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeRun drives an Adapter on a fake clock.
type fakeRun struct {
	a   *Adapter
	now time.Time
}

func newRun(edit func(*Config)) *fakeRun {
	c := DefaultConfig()
	if edit != nil {
		edit(&c)
	}
	return &fakeRun{a: NewAdapter(c, t0), now: t0}
}

func (r *fakeRun) at(d time.Duration) time.Time { r.now = r.now.Add(d); return r.now }

// window spends one window with active in flight and n successful
// completions of the given latency, then closes it.
func (r *fakeRun) window(active int64, n int, latency time.Duration) WindowReport {
	step := time.Second / time.Duration(n+1)
	for i := 0; i < n; i++ {
		r.a.Complete(r.at(step), active, Completion{Outcome: Success, Latency: latency, Sampled: true})
	}
	return r.a.CloseWindow(r.at(time.Second-step*time.Duration(n)), active)
}

func TestLatencySpikeCutsByDecreaseFactor(t *testing.T) {
	r := newRun(nil)
	if rep := r.window(40, 5, 100*time.Millisecond); rep.After != 64 {
		t.Fatalf("steady window changed the limit: %+v", rep)
	}
	rep := r.window(40, 1, 300*time.Millisecond)
	if rep.Rule != RuleDecrease || rep.After != 51 { // floor(64 × 0.8)
		t.Fatalf("spike: %+v, want ×0.8 to 51", rep)
	}
	if rep.Gradient < 0.25 {
		t.Fatalf("gradient %v", rep.Gradient)
	}
}

func TestCriticalPressureCutsOncePerWindow(t *testing.T) {
	r := newRun(nil)
	if !r.a.ObservePressure(PressureCritical) || r.a.Limit() != 32 {
		t.Fatalf("first critical: limit %d, want 32 at once", r.a.Limit())
	}
	if r.a.ObservePressure(PressureCritical) || r.a.Limit() != 32 {
		t.Fatalf("second critical in the same window cut again: %d", r.a.Limit())
	}
	rep := r.a.CloseWindow(r.at(time.Second), 0)
	if rep.Rule != RuleCritical || rep.After != 32 {
		t.Fatalf("window close after a consumed critical cut: %+v", rep)
	}
	// Next window: a new critical observation cuts again, once.
	r.a.ObservePressure(PressureCritical)
	r.a.ObservePressure(PressureCritical)
	if r.a.Limit() != 16 {
		t.Fatalf("next window limit %d, want 16", r.a.Limit())
	}
	// Critical at close without an immediate observation consumes it there.
	r.a.CloseWindow(r.at(time.Second), 0)
	r.a.pressure = PressureCritical
	if rep := r.a.CloseWindow(r.at(time.Second), 0); rep.After != 8 {
		t.Fatalf("critical at window close: %+v, want 8", rep)
	}
	r.a.pressure = PressureCritical
	if rep := r.a.CloseWindow(r.at(time.Second), 0); rep.After != 8 {
		t.Fatalf("never below minLimit: %+v", rep)
	}
}

func TestHighUtilizationAddsOneStep(t *testing.T) {
	r := newRun(nil)
	rep := r.window(60, 5, 100*time.Millisecond) // 60/64 = 0.94
	if rep.Rule != RuleIncrease || rep.After != 65 {
		t.Fatalf("%+v, want +1 to 65", rep)
	}
	rep = r.window(60, 5, 100*time.Millisecond) // 60/65 = 0.92
	if rep.After != 66 {
		t.Fatalf("%+v, want 66", rep)
	}
	// No completion: no growth even at full utilisation.
	if rep := r.a.CloseWindow(r.at(time.Second), 66); rep.After != 66 {
		t.Fatalf("grew without completions: %+v", rep)
	}
}

func TestIdleRecoveryClimbsBackToInitialLimit(t *testing.T) {
	r := newRun(nil)
	r.a.ObservePressure(PressureCritical) // 64 → 32
	r.a.CloseWindow(r.at(time.Second), 0)
	want := int64(32)
	for i := 0; i < 40; i++ {
		rep := r.a.CloseWindow(r.at(time.Second), 0)
		want = min(want+1, 64)
		if rep.After != want {
			t.Fatalf("idle window %d: %+v, want %d", i, rep, want)
		}
	}
	if r.a.Limit() != 64 {
		t.Fatalf("did not recover: %d", r.a.Limit())
	}
	// A window with a completion does not recover (as OmniRoute).
	r.a.ObservePressure(PressureCritical)
	r.a.CloseWindow(r.at(time.Second), 0)
	if rep := r.window(0, 1, time.Millisecond); rep.After != 32 {
		t.Fatalf("low-traffic window with a completion recovered: %+v", rep)
	}
}

func TestDropsCountAsCongestion(t *testing.T) {
	r := newRun(nil)
	r.a.Complete(r.at(100*time.Millisecond), 10, Completion{Outcome: Success, Latency: 80 * time.Millisecond, Sampled: true, Drops: 1})
	if rep := r.a.CloseWindow(r.at(900*time.Millisecond), 10); rep.Rule != RuleDecrease || rep.After != 51 {
		t.Fatalf("a 429 or 5xx failed over must cut the limit: %+v", rep)
	}
	// A failed request freezes growth but does not cut on its own.
	r.a.Complete(r.at(100*time.Millisecond), 50, Completion{Outcome: UpstreamError})
	if rep := r.a.CloseWindow(r.at(900*time.Millisecond), 50); rep.After != 51 {
		t.Fatalf("frozen window changed the limit: %+v", rep)
	}
}

// TestRareDropsAmongManyAnswersDoNotCut: a broken target retried once per
// cooldown in front of a healthy one is not congestion; drops in 1% of a
// window's completions are.
func TestRareDropsAmongManyAnswersDoNotCut(t *testing.T) {
	r := newRun(nil)
	answer := func(drops int) {
		r.a.Complete(r.at(time.Millisecond), 60, Completion{Outcome: Success, Latency: 50 * time.Millisecond, Sampled: true, Drops: drops})
	}
	for i := 0; i < 300; i++ {
		answer(0)
	}
	answer(1)
	answer(1)
	if rep := r.a.CloseWindow(r.at(time.Second), 60); rep.Rule == RuleDecrease || rep.After < 64 || rep.Drops != 2 {
		t.Fatalf("2 drops in 302 answers: %+v, want no cut", rep)
	}
	for i := 0; i < 300; i++ {
		answer(0)
	}
	for i := 0; i < 4; i++ {
		answer(1)
	}
	if rep := r.a.CloseWindow(r.at(time.Second), 60); rep.Rule != RuleDecrease {
		t.Fatalf("4 drops in 304 answers: %+v, want a cut", rep)
	}
}

func TestFastFailuresAndUnsampledCompletionsFeedNoLatency(t *testing.T) {
	r := newRun(nil)
	r.window(10, 3, 200*time.Millisecond)
	s0, l0 := r.a.EWMAs()
	r.a.Complete(r.at(time.Millisecond), 10, Completion{Outcome: LocalReject, Latency: time.Millisecond, Sampled: true})
	r.a.Complete(r.at(time.Millisecond), 10, Completion{Outcome: Success, Latency: time.Millisecond, Sampled: false})
	r.a.Complete(r.at(time.Millisecond), 10, Completion{Outcome: Cancelled, Latency: time.Millisecond, Sampled: true})
	rep := r.a.CloseWindow(r.at(time.Second), 10)
	if rep.Samples != 0 {
		t.Fatalf("window counted %d latency samples", rep.Samples)
	}
	if s, l := r.a.EWMAs(); s != s0 || l != l0 {
		t.Fatalf("EWMAs moved from (%v,%v) to (%v,%v)", s0, l0, s, l)
	}
}

func TestDriftGuardCapsIncreases(t *testing.T) {
	r := newRun(func(c *Config) { c.DriftGuardFactor = 1; c.InitialLimit = 20; c.MinLimit = 4 })
	// Peak in flight 19 of a limit of 20: +1 would pass max(20, 1×19)? 21 > 20 → capped at 20.
	rep := r.window(19, 5, 100*time.Millisecond)
	if !rep.Guarded || rep.After != 20 {
		t.Fatalf("%+v, want the guard to hold 20", rep)
	}
	r2 := newRun(func(c *Config) { c.DriftGuardFactor = 0; c.InitialLimit = 20; c.MinLimit = 4 })
	if rep := r2.window(19, 5, 100*time.Millisecond); rep.After != 21 {
		t.Fatalf("guard off: %+v", rep)
	}
}

func TestUtilizationIsCappedAtTheLimit(t *testing.T) {
	r := newRun(nil)
	rep := r.a.CloseWindow(r.at(time.Second), 10_000) // shadow oversubscription
	if rep.Utilization != 1 {
		t.Fatalf("utilisation %v", rep.Utilization)
	}
}

// TestSlowLatencyCreepIsCaught: latency rising 4% a window (the limit
// creeping past the provider's knee) must eventually cut the limit. With a
// per-sample long EWMA at 50 samples a window the baseline would track the
// rise and the gradient would stay near zero.
func TestSlowLatencyCreepIsCaught(t *testing.T) {
	r := newRun(nil)
	lat := 100.0
	for w := 0; w < 20; w++ {
		rep := r.window(60, 50, time.Duration(lat*float64(time.Millisecond)))
		if rep.Rule == RuleDecrease {
			t.Logf("cut after %d windows at %.0f ms (gradient %.2f)", w, lat, rep.Gradient)
			return
		}
		lat *= 1.04
	}
	t.Fatal("a steady latency creep never cut the limit")
}

// TestNoisyLatencyDoesNotCollapseTheLimit: answers whose latency varies
// ±30% at random (answer lengths differ) are not congestion; per-sample
// EWMAs read that noise as gradients and cut every window.
func TestNoisyLatencyDoesNotCollapseTheLimit(t *testing.T) {
	r := newRun(nil)
	rng := rand.New(rand.NewSource(3))
	for w := 0; w < 30; w++ {
		for i := 0; i < 100; i++ {
			lat := time.Duration((70 + 60*rng.Float64()) * float64(time.Millisecond))
			r.a.Complete(r.at(9*time.Millisecond), 40, Completion{Outcome: Success, Latency: lat, Sampled: true})
		}
		if rep := r.a.CloseWindow(r.at(100*time.Millisecond), 40); rep.Rule == RuleDecrease || rep.Rule == RuleCritical {
			t.Fatalf("window %d: %+v", w, rep)
		}
	}
}

// TestStandingQueueStopsGrowth: at full utilisation, once window latency
// sits above the no-queue baseline, additive increases stop; they resume
// when the queue is gone.
func TestStandingQueueStopsGrowth(t *testing.T) {
	r := newRun(nil)
	for i := 0; i < 3; i++ {
		if rep := r.window(60, 50, 100*time.Millisecond); rep.Rule != RuleIncrease {
			t.Fatalf("no queue, window %d: %+v", i, rep)
		}
	}
	limit := r.a.Limit()
	for i := 0; i < 10; i++ {
		rep := r.window(60, 50, 107*time.Millisecond)
		if rep.After > limit || (i > 0 && !rep.Queueing) {
			t.Fatalf("grew with a standing queue, window %d: %+v", i, rep)
		}
	}
	if rep := r.window(60, 50, 101*time.Millisecond); rep.Rule != RuleIncrease {
		t.Fatalf("queue gone: %+v", rep)
	}
}

// TestQueuedDemandGrowsTheLimitFast: a full window whose demand queued at
// the limit, with a clean latency signal, grows the limit by a factor (slow
// start) instead of one step, so the default 64 reaches a provider's
// capacity within seconds: the first step from the initial limit up is
// ×1.25, the rest of the run and any step below it ×1.5; without queued
// demand growth stays one step.
func TestQueuedDemandGrowsTheLimitFast(t *testing.T) {
	r := newRun(nil)
	r.a.NoteLimited()
	rep := r.window(64, 5, 100*time.Millisecond)
	if rep.Rule != RuleIncrease || !rep.SlowStart || rep.After != 80 {
		t.Fatalf("%+v, want ×1.25 to 80", rep)
	}
	limits := []int64{rep.After}
	for i := 0; i < 5; i++ {
		r.a.NoteLimited()
		limits = append(limits, r.window(r.a.Limit(), 5, 100*time.Millisecond).After)
	}
	if got := limits[len(limits)-1]; got != 608 {
		t.Fatalf("limits %v: want 64→80→120→180→270→405→608 in six windows", limits)
	}
	// The flag is per window: the next window without queued demand adds
	// one step.
	if rep := r.window(r.a.Limit(), 5, 100*time.Millisecond); rep.SlowStart || rep.After != 609 {
		t.Fatalf("%+v, want one step to 609", rep)
	}
	// Congestion still cuts, queued demand or not.
	r.a.NoteLimited()
	rep = r.window(r.a.Limit(), 5, 400*time.Millisecond)
	if rep.Rule != RuleDecrease || rep.After != 487 {
		t.Fatalf("%+v, want a decrease to 487 on the latency spike", rep)
	}
	// The short latency EWMA still carries the spike, so the next window
	// cuts again (487→389, ssthresh ⌊0.9×487⌋ = 438). Slow start then goes
	// back up only to where congestion showed (×1.25 would be 487), and
	// one step at a time after that.
	var after []int64
	for i := 0; i < 3; i++ {
		r.a.NoteLimited()
		after = append(after, r.window(r.a.Limit(), 5, 100*time.Millisecond).After)
	}
	if after[0] != 389 || after[1] != 438 || after[2] != 439 {
		t.Fatalf("after the cut: %v, want 389 438 439", after)
	}
	// A quiet minute (baselineWindows windows with no congestion) forgets
	// where congestion was, so slow start may grow past it again.
	for i := 0; i < baselineWindows; i++ {
		r.window(r.a.Limit(), 5, 100*time.Millisecond)
	}
	before := r.a.Limit()
	r.a.NoteLimited()
	if rep := r.window(before, 5, 100*time.Millisecond); !rep.SlowStart || rep.After != int64(math.Ceil(float64(before)*1.25)) {
		t.Fatalf("%+v from %d, want ×1.25 after a quiet minute", rep, before)
	}

	// Below the initial limit (after a cut) the limit regrows ×1.5: that
	// level was known good.
	r = newRun(func(c *Config) { c.InitialLimit = 100 })
	r.a.Complete(r.at(100*time.Millisecond), 50, Completion{Outcome: Success, Latency: 100 * time.Millisecond, Sampled: true, Drops: 1})
	if rep := r.a.CloseWindow(r.at(900*time.Millisecond), 50); rep.After != 80 {
		t.Fatalf("%+v, want the drop to cut to 80", rep)
	}
	for i := 0; i < baselineWindows; i++ {
		r.window(10, 5, 100*time.Millisecond) // quiet and light: no growth, ssthresh forgotten
	}
	r.a.NoteLimited()
	if rep := r.window(80, 5, 100*time.Millisecond); !rep.SlowStart || rep.After != 120 {
		t.Fatalf("%+v, want ×1.5 to 120 below the initial limit", rep)
	}
}

// TestSlowStartProbeIsUndoneWhenItQueues: a provider already at its knee
// (the operator's initial limit) must not carry a slow-start overshoot for
// a whole window. Once probeSamples answers after a slow-start step run
// probeTolerance over the baseline the limit returns to where it was,
// mid-window, and slow start may go only as far as the knee the latest
// answers point to; answers within the tolerance leave the step in place.
func TestSlowStartProbeIsUndoneWhenItQueues(t *testing.T) {
	step := func() *fakeRun {
		r := newRun(func(c *Config) { c.InitialLimit = 112 })
		r.a.NoteLimited()
		if rep := r.window(112, 100, 100*time.Millisecond); !rep.SlowStart || rep.After != 140 {
			t.Fatalf("%+v, want a slow-start step to 140", rep)
		}
		return r
	}
	answer := func(r *fakeRun, ms int) bool {
		return r.a.Complete(r.at(time.Millisecond), 140, Completion{Outcome: Success, Latency: time.Duration(ms) * time.Millisecond, Sampled: true})
	}
	// Answers just inside the tolerance do not undo the step.
	r := step()
	for i := 0; i < 2*probeSamples; i++ {
		if answer(r, 112) {
			t.Fatalf("answer %d at +12%% undid the probe", i)
		}
	}
	if r.a.Limit() != 140 {
		t.Fatalf("limit %d, want 140 kept", r.a.Limit())
	}
	// A provider whose knee is 112 answers 140 in flight 1.25× slower: the
	// step is undone as soon as probeSamples answers are in, reported by
	// Complete and by the window.
	r = step()
	undoneAt := -1
	for i := 0; i < 2*probeSamples && undoneAt < 0; i++ {
		if answer(r, 125) {
			undoneAt = i
		}
	}
	if undoneAt != probeSamples-1 || r.a.Limit() != 112 {
		t.Fatalf("limit %d, undone at answer %d: want back to 112 at answer %d", r.a.Limit(), undoneAt, probeSamples-1)
	}
	rep := r.a.CloseWindow(r.at(500*time.Millisecond), 112)
	if !rep.Undone || rep.Rule != RuleHold {
		t.Fatalf("%+v, want the window to report the undone probe and hold", rep)
	}
	// Little's law puts the knee at 140×100/125 = 112, where the limit is:
	// demand still queues, but growth is one step a window now.
	r.a.NoteLimited()
	if rep := r.window(r.a.Limit(), 100, 100*time.Millisecond); rep.SlowStart || rep.After != rep.Before+1 {
		t.Fatalf("%+v, want one step after the undone probe", rep)
	}
}

// TestSlowStartProbeQueueingAtWindowClose: with an overshoot too mild for
// the mid-window check, a window that closes queueing after a slow-start
// step goes to the knee its latency points to (Little's law) instead of
// holding the overshoot, and keeps descending while the windows after it
// still queue, never below the level before the step.
func TestSlowStartProbeQueueingAtWindowClose(t *testing.T) {
	r := newRun(func(c *Config) { c.InitialLimit = 112 })
	r.a.NoteLimited()
	r.window(112, 10, 100*time.Millisecond)
	if r.a.Limit() != 140 {
		t.Fatalf("limit %d, want 140", r.a.Limit())
	}
	// 140 in flight answered 12% slower: the knee is ⌊140×100/112⌋ = 125.
	rep := r.window(140, 10, 112*time.Millisecond)
	if !rep.Queueing || !rep.Undone || rep.After != 125 {
		t.Fatalf("%+v, want the step taken back to 125", rep)
	}
	// Still 8% slow at 125: ⌊125×100/108⌋ = 115.
	if rep := r.window(125, 10, 108*time.Millisecond); !rep.Queueing || !rep.Undone || rep.After != 115 {
		t.Fatalf("%+v, want a further descent to 115", rep)
	}
	// Still slow at 115 (something else): not below the pre-step 112.
	if rep := r.window(115, 10, 130*time.Millisecond); !rep.Undone || rep.After != 112 {
		t.Fatalf("%+v, want the descent floored at 112", rep)
	}
	// A clean window ends the descent; a standing queue after that holds.
	r.window(112, 10, 100*time.Millisecond)
	if rep := r.window(r.a.Limit(), 10, 110*time.Millisecond); !rep.Queueing || rep.Undone || rep.After != rep.Before {
		t.Fatalf("%+v, want a hold once the descent ended", rep)
	}
	// A clean window after the step back: slow start is over (ssthresh is
	// the knee found), so growth is one step.
	r2 := newRun(func(c *Config) { c.InitialLimit = 112 })
	r2.a.NoteLimited()
	r2.window(112, 10, 100*time.Millisecond)
	r2.window(140, 10, 112*time.Millisecond)
	r2.a.NoteLimited()
	if rep := r2.window(125, 10, 100*time.Millisecond); rep.SlowStart || rep.After != 126 {
		t.Fatalf("%+v, want one step to 126 once the knee held", rep)
	}
}
