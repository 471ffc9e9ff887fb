package targets

import (
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/messages"
)

func TestBackoff(t *testing.T) {
	cases := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}}
	for _, c := range cases {
		if got := Backoff(c.n, time.Second, 5*time.Minute); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

type breakerEnv struct {
	t   *testing.T
	h   *Handle
	clk *clock.Fake
	mu  sync.Mutex
	obs []int
}

func newBreakerEnv(t *testing.T, o Options) *breakerEnv {
	t.Helper()
	sys := newSystem()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := &breakerEnv{t: t, clk: clk}
	o.Rand = func() float64 { return 0.5 } // jitter factor exactly 1
	o.OnObservation = func(target int, _ *messages.QuotaObservation) {
		e.mu.Lock()
		e.obs = append(e.obs, target)
		e.mu.Unlock()
	}
	h, err := SpawnWith(sys, []string{"p/a/m", "p/b/m"}, clk, o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	return e
}

// report sends an outcome and waits until the actor has handled it.
func (e *breakerEnv) report(m *messages.AttemptFinished) Stats {
	e.t.Helper()
	m.At = e.clk.Now()
	before := e.h.Snapshot().Targets[m.Target].Attempts
	if m.MidStream {
		before = 0
		for _, n := range e.h.Snapshot().Targets[m.Target].Failures {
			before += n
		}
	}
	e.h.Report(m)
	return waitSnap(e.t, e.h, func(s *Snapshot) bool {
		if m.MidStream {
			var n uint64
			for _, f := range s.Targets[m.Target].Failures {
				n += f
			}
			return n > before
		}
		return s.Targets[m.Target].Attempts > before && (m.Class == messages.OK || m.Class == messages.Canceled || s.Targets[m.Target].LastFailureAt != nil)
	}).Targets[m.Target]
}

func retryAfter(d time.Duration) *messages.QuotaObservation {
	return &messages.QuotaObservation{RetryAfter: d, HasRetryAfter: true}
}

func TestCooldownIsTheLongestHint(t *testing.T) {
	e := newBreakerEnv(t, Options{})
	now := e.clk.Now()
	// A 429 with Retry-After: 5 cools for exactly 5 s (backoff 1 s < 5 s).
	s := e.report(&messages.AttemptFinished{Target: 0, Class: messages.RateLimit, Status: 429, Reason: "rate_limit", Quota: retryAfter(5 * time.Second)})
	if !s.CoolUntil.Equal(now.Add(5*time.Second)) || s.Circuit != "closed" || s.CooldownReason != "rate_limit" {
		t.Fatalf("after 429 RA 5: %+v", s)
	}
	// A later, shorter hint does not shorten it.
	s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.RateLimit, Status: 429, Quota: retryAfter(time.Second)})
	if !s.CoolUntil.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("shortened: %v", s.CoolUntil.Sub(now))
	}
	// The reset of an exhausted dimension extends it.
	obs := &messages.QuotaObservation{N: 1}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasRemaining | messages.HasReset, Remaining: 0, ResetAt: now.Add(30 * time.Second)}
	s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.RateLimit, Status: 429, Quota: obs})
	if !s.CoolUntil.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("exhausted reset ignored: %v", s.CoolUntil.Sub(now))
	}
	// Backoff alone: the 4th consecutive failure → 8 s.
	s = e.report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503})
	if !s.CoolUntil.Equal(now.Add(time.Second)) {
		t.Fatalf("first backoff %v", s.CoolUntil.Sub(now))
	}
	// A body retry hint (Gemini retryDelay) counts like Retry-After.
	s = e.report(&messages.AttemptFinished{Target: 1, Class: messages.RateLimit, Status: 429, RetryAfter: 34 * time.Second})
	if !s.CoolUntil.Equal(now.Add(34 * time.Second)) {
		t.Fatalf("body hint ignored: %v", s.CoolUntil.Sub(now))
	}
	e.mu.Lock()
	n := len(e.obs)
	e.mu.Unlock()
	if n != 3 {
		t.Fatalf("observations forwarded %d times, want 3", n)
	}
}

