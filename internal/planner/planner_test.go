package planner

import (
	"reflect"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSource serves fixed evidence and records the skips.
type fakeSource struct {
	ev    []Evidence
	skips map[int]Skip
	asked []int
}

func (s *fakeSource) Evidence(i int, _ time.Time, e *Evidence) {
	s.asked = append(s.asked, i)
	*e = s.ev[i]
}

func (s *fakeSource) Skipped(i int, why Skip) {
	if s.skips == nil {
		s.skips = map[int]Skip{}
	}
	s.skips[i] = why
}

// since0 is t0 + d, or the zero time (no deadline) for d = 0.
func since0(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return t0.Add(d)
}

func healthy() Evidence { return Evidence{Known: true, Weight: 1} }

func cooling(until time.Duration) Evidence {
	e := healthy()
	e.CoolUntil = t0.Add(until)
	return e
}

// TestRankDecisions: which candidates are eligible, in which order, why
// the others were skipped and when the earliest of them recovers.
func TestRankDecisions(t *testing.T) {
	open := healthy()
	open.Open, open.CoolUntil = true, t0.Add(30*time.Second)
	halfOpen := healthy()
	halfOpen.Open, halfOpen.CoolUntil = true, t0.Add(-time.Second)
	exhausted := healthy()
	exhausted.QuotaAware, exhausted.Quota, exhausted.QuotaRecovery = true, quota.StatusExhausted, t0.Add(20*time.Second)
	exhaustedUnknown := exhausted
	exhaustedUnknown.QuotaRecovery = time.Time{}
	approaching := healthy()
	approaching.QuotaAware, approaching.Quota = true, quota.StatusApproaching
	broke := healthy()
	broke.QuotaAware, broke.Budget, broke.BudgetEnd = true, routing.BudgetExhausted, t0.Add(45*time.Second)
	otherDialect := healthy()
	otherDialect.Unusable = true

	for _, tc := range []struct {
		name    string
		ev      []Evidence
		order   []int
		skips   map[int]Skip
		recover time.Duration // from t0; 0: none
		probe   []int
	}{
		{name: "all healthy: configured order", ev: []Evidence{healthy(), healthy(), healthy()}, order: []int{0, 1, 2}},
		{name: "unknown to the snapshot counts as healthy", ev: []Evidence{{Weight: 1}, healthy()}, order: []int{0, 1}},
		{name: "cooling target skipped, recovery known", ev: []Evidence{cooling(10 * time.Second), healthy()}, order: []int{1},
			skips: map[int]Skip{0: SkipCooling}, recover: 10 * time.Second},
		{name: "cooldown over: eligible again", ev: []Evidence{cooling(-time.Second), healthy()}, order: []int{0, 1}},
		{name: "circuit open until its cooldown", ev: []Evidence{open, healthy()}, order: []int{1},
			skips: map[int]Skip{0: SkipCircuit}, recover: 30 * time.Second},
		{name: "half open circuit: eligible, needs the probe", ev: []Evidence{halfOpen}, order: []int{0}, probe: []int{0}},
		{name: "quota exhausted: recovers at its reset", ev: []Evidence{exhausted, healthy()}, order: []int{1},
			skips: map[int]Skip{0: SkipExhausted}, recover: 20 * time.Second},
		{name: "quota exhausted without a reset: a minute assumed", ev: []Evidence{exhaustedUnknown}, order: nil,
			skips: map[int]Skip{0: SkipExhausted}, recover: time.Minute},
		{name: "approaching its limit: tried last", ev: []Evidence{approaching, healthy()}, order: []int{1, 0}},
		{name: "over its token budget: recovers at the window's end", ev: []Evidence{broke, healthy()}, order: []int{1},
			skips: map[int]Skip{0: SkipBudget}, recover: 45 * time.Second},
		{name: "wrong dialect: never eligible, never waited for, not counted", ev: []Evidence{otherDialect, healthy()}, order: []int{1}},
		{name: "earliest of several recoveries", ev: []Evidence{open, cooling(5 * time.Second), exhausted}, order: nil,
			skips: map[int]Skip{0: SkipCircuit, 1: SkipCooling, 2: SkipExhausted}, recover: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Plan
			p.Reset()
			p.Begin(len(tc.ev), t0, Limits{MaxAttempts: 3, MaxWait: time.Minute})
			src := &fakeSource{ev: tc.ev}
			p.Rank(src, len(tc.ev), t0, Order{})
			if got := p.Candidates(); !reflect.DeepEqual(append([]int(nil), got...), tc.order) && !(len(got) == 0 && len(tc.order) == 0) {
				t.Errorf("order %v, want %v", got, tc.order)
			}
			if !reflect.DeepEqual(src.skips, tc.skips) {
				t.Errorf("skips %v, want %v", src.skips, tc.skips)
			}
			var want time.Time
			if tc.recover != 0 {
				want = t0.Add(tc.recover)
			}
			if got := p.EarliestRecovery(); !got.Equal(want) {
				t.Errorf("earliest recovery %v, want %v", got, want)
			}
			for i := range tc.ev {
				if want := contains(tc.probe, i); p.NeedsProbe(i) != want {
					t.Errorf("candidate %d needs probe = %v, want %v", i, p.NeedsProbe(i), want)
				}
			}
		})
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestRankSkipsTried: a taken or refused candidate is not asked about
// again and not offered again.
func TestRankSkipsTried(t *testing.T) {
	var p Plan
	p.Reset()
	p.Begin(3, t0, Limits{MaxAttempts: 3, MaxWait: time.Minute})
	src := &fakeSource{ev: []Evidence{healthy(), healthy(), healthy()}}
	p.Rank(src, 3, t0, Order{})
	p.Take(0)
	p.Refuse(1, t0.Add(3*time.Second))
	src.asked = nil
	p.Rerank()
	p.Rank(src, 3, t0, Order{})
	if !reflect.DeepEqual(src.asked, []int{2}) {
		t.Errorf("asked about %v, want only the untried [2]", src.asked)
	}
	if got := p.Candidates(); !reflect.DeepEqual(got, []int{2}) {
		t.Errorf("order %v, want [2]", got)
	}
	if p.Attempts() != 1 || p.Last() != 0 {
		t.Errorf("attempts %d last %d, want 1 and 0", p.Attempts(), p.Last())
	}
}

// TestRankRoundRobin: round-robin order follows the cursor through the
// schedule; one candidate ignores it.
func TestRankRoundRobin(t *testing.T) {
	ev := []Evidence{healthy(), healthy()}
	firsts := map[int]int{}
	for cursor := uint64(0); cursor < 4; cursor++ {
		var p Plan
		p.Reset()
		p.Begin(2, t0, Limits{MaxAttempts: 3, MaxWait: 0})
		p.Rank(&fakeSource{ev: ev}, 2, t0, Order{RoundRobin: true, Cursor: cursor, Schedule: []uint16{0, 1}})
		firsts[p.Candidates()[0]]++
		if len(p.Candidates()) != 2 {
			t.Fatalf("order %v: both must be offered", p.Candidates())
		}
	}
	if firsts[0] != 2 || firsts[1] != 2 {
		t.Errorf("first picks %v, want each twice over four requests", firsts)
	}
}

// TestWaitDecisions: waiting for a recovering target happens only when
// the recovery comes within the wait budget and the caller's deadline,
// and the recovered target would usually answer before that deadline.
func TestWaitDecisions(t *testing.T) {
	slow := cooling(10 * time.Second)
	slow.TTFBMillis = 8000 // answers 8 s after recovering
	for _, tc := range []struct {
		name     string
		ev       Evidence
		maxWait  time.Duration
		deadline time.Duration // from t0; 0: none
		now      time.Duration
		wait     bool
		d        time.Duration
	}{
		{name: "recovery inside the wait budget", ev: cooling(10 * time.Second), maxWait: 30 * time.Second, wait: true, d: 10 * time.Second},
		{name: "recovery at the budget's end still waits", ev: cooling(30 * time.Second), maxWait: 30 * time.Second, wait: true, d: 30 * time.Second},
		{name: "recovery beyond the wait budget", ev: cooling(31 * time.Second), maxWait: 30 * time.Second},
		{name: "no wait budget", ev: cooling(time.Second), maxWait: 0},
		{name: "caller's deadline before the recovery", ev: cooling(10 * time.Second), maxWait: time.Minute, deadline: 5 * time.Second},
		{name: "recovery before the deadline, answer after it", ev: slow, maxWait: time.Minute, deadline: 15 * time.Second},
		{name: "recovery and answer before the deadline", ev: slow, maxWait: time.Minute, deadline: 20 * time.Second, wait: true, d: 10 * time.Second},
		{name: "recovery already due: re-rank without sleeping", ev: cooling(10 * time.Second), maxWait: time.Minute, now: 12 * time.Second, wait: true, d: -2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Plan
			p.Reset()
			deadline := since0(tc.deadline)
			p.Begin(1, t0, Limits{MaxAttempts: 3, MaxWait: tc.maxWait, Deadline: deadline})
			p.Rank(&fakeSource{ev: []Evidence{tc.ev}}, 1, t0, Order{})
			d, ok := p.Wait(t0.Add(tc.now))
			if ok != tc.wait || d != tc.d {
				t.Fatalf("Wait = %v, %v; want %v, %v", d, ok, tc.d, tc.wait)
			}
			if ok && p.Ranked() {
				t.Error("a wait must make the next look re-rank")
			}
		})
	}
}

// TestWaitRounds: waits are bounded per request.
func TestWaitRounds(t *testing.T) {
	var p Plan
	p.Reset()
	p.Begin(1, t0, Limits{MaxAttempts: 3, MaxWait: time.Hour})
	src := &fakeSource{ev: []Evidence{cooling(time.Second)}}
	n := 0
	for ; n < 2*MaxWaits; n++ {
		p.Rank(src, 1, t0, Order{})
		if _, ok := p.Wait(t0); !ok {
			break
		}
	}
	if n != MaxWaits {
		t.Errorf("waited %d rounds, want %d", n, MaxWaits)
	}
}

// TestRefusal: every target out: Retry-After is the whole seconds until
// the earliest recovery, and a retry is pointless when that is over a
// minute away or unknown.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ev      []Evidence
		retry   int
		noRetry bool
		outage  bool
	}{
		{name: "cooling 2.1s: 3s", ev: []Evidence{cooling(2100 * time.Millisecond)}, retry: 3, outage: true},
		{name: "earliest of two", ev: []Evidence{cooling(50 * time.Second), cooling(7 * time.Second)}, retry: 7, outage: true},
		{name: "two minutes away: pointless", ev: []Evidence{cooling(2 * time.Minute)}, retry: 120, noRetry: true, outage: true},
		{name: "nothing known recovers: 1s, pointless", ev: []Evidence{{Unusable: true, Weight: 1}}, retry: 1, noRetry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Plan
			p.Reset()
			p.Begin(len(tc.ev), t0, Limits{MaxAttempts: 3, MaxWait: 0})
			p.Rank(&fakeSource{ev: tc.ev}, len(tc.ev), t0, Order{})
			if len(p.Candidates()) != 0 {
				t.Fatalf("candidates %v, want none", p.Candidates())
			}
			if got := p.Refusal(t0); got != (Refusal{RetryAfter: tc.retry, NoRetry: tc.noRetry, Outage: tc.outage}) {
				t.Errorf("refusal %+v, want retry %d noRetry %v", got, tc.retry, tc.noRetry)
			}
		})
	}
}

