package lanes

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"
)

// gateScenarios are the issue-11 gate scenarios, by test name.
var gateScenarios = []struct {
	name string
	f    func(context.Context, Options) (Report, error)
}{
	{"incidents", RunIncidents}, {"capacity-step", RunCapacityStep}, {"latency-step", RunLatencyStep},
	{"overload-5x-10x", RunOverload}, {"give-up", RunGiveUp}, {"deadline", RunDeadline},
	{"big-requests", RunBigRequests}, {"coding-agents", RunCodingAgents}, {"one-tenant-256", RunFanIn},
	{"two-providers", RunTwoProviders}, {"noisy-neighbour-defaults", RunNoisyNeighbourDefaults},
}

// TestGateScenarios runs the gate scenarios: by default their smoke
// variants all at once (a few seconds each, mostly waiting on the mock's
// latency), asserting only that each ran, reported every gate and
// accounted for every request; with -lanes.full the full runs, one after
// another, failing on any gate (today most fail: they are the goals of
// issue 11).
func TestGateScenarios(t *testing.T) {
	o := Options{Full: *full, Seed: 7, Lockstep: *lockstep}
	if raceEnabled && !o.Full {
		o.Scale = 0.5
	}
	type result struct {
		rep Report
		err error
	}
	for _, sc := range gateScenarios {
		t.Run(sc.name, func(t *testing.T) {
			done := make(chan result, 1)
			run := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
				defer cancel()
				rep, err := sc.f(ctx, o)
				done <- result{rep, err}
			}
			if o.Full {
				run()
			} else {
				// Start at once, then wait in line: t.Parallel lets only
				// GOMAXPROCS subtests run at a time, but these mostly wait
				// on the mock's latency, so they all run side by side.
				go run()
				t.Parallel()
			}
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			rep := res.rep
			t.Log("\n" + rep.String())
			gates, smoke := 0, 0
			for _, c := range rep.Checks {
				if c.Smoke {
					smoke++
				} else {
					gates++
				}
			}
			if gates == 0 || smoke == 0 || len(rep.Figures) == 0 {
				t.Fatalf("%s: incomplete report: %d gates, %d smoke checks, %d figures", sc.name, gates, smoke, len(rep.Figures))
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Fatalf("report does not encode: %v", err)
			}
			if !rep.OK() {
				t.Fatalf("%s: a gate failed", sc.name)
			}
		})
	}
}

func TestFlowsAgain(t *testing.T) {
	ok := func(at time.Duration) sample { return sample{at: at, status: 200} }
	bad := func(at time.Duration) sample { return sample{at: at, status: 429} }
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		ss     []sample
		want   float64
		flowed bool
	}{
		{"flows at once", []sample{ok(0), ok(600 * ms), ok(1200 * ms)}, 0, true},
		{"after one failing bin", []sample{bad(0), bad(100 * ms), ok(600 * ms), ok(1100 * ms)}, 0.5, true},
		{"a late failure restarts it", []sample{ok(0), bad(600 * ms), ok(1100 * ms), ok(1600 * ms)}, 1, true},
		{"90 % is enough", append([]sample{bad(10 * ms)}, slices.Repeat([]sample{ok(20 * ms)}, 9)...), 0, true},
		{"empty bins do not count", []sample{bad(0), ok(1100 * ms)}, 1, true},
		{"never", []sample{ok(0), bad(1900 * ms)}, 2, false},
		{"requests outside the span are ignored", []sample{bad(-time.Second), ok(0), bad(3 * time.Second)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, flowed := flowsAgain(tc.ss, 0, 2*time.Second, 500*ms)
			if got != tc.want || flowed != tc.flowed {
				t.Fatalf("flowsAgain = %v, %v; want %v, %v", got, flowed, tc.want, tc.flowed)
			}
		})
	}
}

func TestWindowsUntil(t *testing.T) {
	at := func(s float64, l float64) point {
		return point{at: time.Duration(s * float64(time.Second)), limits: map[string]float64{"adaptiveAdmission.currentLimit": l}}
	}
	pts := []point{at(10.1, 200), at(11.5, 150), at(12.2, 100), at(13.4, 140), at(14.1, 110), at(15.3, 105)}
	low := func(p point) bool { return p.effectiveLimit() <= 120 }
	if w, ok := windowsUntilStays(pts, 10*time.Second, 20*time.Second, low); !ok || w != 5 {
		t.Errorf("stays: %v %v, want 5 windows (from 14.1 s, after the 13.4 s excursion)", w, ok)
	}
	if w, ok := windowsUntilFirst(pts, 10*time.Second, 20*time.Second, low); !ok || w != 3 {
		t.Errorf("first: %v %v, want 3", w, ok)
	}
	if w, ok := windowsUntilStays(pts, 10*time.Second, 20*time.Second, func(p point) bool { return p.effectiveLimit() < 100 }); ok || w != 20 {
		t.Errorf("never: %v %v, want the span 20 and false", w, ok)
	}
	if w, ok := windowsUntilStays(pts, 10*time.Second, 20*time.Second, func(point) bool { return true }); !ok || w != 0 {
		t.Errorf("from the start: %v %v", w, ok)
	}
}

