package routing

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rendezvous"
)

func base() Candidate {
	return Candidate{ProviderID: "p", ModelID: "m", CapabilityScore: 1, HealthScore: 1, Quota: quota.StatusHealthy}
}

func TestScoreTable(t *testing.T) {
	cases := []struct {
		name     string
		mod      func(*Candidate)
		score    float64
		eligible bool
	}{
		{"baseline (preference defaults to 0.5)", func(c *Candidate) {}, 0.5, true},
		{"full preference", func(c *Candidate) { c.ModelPreference = Some(1) }, 1, true},
		{"approaching limit", func(c *Candidate) { c.Quota = quota.StatusApproaching }, 0.325, true},
		{"unavailable quota", func(c *Candidate) { c.Quota = quota.StatusUnavailable }, 0.45, true},
		{"unknown quota is neutral", func(c *Candidate) { c.Quota = quota.StatusUnknown }, 0.5, true},
		{"exhausted quota", func(c *Candidate) { c.Quota = quota.StatusExhausted }, 0, false},
		{"allocation warn", func(c *Candidate) { c.Allocation = AllocationWarn }, 0.425, true},
		{"allocation deny", func(c *Candidate) { c.Allocation = AllocationDeny }, 0, false},
		{"half-open circuit", func(c *Candidate) { c.Circuit = CircuitHalfOpen }, 0.25, true},
		{"open circuit", func(c *Candidate) { c.Circuit = CircuitOpen }, 0, false},
		{"latency 1s", func(c *Candidate) { c.LatencyMs = Some(1000) }, 0.49, true},
		{"latency floor", func(c *Candidate) { c.LatencyMs = Some(45000) }, 0.2, true},
		{"latency NaN ignored", func(c *Candidate) { c.LatencyMs = Some(math.NaN()) }, 0.5, true},
		{"error rate", func(c *Candidate) { c.ErrorRate = Some(0.1) }, 0.45, true},
		{"health NaN falls back to 0.5", func(c *Candidate) { c.HealthScore = math.NaN() }, 0.25, true},
		{"capability clamps", func(c *Candidate) { c.CapabilityScore = 7 }, 0.5, true},
		{"no capability", func(c *Candidate) { c.CapabilityScore = 0 }, 0, false},
		{"cost preference", func(c *Candidate) { c.CostPreference = Some(0.3) }, 0.15, true},
		{"rounding to six decimals", func(c *Candidate) { c.LatencyMs = Some(1); c.ErrorRate = Some(1.0 / 3) }, 0.333327, true},
		{"cooling keeps score, loses eligibility", func(c *Candidate) { c.Cooling = true }, 0.5, false},
		{"unaffordable", func(c *Candidate) { c.Budget = BudgetInsufficient }, 0.5, false},
		{"no ledger limit is affordable", func(c *Candidate) { c.Budget = BudgetUnconfigured }, 0.5, true},
	}
	for _, tc := range cases {
		c := base()
		tc.mod(&c)
		s, e := Score(&c)
		if s != tc.score || e != tc.eligible {
			t.Errorf("%s: score %v eligible %v, want %v %v", tc.name, s, e, tc.score, tc.eligible)
		}
	}
}

func TestReasons(t *testing.T) {
	c := base()
	c.CapabilityScore = 0.7
	c.Allocation = AllocationWarn
	c.HealthScore = 0.5
	c.Circuit = CircuitHalfOpen
	c.Quota = quota.StatusUnknown
	c.LatencyMs = Some(123.4)
	c.ErrorRate = Some(0.256)
	want := []string{"partial capability match", "allocation permitted with warning", "provider health degraded",
		"circuit half_open", "quota state unknown but not exhausted", "latency 123ms", "26% recent errors"}
	if got := Explain(&c).Reasons; !reflect.DeepEqual(got, want) {
		t.Fatalf("reasons %q", got)
	}
	c = base()
	c.Quota = quota.StatusApproaching
	c.Cooling = true
	c.Budget = BudgetExhausted
	want = []string{"capability match", "allocation permitted", "provider healthy", "circuit closed", "quota approaching_limit",
		"cooling down after a failure", "token budget exhausted"}
	if got := Explain(&c).Reasons; !reflect.DeepEqual(got, want) {
		t.Fatalf("reasons %q", got)
	}
}