// TestRetryAndFinal: one retry of the last target after a transient
// failure without a hint; the last error's advice.
func TestRetryAndFinal(t *testing.T) {
	begin := func() *Plan {
		p := &Plan{}
		p.Reset()
		p.Begin(1, t0, Limits{MaxAttempts: 3, MaxWait: time.Minute, Deadline: t0.Add(10 * time.Second)})
		p.Rank(&fakeSource{ev: []Evidence{healthy()}}, 1, t0, Order{})
		return p
	}
	p := begin()
	if p.Retry(messages.Capacity, t0) != -1 {
		t.Error("retry before any attempt")
	}
	p.Take(0)
	if p.Retry(messages.Auth, t0) != -1 {
		t.Error("retry after a non-transient failure")
	}
	if p.Retry(messages.Capacity, t0.Add(10*time.Second)) != -1 {
		t.Error("retry after the caller's deadline")
	}
	if p.Retry(messages.Capacity, t0) != 0 {
		t.Error("no retry after a transient failure")
	}
	if p.Retry(messages.Capacity, t0) != -1 {
		t.Error("a second retry")
	}

	p = begin()
	p.Take(0)
	obs := &messages.QuotaObservation{HasRetryAfter: true, RetryAfter: 90 * time.Second}
	p.Learn(messages.RateLimit, obs, 0, t0)
	if p.Retry(messages.RateLimit, t0) != -1 {
		t.Error("retry although the provider said when to come back")
	}
	if f := p.Final(429, messages.RateLimit, t0); f != (Final{NoRetry: true, RetryAfter: 90}) {
		t.Errorf("final after a 90s Retry-After: %+v", f)
	}

	p = begin()
	p.Take(0)
	p.Learn(messages.RateLimit, nil, 4*time.Second, t0) // hint from the body
	if f := p.Final(429, messages.RateLimit, t0); f != (Final{RetryAfter: 4}) {
		t.Errorf("final after a 4s hint: %+v", f)
	}
	p = begin()
	p.Take(0)
	p.Learn(messages.Request, &messages.QuotaObservation{HasRetryAfter: true, RetryAfter: time.Second}, 0, t0)
	if !p.EarliestRecovery().IsZero() {
		t.Error("a caller-side failure taught a recovery")
	}
	if f := p.Final(400, messages.Request, t0); f != (Final{NoRetry: true}) {
		t.Errorf("final after a 400: %+v", f)
	}
	// A provider failure with nothing known of its recovery: retry after
	// a second (a 5xx passed through carries one, as does a failure no
	// provider answered).
	if f := p.Final(503, messages.Capacity, t0); f != (Final{RetryAfter: 1}) {
		t.Errorf("final after a 503: %+v", f)
	}
	if f := p.Final(0, messages.Connect, t0); f != (Final{RetryAfter: 1}) {
		t.Errorf("final after refused connections: %+v", f)
	}
	p.Learn(messages.Capacity, &messages.QuotaObservation{HasRetryAfter: true, RetryAfter: 7 * time.Second}, 0, t0)
	if f := p.Final(529, messages.Capacity, t0); f != (Final{RetryAfter: 7}) {
		t.Errorf("final after a 529 that said when: %+v", f)
	}
}