// TestParseHealthFindsEveryLimit: every numeric currentLimit is found,
// array elements are named by their name field, and the effective limit
// is the tightest; a per-upstream limit is found by its name.
func TestParseHealthFindsEveryLimit(t *testing.T) {
	body := []byte(`{"status":"ok","adaptiveAdmission":{"currentLimit":400,"activeCost":21,"activeCount":3,"classes":{"batch":{"floorCost":5}},
	 "upstreams":[{"name":"small/m-small","currentLimit":112,"lastPhase":{"rule":"probe_knee","limitAfter":112}},{"name":"big/m-big","currentLimit":336,"lastPhase":{"rule":"cpu_busy_grow"}},{"currentLimit":"x"}]},
	 "other":{"nested":[{"id":"q","currentLimit":90}]}}`)
	lims, adm, rules := parseHealth(body)
	want := map[string]float64{"adaptiveAdmission.currentLimit": 400, "adaptiveAdmission.upstreams[small/m-small].currentLimit": 112,
		"adaptiveAdmission.upstreams[big/m-big].currentLimit": 336, "other.nested[q].currentLimit": 90}
	if len(lims) != len(want) {
		t.Fatalf("limits %v, want %v", lims, want)
	}
	for k, v := range want {
		if lims[k] != v {
			t.Errorf("%s = %v, want %v", k, lims[k], v)
		}
	}
	p := point{limits: lims, adm: adm}
	if p.effectiveLimit() != 90 || p.upstreamLimit("big") != 336 || p.upstreamLimit("small") != 112 || !math.IsNaN(p.upstreamLimit("none")) {
		t.Errorf("effective %v, big %v, small %v", p.effectiveLimit(), p.upstreamLimit("big"), p.upstreamLimit("small"))
	}
	if adm["activeCost"] != 21 || adm["activeCount"] != 3 {
		t.Errorf("adm %v", adm)
	}
	if len(rules) != 2 || rules[0] != "probe_knee" || rules[1] != "cpu_busy_grow" {
		t.Errorf("rules %q, want each upstream's lastPhase.rule", rules)
	}
	p.rules = rules
	if r := rulesAtMax([]point{{limits: map[string]float64{"a": 10}}, p, {limits: map[string]float64{"a": 50}}}, point.effectiveLimit); len(r) != 2 || r[0] != "probe_knee" {
		t.Errorf("rules at the largest limit %q, want the reading with limit 90", r)
	}
	if l, a, r := parseHealth([]byte("not json")); l != nil || a != nil || r != nil {
		t.Errorf("bad body parsed: %v %v %v", l, a, r)
	}
}

// TestMeasuredCost: the gateway's own report wins (header, then health's
// most common ratio), the cost function is the fallback.
func TestMeasuredCost(t *testing.T) {
	pts := []point{
		{adm: map[string]float64{"activeCost": 21, "activeCount": 3}},
		{adm: map[string]float64{"activeCost": 14, "activeCount": 2}},
		{adm: map[string]float64{"activeCost": 7, "activeCount": 1}},
		{adm: map[string]float64{"activeCost": 15, "activeCount": 2}}, // a mix: outvoted
		{adm: map[string]float64{"activeCost": 0, "activeCount": 0}},
	}
	if c, from := measuredCost(nil, pts, 99); c != 7 || from == "" {
		t.Errorf("health: %v %q", c, from)
	}
	if c, _ := measuredCost([]sample{{cost: 12}, {cost: 12}, {}}, pts, 99); c != 12 {
		t.Errorf("header: %v", c)
	}
	if c, _ := measuredCost(nil, pts[3:], 99); c != 99 {
		t.Errorf("fallback: %v", c)
	}
	// The small chat body of these scenarios costs 1 with the default
	// cost function (one place at the provider).
	if c := estimateCost(len(body("x"))); c != requestCost {
		t.Errorf("estimateCost = %v, want %d", c, requestCost)
	}
}

func TestAggregates(t *testing.T) {
	nan := math.NaN()
	v := []float64{3, 1, 2}
	if aggMedian.of(v) != 2 || aggMax.of(v) != 3 || aggMin.of(v) != 1 {
		t.Fatalf("median %v max %v min %v", aggMedian.of(v), aggMax.of(v), aggMin.of(v))
	}
	if median([]float64{4, 1, nan, 2, 3}) != 2.5 || !math.IsNaN(median([]float64{nan})) {
		t.Fatal("median must skip NaN and average the middle pair")
	}
	if !math.IsNaN(aggMax.of([]float64{1, nan})) {
		t.Fatal("an invariant not measured on a seed is not measured")
	}
}

func TestBodies(t *testing.T) {
	for _, n := range []int{1 << 10, 2 << 20} {
		b := sizedBody("m", n)
		var v struct {
			Model    string
			Messages []struct{ Content string }
		}
		if len(b) != n || json.Unmarshal(b, &v) != nil || v.Model != "m" || len(v.Messages) != 1 {
			t.Fatalf("sizedBody(%d): %d bytes, %+v", n, len(b), v.Model)
		}
	}
	sizes := agentSizes(agentCount)
	if sizes[0] != 80e3 || sizes[len(sizes)-1] != 1e6 {
		t.Fatalf("agent sizes %v", sizes)
	}
	for _, size := range []int{80e3, 1e6} {
		b, msgs := agentBody("claude-agent", size)
		var v struct {
			MaxTokens int               `json:"max_tokens"`
			Stream    bool              `json:"stream"`
			Tools     []json.RawMessage `json:"tools"`
			Messages  []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if len(b) < size || len(b) > size+8<<10 || v.MaxTokens != agentMaxTokens || !v.Stream || len(v.Tools) != agentTools || len(v.Messages) != msgs || msgs < 3 {
			t.Fatalf("agentBody(%d): %d bytes, %d tools, %d messages", size, len(b), len(v.Tools), len(v.Messages))
		}
		for i, m := range v.Messages {
			if want := []string{"user", "assistant"}[i%2]; m.Role != want {
				t.Fatalf("message %d role %s, want %s", i, m.Role, want)
			}
		}
	}
}