func TestRequestErrorsAndCancellationsNeverCool(t *testing.T) {
	e := newBreakerEnv(t, Options{})
	for _, c := range []messages.FailureClass{messages.Request, messages.Canceled, messages.Request} {
		s := e.report(&messages.AttemptFinished{Target: 0, Class: c, Status: 400})
		if s.CooldownUntil != nil || s.Circuit != "closed" || s.ConsecutiveFailures != 0 {
			t.Fatalf("%v cooled the target: %+v", c, s)
		}
	}
	// Mid-stream cuts count but do not cool until the threshold.
	for i := 1; i <= 4; i++ {
		s := e.report(&messages.AttemptFinished{Target: 0, Class: messages.Connect, MidStream: true})
		if s.CooldownUntil != nil || s.ConsecutiveFailures != i {
			t.Fatalf("mid-stream cut %d: %+v", i, s)
		}
	}
	s := e.report(&messages.AttemptFinished{Target: 0, Class: messages.Connect, MidStream: true})
	if s.Circuit != "open" || s.CooldownUntil == nil {
		t.Fatalf("fifth consecutive failure must open the circuit: %+v", s)
	}
}

func TestCircuitOpensProbesAndCloses(t *testing.T) {
	e := newBreakerEnv(t, Options{FailureThreshold: 3, BackoffBase: time.Second})
	start := e.clk.Now()
	var s Stats
	for i := 0; i < 3; i++ {
		s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.Capacity, Status: 500})
	}
	if s.Circuit != "open" || !s.CoolUntil.Equal(start.Add(4*time.Second)) {
		t.Fatalf("after 3 failures: %+v (%v)", s, s.CoolUntil.Sub(start))
	}
	e.clk.Advance(4 * time.Second)
	if st := CircuitState(s.Open, s.CoolUntil, e.clk.Now()); st != "half_open" {
		t.Fatalf("after the cooldown: %s", st)
	}
	// One probe at a time.
	if !e.h.TryProbe(0, e.clk.Now()) || e.h.TryProbe(0, e.clk.Now()) {
		t.Fatal("half-open must let exactly one probe through")
	}
	// The probe fails: open again with a longer backoff.
	s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.Capacity, Status: 503, Probe: true})
	if s.Circuit != "open" || !s.CoolUntil.Equal(e.clk.Now().Add(8*time.Second)) {
		t.Fatalf("failed probe: %+v %v", s, s.CoolUntil.Sub(e.clk.Now()))
	}
	e.clk.Advance(8 * time.Second)
	if !e.h.TryProbe(0, e.clk.Now()) {
		t.Fatal("the failed probe's claim was not released")
	}
	// A plain success (a request started before the circuit opened) does
	// not close it; the probe's success does.
	s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.OK, Status: 200})
	if !s.Open {
		t.Fatal("a non-probe success closed the circuit")
	}
	s = e.report(&messages.AttemptFinished{Target: 0, Class: messages.OK, Status: 200, Probe: true})
	if s.Open || s.Circuit != "closed" || s.CooldownUntil != nil || s.ConsecutiveFailures != 0 {
		t.Fatalf("successful probe: %+v", s)
	}
	// A stale claim is taken over after the probe timeout.
	if !e.h.TryProbe(1, e.clk.Now()) || e.h.TryProbe(1, e.clk.Now().Add(time.Minute)) || !e.h.TryProbe(1, e.clk.Now().Add(16*time.Minute)) {
		t.Fatal("probe claim timeout")
	}
}

func TestHardFailuresOpenAtOnce(t *testing.T) {
	e := newBreakerEnv(t, Options{HardCooldown: 5 * time.Minute})
	now := e.clk.Now()
	s := e.report(&messages.AttemptFinished{Target: 1, Class: messages.Quota, Status: 429, Reason: "insufficient_quota"})
	if s.Circuit != "open" || !s.CoolUntil.Equal(now.Add(5*time.Minute)) || s.CooldownReason != "insufficient_quota" {
		t.Fatalf("quota: %+v", s)
	}
	s = e.report(&messages.AttemptFinished{Target: 1, Class: messages.Auth, Status: 401})
	if !s.CoolUntil.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("second hard failure: %v", s.CoolUntil.Sub(now))
	}
	// The republish tick notices an expired cooldown without new reports.
	e.clk.Advance(11 * time.Minute)
	waitSnap(t, e.h, func(s *Snapshot) bool {
		return s.Targets[1].Circuit == "half_open" && s.Targets[1].CooldownUntil == nil
	})
}