func TestRankIsStableAndSelectsFirstEligible(t *testing.T) {
	deny := base()
	deny.ProviderID, deny.Allocation = "denied", AllocationDeny
	allow := base()
	allow.ProviderID = "allowed"
	// The reference's regression: deny then allow → the allowed one.
	ranked, sel := Rank([]Candidate{deny, allow})
	if sel != 0 || ranked[sel].ProviderID != "allowed" || ranked[1].ProviderID != "denied" {
		t.Fatalf("ranked %+v selected %d", ranked, sel)
	}
	a, b, c := base(), base(), base()
	a.ProviderID, b.ProviderID, c.ProviderID = "a", "b", "c"
	c.Quota = quota.StatusExhausted
	ranked, sel = Rank([]Candidate{a, b, c})
	if ranked[0].ProviderID != "a" || ranked[1].ProviderID != "b" || sel != 0 {
		t.Fatalf("equal scores must keep input order: %+v", ranked)
	}
	// A higher-scored but ineligible candidate ranks first and is skipped.
	x := base()
	x.ProviderID, x.ModelPreference, x.Cooling = "x", Some(1), true
	ranked, sel = Rank([]Candidate{a, x})
	if ranked[0].ProviderID != "x" || sel != 1 {
		t.Fatalf("ineligible first: %+v sel %d", ranked, sel)
	}
	if _, sel := Rank([]Candidate{c}); sel != -1 {
		t.Fatal("selected an exhausted candidate")
	}
}

func TestPriorityOrder(t *testing.T) {
	ts := []Live{
		{Eligible: true, Demoted: true, Score: 0.3},
		{Eligible: false, Score: 0},
		{Eligible: true, Score: 0.5},
		{Eligible: true, Score: 0.4},
	}
	if got := Priority(ts, nil); !reflect.DeepEqual(got, []int{2, 3, 0}) {
		t.Fatalf("priority %v", got)
	}
	if got := Priority([]Live{{}, {}}, nil); len(got) != 0 {
		t.Fatalf("no eligible: %v", got)
	}
}

func TestRoundRobinWeightsByScore(t *testing.T) {
	ts := []Live{
		{Eligible: true, Score: 0.5, Weight: 1},
		{Eligible: true, Score: 0.5, Weight: 3},
		{Eligible: false, Score: 0.5, Weight: 1},
		{Eligible: true, Score: 0.25, Weight: 2},
	}
	// Expected shares: 0.5 : 1.5 : 0 : 0.5 → 20 %, 60 %, 0 %, 20 %.
	counts := make([]int, len(ts))
	const n = 10000
	var buf []int
	for i := uint64(0); i < n; i++ {
		buf = RoundRobin(ts, i, SmoothSchedule([]int{1, 3, 1, 2}), buf[:0])
		if len(buf) != 3 {
			t.Fatalf("order %v", buf)
		}
		counts[buf[0]]++
		// The tail is the other eligible targets by score.
		seen := map[int]bool{}
		for _, x := range buf {
			if x == 2 || seen[x] {
				t.Fatalf("order %v", buf)
			}
			seen[x] = true
		}
	}
	for i, want := range []float64{0.2, 0.6, 0, 0.2} {
		if got := float64(counts[i]) / n; math.Abs(got-want) > 0.01 {
			t.Fatalf("target %d got share %.3f, want %.2f (%v)", i, got, want, counts)
		}
	}
	// Two equal targets alternate closely: never more than two in a row.
	eq := []Live{{Eligible: true, Score: 1, Weight: 1}, {Eligible: true, Score: 1, Weight: 1}}
	run, last := 0, -1
	for i := uint64(0); i < 1000; i++ {
		f := RoundRobin(eq, i, nil, nil)[0]
		if f == last {
			run++
		} else {
			run = 1
		}
		last = f
		if run > 2 {
			t.Fatalf("run of %d at %d", run, i)
		}
	}
	if got := RoundRobin([]Live{{}, {}}, 5, nil, nil); len(got) != 0 {
		t.Fatalf("no eligible: %v", got)
	}
}

