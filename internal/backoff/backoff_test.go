package backoff

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// TestSchedules: the schedules of the five users, at both ends of their
// jitter and in the middle.
func TestSchedules(t *testing.T) {
	breaker := Policy{Base: time.Second, Max: 30 * time.Second, Factor: 1.5, Jitter: Around(0.1)}
	poller := Policy{Base: 2 * time.Minute, Max: 10 * time.Minute, Factor: 2, Jitter: Around(0.2)}
	supervisor := Policy{Base: 100 * ms, Max: time.Second, Jitter: Below(0.25)}
	writer := Policy{Base: time.Second, Max: time.Minute}
	restarts := Policy{Base: 100 * ms, Max: 5 * time.Second, Factor: 2}
	for _, tc := range []struct {
		name string
		p    Policy
		r    float64
		want []time.Duration // for failures 1, 2, 3, ...
	}{
		{"breaker, no jitter", breaker, 0.5, []time.Duration{1000 * ms, 1500 * ms, 2250 * ms, 3375 * ms, 5062500 * time.Microsecond}},
		{"breaker, shortest", breaker, 0, []time.Duration{900 * ms, 1350 * ms, 2025 * ms}},
		{"breaker, capped then jittered", breaker, 0.5, []time.Duration{9: 30 * time.Second, 10: 30 * time.Second}},
		{"poller", poller, 0.5, []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}},
		{"poller, shortest", poller, 0, []time.Duration{96 * time.Second}},
		{"poller, longest", poller, 1, []time.Duration{144 * time.Second}},
		{"supervisor, no reduction", supervisor, 0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms}},
		{"supervisor, middle", supervisor, 0.5, []time.Duration{87500 * time.Microsecond, 175 * ms, 350 * ms, 700 * ms, 875 * ms}},
		{"supervisor, three quarters", supervisor, 0.75, []time.Duration{81250 * time.Microsecond, 162500 * time.Microsecond, 325 * ms, 650 * ms, 812500 * time.Microsecond}},
		{"writer: doubles to a minute, no jitter", writer, 0.9, []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}},
		{"actor restarts: doubles to 5 s, no jitter", restarts, 0.7, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}},
	} {
		for i, want := range tc.want {
			if want == 0 {
				continue // an index the case does not pin
			}
			if tc.name == "writer: doubles to a minute, no jitter" {
				want *= time.Second
			}
			if got := tc.p.Delay(i+1, tc.r); got != want {
				t.Errorf("%s: failure %d waits %v, want %v", tc.name, i+1, got, want)
			}
		}
	}
}

// TestDelayBounds: for any failure count and draw, the delay stays within
// the jitter's range around the capped delay, the capped delay never
// exceeds Max and never shrinks as failures go on.
func TestDelayBounds(t *testing.T) {
	for _, p := range []Policy{
		{Base: time.Second, Max: 30 * time.Second, Factor: 1.5, Jitter: Around(0.1)},
		{Base: time.Second, Max: time.Second / 2}, // Max below Base: Base
		{Base: time.Hour, Max: math.MaxInt64, Factor: 3},
		{Base: 7 * ms, Max: time.Minute, Factor: 0.5, Jitter: Below(0.25)}, // factor ≤ 1: 2
	} {
		prev := time.Duration(0)
		for n := -1; n < 200; n++ {
			c := p.Capped(n)
			if c > max(p.Max, p.Base) || c < prev || c <= 0 {
				t.Fatalf("%+v: failure %d capped delay %v after %v", p, n, c, prev)
			}
			prev = c
			for _, r := range []float64{0, 0.25, 0.999999} {
				d := p.Delay(n, r)
				lo, hi := float64(c), float64(c)
				if p.Jitter != (Jitter{}) {
					lo, hi = float64(c)*min(p.Jitter.From, p.Jitter.To), float64(c)*max(p.Jitter.From, p.Jitter.To)
				}
				if float64(d) < lo-1 || float64(d) > hi+1 {
					t.Fatalf("%+v: failure %d draw %v waits %v, outside [%v, %v]", p, n, r, d, time.Duration(lo), time.Duration(hi))
				}
			}
		}
	}
	if d := (Policy{Base: 7 * ms, Max: time.Minute, Factor: 0.5}).Capped(3); d != 28*ms {
		t.Fatalf("a factor ≤ 1 grows by 2: %v", d)
	}
}

// TestBackoffCountsAndResets: Failed counts consecutive failures and
// draws the jitter from Rand; Succeeded starts over at Base.
func TestBackoffCountsAndResets(t *testing.T) {
	draws := 0
	b := Backoff{Policy: Policy{Base: time.Second, Max: 4 * time.Second, Jitter: Around(0.2)},
		Rand: func() float64 { draws++; return 0.5 }}
	for i, want := range []time.Duration{1, 2, 4, 4} {
		if got := b.Failed(); got != want*time.Second || b.Last() != got || b.Failures() != i+1 {
			t.Fatalf("failure %d: waits %v (last %v, count %d), want %v", i+1, got, b.Last(), b.Failures(), want*time.Second)
		}
	}
	if draws != 4 {
		t.Fatalf("%d draws for 4 failures", draws)
	}
	b.Succeeded()
	if b.Failures() != 0 || b.Last() != 0 {
		t.Fatalf("after a success: %d failures, last %v", b.Failures(), b.Last())
	}
	if got := b.Failed(); got != time.Second {
		t.Fatalf("the first failure after a success waits %v, want the base", got)
	}
	// Without jitter no number is drawn; without Rand the default source
	// stays within the range.
	nj := Backoff{Policy: Policy{Base: time.Second, Max: time.Minute}, Rand: func() float64 { t.Fatal("drew for no jitter"); return 0 }}
	nj.Failed()
	def := Backoff{Policy: Policy{Base: time.Second, Max: time.Minute, Jitter: Around(0.1)}}
	for i := 0; i < 100; i++ {
		def.Succeeded()
		if d := def.Failed(); d < 900*ms || d > 1100*ms {
			t.Fatalf("default source: %v", d)
		}
	}
}