// TestRefusalTellsAnOutageFromALimit: with every candidate out because
// it failed, the refusal is an outage; with any out for a rate limit, a
// quota or a token budget, it is not.
func TestRefusalTellsAnOutageFromALimit(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		ev     []Evidence
		outage bool
	}{
		{"all failed", []Evidence{{Known: true, CoolUntil: t0.Add(5 * time.Second)}, {Known: true, Open: true, CoolUntil: t0.Add(9 * time.Second)}}, true},
		{"one rate limited", []Evidence{{Known: true, CoolUntil: t0.Add(5 * time.Second)}, {Known: true, CoolUntil: t0.Add(5 * time.Second), RateLimited: true}}, false},
		{"quota exhausted", []Evidence{{Known: true, CoolUntil: t0.Add(5 * time.Second)}, {QuotaAware: true, Quota: quota.StatusExhausted}}, false},
		{"over budget", []Evidence{{QuotaAware: true, Budget: routing.BudgetInsufficient, BudgetEnd: t0.Add(time.Second)}}, false},
	}
	for _, c := range cases {
		var p Plan
		p.Begin(len(c.ev), t0, Limits{MaxAttempts: 3})
		p.Rank(fixedSource(c.ev), len(c.ev), t0, Order{})
		if r := p.Refusal(t0); r.Outage != c.outage || r.RetryAfter < 1 {
			t.Errorf("%s: %+v, want outage %v", c.name, r, c.outage)
		}
	}
}