func TestRoundRobinRotatesExactlyWhileScoresAreAlike(t *testing.T) {
	ts := []Live{{Eligible: true, Score: 1, Weight: 2}, {Eligible: true, Score: 0.995, Weight: 1}}
	sched := SmoothSchedule([]int{2, 1})
	var got []int
	for i := uint64(0); i < 6; i++ {
		got = append(got, RoundRobin(ts, i, sched, nil)[0])
	}
	if want := []int{0, 1, 0, 0, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("rotation %v, want %v", got, want)
	}
	// An ineligible target's turns go to the next in the schedule.
	ts[1].Eligible = false
	for i := uint64(0); i < 3; i++ {
		if f := RoundRobin(ts, i, sched, nil)[0]; f != 0 {
			t.Fatalf("turn %d went to %d", i, f)
		}
	}
}

func TestSmoothSchedule(t *testing.T) {
	for _, tc := range []struct {
		w    []int
		want []uint16
	}{
		{[]int{2, 1}, []uint16{0, 1, 0}},
		{[]int{1, 1}, []uint16{0, 1}},
		{[]int{2, 4}, []uint16{1, 0, 1}},
		{[]int{5}, []uint16{0}},
		{[]int{1, 3, 1}, []uint16{1, 0, 1, 2, 1}},
	} {
		if got := SmoothSchedule(tc.w); !slices.Equal(got, tc.want) {
			t.Fatalf("%v: %v, want %v", tc.w, got, tc.want)
		}
	}
	if n := len(SmoothSchedule([]int{1000, 999, 7})); n > maxSchedule+3 || n < 3 {
		t.Fatalf("huge weights gave a cycle of %d", n)
	}
}

// TestAffinityKeepsAConversationOnItsTarget: a session key picks the
// same target whatever the others' scores; it moves only when that
// target is ineligible, and then to the same next choice for every
// caller; keys spread over targets in proportion to weight; the order
// lists every eligible target once.
func TestAffinityKeepsAConversationOnItsTarget(t *testing.T) {
	hashes := []uint64{rendezvous.HashString("p/a/m"), rendezvous.HashString("p/b/m"), rendezvous.HashString("q/c/m")}
	live := func(w [3]int, elig [3]bool, score [3]float64) []Live {
		out := make([]Live, 3)
		for i := range out {
			out[i] = Live{Eligible: elig[i], Weight: w[i], Score: score[i]}
		}
		return out
	}
	all := [3]bool{true, true, true}
	count := [3]int{}
	const n = 30000
	for k := uint64(1); k <= n; k++ {
		key := rendezvous.Combine(rendezvous.HashString("session"), []byte{byte(k), byte(k >> 8), byte(k >> 16)})
		base := Affinity(live([3]int{1, 2, 1}, all, [3]float64{1, 1, 1}), key, hashes, nil)
		if len(base) != 3 || base[0] == base[1] || base[1] == base[2] || base[0] == base[2] {
			t.Fatalf("order %v is not every target once", base)
		}
		count[base[0]]++
		// Others' health changes nothing.
		if o := Affinity(live([3]int{1, 2, 1}, all, [3]float64{0.1, 0.9, 0.3}), key, hashes, nil); o[0] != base[0] {
			t.Fatalf("key %d moved from %d to %d when scores changed", k, base[0], o[0])
		}
		// Its target out: the next choice, the same for everyone.
		elig := all
		elig[base[0]] = false
		if o := Affinity(live([3]int{1, 2, 1}, elig, [3]float64{1, 1, 1}), key, hashes, nil); o[0] != base[1] || len(o) != 2 {
			t.Fatalf("key %d with its target out went to %v, want %d first", k, o, base[1])
		}
		// Another target out: it stays.
		other := all
		other[base[2]] = false
		if o := Affinity(live([3]int{1, 2, 1}, other, [3]float64{1, 1, 1}), key, hashes, nil); o[0] != base[0] {
			t.Fatalf("key %d moved when another target went out", k)
		}
	}
	for i, w := range []float64{0.25, 0.5, 0.25} {
		if got := float64(count[i]) / n; got < w-0.02 || got > w+0.02 {
			t.Errorf("target %d first for %.3f of keys, want %.2f ± 0.02 (weights 1:2:1)", i, got, w)
		}
	}
}
