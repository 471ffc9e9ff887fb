package targets

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestBackoff(t *testing.T) {
	cases := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 1500 * time.Millisecond}, {3, 2250 * time.Millisecond}, {4, 3375 * time.Millisecond},
		{10, 30 * time.Second}, {100, 30 * time.Second}}
	for _, c := range cases {
		o := Options{}
		o.defaults()
		if got := o.backoff().Capped(c.n); got != c.want {
			t.Errorf("backoff after incident %d = %v, want %v", c.n, got, c.want)
		}
	}
}

type breakerEnv struct {
	t   *testing.T
	h   *Handle
	clk *clock.Fake
	sys *actor.ActorSystem
	// inbox subscribes to the actor's observations and cooldowns.
	inbox *testutil.Inbox
}

// observed are the targets whose headers the actor sent its observation
// subscriber so far, in order.
func (e *breakerEnv) observed() []int {
	var out []int
	for _, m := range testutil.Of[*messages.QuotaObserved](e.t, e.inbox) {
		out = append(out, m.Target)
	}
	return out
}

func newBreakerEnv(t *testing.T, o Options) *breakerEnv {
	t.Helper()
	sys := testutil.NewActorSystem()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := &breakerEnv{t: t, clk: clk, sys: sys}
	o.Rand = func() float64 { return 0.5 } // jitter factor exactly 1
	h, err := SpawnWith(sys, []string{"p/a/m", "p/b/m"}, clk, o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	e.inbox = testutil.NewInbox(t, sys)
	h.SubscribeObservations(e.inbox.PID)
	h.cluster.Store(&Cluster{h: h, pid: e.inbox.PID}) // the inbox stands for the cooldowns actor
	t.Cleanup(func() { h.cluster.Store(nil) })        // before the inbox stops: Stop must not stop it again
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

// at returns an attempt report of target that started at started.
func at(target int, class messages.FailureClass, status int, started time.Time) *messages.AttemptFinished {
	return &messages.AttemptFinished{Target: target, Class: class, Status: status, Started: started}
}

func TestCooldownFollowsTheProviderHint(t *testing.T) {
	e := newBreakerEnv(t, Options{})
	now := e.clk.Now()
	sent := now.Add(-time.Second)
	// A 429 with Retry-After: 5 cools for exactly 5 s and opens the circuit.
	m := at(0, messages.RateLimit, 429, sent)
	m.Reason, m.Quota = "rate_limit", retryAfter(5*time.Second)
	s := e.report(m)
	if !s.CoolUntil.Equal(now.Add(5*time.Second)) || s.Circuit != "open" || s.CooldownReason != "rate_limit" || s.Incidents != 1 {
		t.Fatalf("after 429 RA 5: %+v", s)
	}
	// Another answer of the same incident with a shorter hint does not
	// shorten it; the reset of an exhausted dimension extends it.
	m = at(0, messages.RateLimit, 429, sent)
	m.Quota = retryAfter(time.Second)
	if s = e.report(m); !s.CoolUntil.Equal(now.Add(5*time.Second)) || s.Incidents != 1 {
		t.Fatalf("shortened or counted twice: %v, incidents %d", s.CoolUntil.Sub(now), s.Incidents)
	}
	obs := &messages.QuotaObservation{N: 1}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasRemaining | messages.HasReset, Remaining: 0, ResetAt: now.Add(30 * time.Second)}
	m = at(0, messages.RateLimit, 429, sent)
	m.Quota = obs
	if s = e.report(m); !s.CoolUntil.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("exhausted reset ignored: %v", s.CoolUntil.Sub(now))
	}
	// Without a hint: the first incident's backoff, 1 s.
	if s = e.report(at(1, messages.Capacity, 503, sent)); !s.CoolUntil.Equal(now.Add(time.Second)) {
		t.Fatalf("first backoff %v", s.CoolUntil.Sub(now))
	}
	// A body retry hint (Gemini retryDelay) counts like Retry-After.
	m = at(1, messages.RateLimit, 429, sent)
	m.RetryAfter = 34 * time.Second
	if s = e.report(m); !s.CoolUntil.Equal(now.Add(34 * time.Second)) {
		t.Fatalf("body hint ignored: %v", s.CoolUntil.Sub(now))
	}
	if got := e.observed(); len(got) != 3 || got[0] != 0 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("observations forwarded for targets %v, want target 0's three", got)
	}
}