// fixedSource gives fixed evidence per candidate.
type fixedSource []Evidence

func (s fixedSource) Evidence(i int, _ time.Time, e *Evidence) { *e = s[i] }
func (fixedSource) Skipped(int, Skip)                          {}

// TestWaiter: a wait ends when its time is up, early when the targets'
// state changes, and at once when the caller leaves or has left.
func TestWaiter(t *testing.T) {
	var w Waiter
	if end, _ := w.Wait(time.Millisecond, nil, &testutil.Cancel{}); end != WaitElapsed {
		t.Errorf("timer wait ended %v, want elapsed", end)
	}
	changed := make(chan struct{})
	close(changed)
	if end, _ := w.Wait(time.Hour, changed, &testutil.Cancel{}); end != WaitChanged {
		t.Errorf("wait on a change ended %v, want changed", end)
	}
	c := &testutil.Cancel{}
	go c.Fire()
	if end, _ := w.Wait(time.Hour, nil, c); end != WaitCancelled {
		t.Errorf("wait of a leaving caller ended %v, want cancelled", end)
	}
	if end, _ := w.Wait(time.Hour, nil, c); end != WaitCancelled {
		t.Errorf("wait of a gone caller ended %v, want cancelled", end)
	}
	// The waiter is reusable after every kind of end.
	if end, _ := w.Wait(time.Millisecond, nil, &testutil.Cancel{}); end != WaitElapsed {
		t.Errorf("reused waiter ended %v, want elapsed", end)
	}
}

// TestMore: the request gives up at the attempt cap or once the caller's
// deadline has passed, whichever comes first.
func TestMore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int
		deadline time.Duration // from t0; 0: none
		taken    int
		at       time.Duration
		more     bool
	}{
		{name: "fresh", max: 3, more: true},
		{name: "under the cap", max: 3, taken: 2, more: true},
		{name: "at the cap", max: 3, taken: 3},
		{name: "no attempts allowed", max: 0},
		{name: "before the deadline", max: 3, deadline: time.Second, at: 999 * time.Millisecond, more: true},
		{name: "at the deadline", max: 3, deadline: time.Second, at: time.Second},
		{name: "no deadline, much later", max: 3, at: time.Hour, more: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Plan
			p.Reset()
			deadline := since0(tc.deadline)
			p.Begin(3, t0, Limits{MaxAttempts: tc.max, Deadline: deadline})
			for i := range tc.taken {
				p.Take(i)
			}
			if got := p.More(t0.Add(tc.at)); got != tc.more {
				t.Errorf("More = %v, want %v", got, tc.more)
			}
		})
	}
}