// TestConcurrentFailuresAreOneIncident is the hang of the issue: nine
// requests in flight together time out; that is one incident, cooled for
// the first backoff, not nine consecutive failures.
func TestConcurrentFailuresAreOneIncident(t *testing.T) {
	e := newBreakerEnv(t, Options{})
	sent := e.clk.Now()
	e.clk.Advance(10 * time.Second) // the hang
	first := e.clk.Now()
	var s Stats
	for i := 0; i < 9; i++ {
		s = e.report(at(0, messages.Timeout, 0, sent.Add(time.Duration(i)*time.Millisecond)))
		e.clk.Advance(10 * time.Millisecond)
	}
	if s.Incidents != 1 || !s.CoolUntil.Equal(first.Add(time.Second)) || s.ConsecutiveFailures != 9 {
		t.Fatalf("nine concurrent timeouts: incidents %d, cooled %v: %+v", s.Incidents, s.CoolUntil.Sub(first), s)
	}
	// 21 concurrent 429s with Retry-After: 2 cool for 2 s after the last.
	sent = e.clk.Now()
	e.clk.Advance(time.Millisecond)
	for i := 0; i < 21; i++ {
		m := at(1, messages.RateLimit, 429, sent)
		m.Quota = retryAfter(2 * time.Second)
		s = e.report(m)
		e.clk.Advance(5 * time.Millisecond)
	}
	last := e.clk.Now().Add(-5 * time.Millisecond)
	if s.Incidents != 1 || !s.CoolUntil.Equal(last.Add(2*time.Second)) {
		t.Fatalf("21 × 429 RA 2: incidents %d, cooled %v after the last", s.Incidents, s.CoolUntil.Sub(last))
	}
}

// TestStormRecovery drives a 10 s outage of the only target with one probe
// after each cooldown, as the transport does, and checks when the first
// probe after the recovery goes out, at both ends of the jitter.
func TestStormRecovery(t *testing.T) {
	for _, jitter := range []float64{0, 0.999} {
		for _, storm := range []struct {
			name  string
			class messages.FailureClass
			hint  time.Duration
		}{{"503", messages.Capacity, 0}, {"timeout", messages.Timeout, 0}, {"429 RA 2", messages.RateLimit, 2 * time.Second}} {
			e := newBreakerEnv(t, Options{Rand: func() float64 { return jitter }})
			e.h.opts.Rand = func() float64 { return jitter }
			start := e.clk.Now()
			recovery := start.Add(10 * time.Second)
			s := e.report(at(0, storm.class, 503, start.Add(-time.Millisecond)))
			for i := 0; ; i++ {
				e.clk.Set(s.CoolUntil)
				if !e.h.TryProbe(0, e.clk.Now()) {
					t.Fatalf("%s: probe not available at the end of the cooldown", storm.name)
				}
				if !e.clk.Now().Before(recovery) {
					break // this probe succeeds
				}
				m := at(0, storm.class, 503, e.clk.Now())
				m.Probe = true
				if storm.hint > 0 {
					m.Quota = retryAfter(storm.hint)
				}
				s = e.report(m)
				if i > 20 {
					t.Fatalf("%s: more than 20 probes in a 10 s storm", storm.name)
				}
			}
			late := e.clk.Now().Sub(recovery)
			if late > 5*time.Second {
				t.Errorf("%s (jitter %.1f): first probe %v after the recovery, want ≤ 5 s", storm.name, jitter, late)
			}
			m := at(0, messages.OK, 200, e.clk.Now())
			m.Probe = true
			if s = e.report(m); s.Circuit != "closed" || s.Incidents != 0 || s.CooldownUntil != nil {
				t.Fatalf("%s: the probe's success did not close the circuit: %+v", storm.name, s)
			}
		}
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
	if s.Circuit != "open" || s.CooldownUntil == nil || s.Incidents != 1 {
		t.Fatalf("fifth consecutive cut must be an incident: %+v", s)
	}
}

func TestCircuitOpensProbesAndCloses(t *testing.T) {
	e := newBreakerEnv(t, Options{BackoffBase: time.Second})
	start := e.clk.Now()
	s := e.report(at(0, messages.Capacity, 500, start.Add(-time.Second)))
	if s.Circuit != "open" || !s.CoolUntil.Equal(start.Add(time.Second)) {
		t.Fatalf("after a failure: %+v (%v)", s, s.CoolUntil.Sub(start))
	}
	e.clk.Advance(time.Second)
	if st := CircuitState(s.Open, s.CoolUntil, e.clk.Now()); st != "half_open" {
		t.Fatalf("after the cooldown: %s", st)
	}
	// One probe at a time.
	if !e.h.TryProbe(0, e.clk.Now()) || e.h.TryProbe(0, e.clk.Now()) {
		t.Fatal("half-open must let exactly one probe through")
	}
	// The probe fails: a second incident, a longer backoff.
	m := at(0, messages.Capacity, 503, e.clk.Now())
	m.Probe = true
	s = e.report(m)
	if s.Circuit != "open" || s.Incidents != 2 || !s.CoolUntil.Equal(e.clk.Now().Add(1500*time.Millisecond)) {
		t.Fatalf("failed probe: %+v %v", s, s.CoolUntil.Sub(e.clk.Now()))
	}
	opened := e.clk.Now()
	e.clk.Advance(1500 * time.Millisecond)
	if !e.h.TryProbe(0, e.clk.Now()) {
		t.Fatal("the failed probe's claim was not released")
	}
	// A success of a request sent before the incident opened does not
	// close it; the probe's success does.
	s = e.report(at(0, messages.OK, 200, opened.Add(-time.Millisecond)))
	if !s.Open {
		t.Fatal("a success of an attempt older than the incident closed the circuit")
	}
	m = at(0, messages.OK, 200, e.clk.Now())
	m.Probe = true
	s = e.report(m)
	if s.Open || s.Circuit != "closed" || s.CooldownUntil != nil || s.ConsecutiveFailures != 0 || s.Incidents != 0 {
		t.Fatalf("successful probe: %+v", s)
	}
	// Any success of an attempt sent after the incident opened also closes
	// it: the provider answers again.
	s = e.report(at(0, messages.Capacity, 503, e.clk.Now().Add(-time.Millisecond)))
	if !s.Open {
		t.Fatal("not reopened")
	}
	e.clk.Advance(10 * time.Millisecond)
	if s = e.report(at(0, messages.OK, 200, e.clk.Now())); s.Open {
		t.Fatalf("a success sent after the incident did not close it: %+v", s)
	}
	// A stale claim is taken over after the probe timeout.
	if !e.h.TryProbe(1, e.clk.Now()) || e.h.TryProbe(1, e.clk.Now().Add(time.Minute)) || !e.h.TryProbe(1, e.clk.Now().Add(16*time.Minute)) {
		t.Fatal("probe claim timeout")
	}
}

func TestHardFailuresOpenAtOnce(t *testing.T) {
	e := newBreakerEnv(t, Options{HardCooldown: 5 * time.Minute})
	now := e.clk.Now()
	m := at(1, messages.Quota, 429, now.Add(-time.Second))
	m.Reason = "insufficient_quota"
	s := e.report(m)
	if s.Circuit != "open" || !s.CoolUntil.Equal(now.Add(5*time.Minute)) || s.CooldownReason != "insufficient_quota" {
		t.Fatalf("quota: %+v", s)
	}
	s = e.report(at(1, messages.Auth, 401, now))
	if !s.CoolUntil.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("second hard failure: %v", s.CoolUntil.Sub(now))
	}
	// The republish tick notices an expired cooldown without new reports.
	e.clk.Advance(11 * time.Minute)
	waitSnap(t, e.h, func(s *Snapshot) bool {
		return s.Targets[1].Circuit == "half_open" && s.Targets[1].CooldownUntil == nil
	})
}

// TestPeerCooldown: a failure seen here is sent to the cooldowns actor
// (what cluster mode tells the other nodes), with the target's id and
// name; a cooldown a peer reported opens
// the circuit here until its end without counting an incident or being
// reported again, never shortens a longer local one, and this node's own
// probe closes it afterwards.
func TestPeerCooldown(t *testing.T) {
	e := newBreakerEnv(t, Options{})
	now := e.clk.Now()
	m := at(0, messages.RateLimit, 429, now.Add(-time.Second))
	m.Reason, m.Quota = "rate_limit", retryAfter(20*time.Second)
	e.report(m)
	got := testutil.Of[*cooledDown](t, e.inbox)
	if len(got) != 1 || got[0].target != 0 || got[0].name != "p/a/m" || !got[0].until.Equal(now.Add(20*time.Second)) || got[0].reason != "rate_limit" {
		t.Fatalf("the cooldowns actor was told %+v", got)
	}

	// Target 1 cools on a peer's word.
	e.h.PeerCooldown(1, now.Add(10*time.Second), "peer: overloaded")
	s := waitSnap(t, e.h, func(s *Snapshot) bool { return s.Targets[1].Open }).Targets[1]
	if s.Circuit != "open" || !s.CoolUntil.Equal(now.Add(10*time.Second)) || s.CooldownReason != "peer: overloaded" || s.Incidents != 0 {
		t.Fatalf("after a peer's cooldown: %+v", s)
	}
	// A shorter peer cooldown does not cut the local one of target 0.
	e.h.PeerCooldown(0, now.Add(time.Second), "peer: short")
	e.h.PeerCooldown(1, now.Add(10*time.Second), "peer: again") // a no-op, then a barrier
	waitSnap(t, e.h, func(s *Snapshot) bool { return true })
	if s := e.report(at(1, messages.OK, 200, now)); s.Open {
		// a success of an attempt sent after the cooldown began closes it
		t.Fatalf("a success after a peer's cooldown left it open: %+v", s)
	}
	if s := e.h.Snapshot().Targets[0]; !s.CoolUntil.Equal(now.Add(20*time.Second)) || s.CooldownReason != "rate_limit" {
		t.Fatalf("a shorter peer cooldown changed the local one: %+v", s)
	}
	if told := testutil.Of[*cooledDown](t, e.inbox); len(told) != 1 {
		t.Fatalf("peer cooldowns were reported again: %+v", told)
	}
}
