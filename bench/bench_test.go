package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/omniroute/gateway/bench/lanes"
	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// withUnavailable registers a scenario this build cannot run for the
// duration of a test (every issue's scenario is wired in now, so the
// "not available" path has no real example left).
func withUnavailable(t *testing.T, name string) {
	t.Helper()
	saved := registry
	Register(Scenario{Name: name, Order: 99, Default: true, Unavailable: "registered by " + t.Name()})
	t.Cleanup(func() { registry = saved })
}

func TestSelectScenarios(t *testing.T) {
	withUnavailable(t, "future")
	run, unavailable, err := selectScenarios(nil)
	if err != nil || len(run) == 0 {
		t.Fatalf("default set: %v, %v", run, err)
	}
	if run[0].Name != "passthrough" {
		t.Fatalf("passthrough must run first (overload uses its capacity), got %s", run[0].Name)
	}
	for _, s := range run {
		if s.Unavailable != "" || !s.Default {
			t.Fatalf("default set has %+v", s)
		}
	}
	if len(unavailable) != 1 || unavailable[0].Name != "future" {
		t.Errorf("unavailable: %+v, want only \"future\"", unavailable)
	}
	for _, name := range []string{"noisy-neighbour", "interactive-batch", "fanout-lanes", "largebody", "fanout", "overload"} {
		found := false
		for _, s := range run {
			found = found || s.Name == name
		}
		if !found {
			t.Errorf("%s is not in the default set", name)
		}
	}
	run, _, err = selectScenarios([]string{"fanout", "future", "passthrough", "largebody"})
	if err != nil || len(run) != 3 || run[0].Name != "passthrough" || run[1].Name != "fanout" || run[2].Name != "largebody" {
		t.Fatalf("explicit selection: %v, %v", run, err)
	}
	if _, _, err := selectScenarios([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "passthrough") || !strings.Contains(err.Error(), GatesGroup) {
		t.Fatalf("unknown scenario: %v", err)
	}
}

// TestGateScenariosWired: every issue-11 gate scenario is registered under
// the gates group, outside the default set (they take minutes each), and
// the group name selects exactly them.
func TestGateScenariosWired(t *testing.T) {
	want := []string{"incidents", "capacity-step", "latency-step", "overload-5x-10x", "give-up", "deadline", "big-requests",
		"coding-agents", "one-tenant-256", "two-providers", "noisy-neighbour-defaults"}
	run, _, err := selectScenarios([]string{GatesGroup})
	if err != nil || len(run) != len(want) {
		t.Fatalf("gates group: %d scenarios, %v", len(run), err)
	}
	for i, s := range run {
		if s.Name != want[i] || s.Default || s.Run == nil || s.Group != GatesGroup || !strings.Contains(s.Description, "enforce") {
			t.Errorf("scenario %d: %+v", i, s)
		}
	}
	run, _, err = selectScenarios([]string{"passthrough", GatesGroup, "incidents"})
	if err != nil || len(run) != len(want)+1 || run[0].Name != "passthrough" {
		t.Fatalf("mixed selection: %d, %v", len(run), err)
	}
}

func TestRegisterRejectsBadScenarios(t *testing.T) {
	for _, s := range []Scenario{
		{Name: "passthrough", Run: runPassthrough}, // duplicate
		{Name: "x"}, // neither Run nor Unavailable
		{Name: "y", Run: runFanout, Unavailable: "z"}, // both
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", s.Name)
				}
			}()
			Register(s)
		}()
	}
}

func TestConfigValidation(t *testing.T) {
	good := DefaultConfig()
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"rounds":   func(c *Config) { c.Rounds = 0 },
		"duration": func(c *Config) { c.Duration = 0 },
		"rates":    func(c *Config) { c.Rates = []float64{-1} },
		"factor":   func(c *Config) { c.OverloadFactor = 1 },
		"noise":    func(c *Config) { c.NoiseLimit = 0 },
		"out":      func(c *Config) { c.Out = "" },
		"capacity": func(c *Config) { c.OverloadCapacity = -1 },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func cellWith(load, target string, round int, thr float64, mode string) *report.Cell {
	return &report.Cell{Load: load, Target: target, Round: round, Summary: loadgen.Summary{Mode: mode, Throughput: thr, OK: 1}}
}

func TestNoiseCheck(t *testing.T) {
	s := &report.Scenario{Name: "p", Loads: []report.Load{{ID: "closed"}, {ID: "open"}}}
	for i, v := range []float64{1000, 1200, 1100} {
		s.Cells = append(s.Cells, cellWith("closed", TargetR, i+1, v, "closed"), cellWith("open", TargetR, i+1, v*5, "open"))
	}
	n := noiseCheck([]*report.Scenario{s}, 0.25)
	if !n.Checked || !n.OK || n.Spread < 0.19 || n.Spread > 0.21 || len(n.Cells) != 1 {
		t.Fatalf("20 %% spread: %+v", n)
	}
	s.Cells = append(s.Cells, cellWith("closed", TargetR, 4, 700, "closed"))
	if n := noiseCheck([]*report.Scenario{s}, 0.25); n.OK {
		t.Fatalf("71 %% spread passed: %+v", n)
	}
	if n := noiseCheck(nil, 0.25); n.Checked || n.Note == "" {
		t.Fatalf("nothing to check: %+v", n)
	}
}

func TestChecks(t *testing.T) {
	s := &report.Scenario{Name: "p"}
	// Round 1: G 600, R 1000, D 2000; round 2: R missing.
	s.Cells = append(s.Cells, cellWith("c", "G x", 1, 600, "closed"), cellWith("c", TargetR, 1, 1000, "closed"),
		cellWith("c", TargetD, 1, 2000, "closed"), cellWith("c", "G x", 2, 500, "closed"))
	vals, skipped := PerRound(2, ratio(s, "c", "G x", TargetR, throughput))
	if len(vals) != 1 || vals[0] != 0.6 || skipped != 1 {
		t.Fatalf("ratio per round: %v, skipped %d", vals, skipped)
	}
	if c := NewCheck("t", "p", "x", "m", AtLeast(0.6), "×", vals, ""); c.Status != report.Pass || *c.Value != 0.6 || c.Goal != "≥ 0.6 ×" {
		t.Fatalf("%+v", c)
	}
	if c := NewCheck("t", "p", "x", "m", AtMost(0.5), "", vals, ""); c.Status != report.Fail {
		t.Fatalf("%+v", c)
	}
	if c := NewCheck("t", "p", "x", "m", Exactly(0), "", nil, ""); c.Status != report.NA || c.Value != nil || c.Note == "" {
		t.Fatalf("%+v", c)
	}

	// Added latency: (G-D)/(R-D), rounds with R-D below 0.01 ms dropped.
	lat := func(target string, round int, p50 float64) *report.Cell {
		return &report.Cell{Load: "o", Target: target, Round: round, Summary: loadgen.Summary{Latency: loadgen.Stats{N: 1, P50: p50}}}
	}
	s.Cells = append(s.Cells, lat(TargetD, 1, 0.3), lat(TargetR, 1, 0.5), lat("G x", 1, 0.7),
		lat(TargetD, 2, 0.3), lat(TargetR, 2, 0.305), lat("G x", 2, 0.7))
	vals, skipped = PerRound(2, addedRatio(s, "o", "G x", p50))
	if len(vals) != 1 || vals[0] < 1.99 || vals[0] > 2.01 || skipped != 1 {
		t.Fatalf("added ratio: %v, skipped %d", vals, skipped)
	}
}

func TestRotate(t *testing.T) {
	in := []string{"a", "b", "c"}
	if got := strings.Join(Rotate(in, 1), ""); got != "bca" {
		t.Fatal(got)
	}
	if got := strings.Join(Rotate(in, 3), ""); got != "abc" {
		t.Fatal(got)
	}
	if strings.Join(in, "") != "abc" {
		t.Fatal("Rotate changed its input")
	}
}

// TestGatewayConfigIsValid decodes the generated file with the gateway's
// own strict decoder.
func TestGatewayConfigIsValid(t *testing.T) {
	b := gatewayConfig("127.0.0.1:9", map[string]ModelSpec{
		"fast": {Targets: []string{""}},
		"fan3": {Strategy: "priority", Targets: []string{"fail-a", "fail-b", "ok-y"}},
		"fusion3": {Strategy: "fusion", Targets: []string{"panel-a", "panel-b", "panel-c"},
			Fusion: &FusionSpec{Quorum: 3, Judge: "fusion-judge"}},
		"fusion-judge": {Targets: []string{"judge"}},
		"paced":        {Targets: []string{""}, Connection: "paced"},
	}, map[string]map[string]int64{"paced": {"requests_per_minute": 600000, "tokens_per_minute": 1e9}})
	f, err := config.DecodeFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(f.Models) != 5 || len(f.Models["fan3"].Targets) != 3 || f.Models["paced"].Targets[0].Connection != "mock/paced" {
		t.Fatalf("%+v", f.Models)
	}
	if l := f.Providers["mock"].Connections["paced"].Limits; l == nil || l.RequestsPerMinute != 600000 {
		t.Fatalf("the paced connection's limits: %+v", l)
	}
	if fu := f.Models["fusion3"].Fusion; fu == nil || fu.Quorum != 3 || fu.Judge != "fusion-judge" || f.Models["fusion3"].Strategy != "fusion" {
		t.Fatalf("fusion model: %+v", f.Models["fusion3"])
	}
}

// TestVariantsNamed: --variants picks default and optional variants by
// name, and request-log-off differs from admission-off only in the log.
func TestVariantsNamed(t *testing.T) {
	vs, err := VariantsNamed([]string{"admission-off", "request-log-off"})
	if err != nil || len(vs) != 2 || vs[0].Name != "admission-off" || vs[1].Name != "request-log-off" {
		t.Fatalf("%v %v", vs, err)
	}
	off := vs[1].Env
	if off["OMNIROUTE_REQUEST_LOG"] != "off" || off["ADAPTIVE_ADMISSION_MODE"] != vs[0].Env["ADAPTIVE_ADMISSION_MODE"] || len(off) != len(vs[0].Env)+1 {
		t.Fatalf("request-log-off %v against admission-off %v", off, vs[0].Env)
	}
	if _, err := VariantsNamed([]string{"nope"}); err == nil {
		t.Fatal("unknown variant accepted")
	}
}

func TestVariantsDefineAdmission(t *testing.T) {
	names := map[string]bool{}
	for _, v := range Variants {
		names[v.Name] = true
	}
	if !names["admission-off"] || !names["admission-on"] {
		t.Fatalf("variants %v", names)
	}
	off, on := Variants[0], Variants[1]
	if off.Env["ADAPTIVE_ADMISSION_MODE"] != "off" || len(off.Env) != 1 {
		t.Fatalf("admission-off: %v (the ingest budget has no switch; only the controller is turned off)", off.Env)
	}
	if on.Env["ADAPTIVE_ADMISSION_MODE"] != "enforce" || on.Env["OMNIROUTE_CHAT_VIRTUAL_LANES"] != "true" {
		t.Fatalf("admission-on: %v", on.Env)
	}
	// Every value must be accepted by the gateway's own parser.
	for _, v := range append(append([]Variant(nil), Variants...), OptionalVariants...) {
		vars := map[string]string{"OMNIROUTE_TENANT_SECRET": "omniroute-bench-tenant-secret-0123456789"}
		for k, val := range v.Env {
			vars[k] = val
		}
		if _, err := config.LoadEnv(vars); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if v.Description == "" {
			t.Fatalf("%s has no description", v.Name)
		}
	}
	if throughputGoalOf("admission-on") != 0.55 || throughputGoalOf("other") != 0.60 {
		t.Fatal("throughput goals")
	}
}

// TestRequestCost pins the adaptive controller's price of the benchmark's
// small request, which sizes the overload scenario's knee limit.
func TestRequestCost(t *testing.T) {
	if c := requestCost(chatBody("knee", false)); c != 1 {
		t.Fatalf("cost %d, want 1 (one place at the provider)", c)
	}
}

func TestLanesCheck(t *testing.T) {
	v := 1.2
	tests := []struct {
		name   string
		in     lanes.Check
		full   bool
		status string
	}{
		{"pass", lanes.Check{Name: "x", OK: true, Smoke: true, Value: &v, Goal: "≤ 1.5", Unit: "×"}, false, report.Pass},
		{"fail", lanes.Check{Name: "x", OK: false, Smoke: true, Value: &v, Goal: "≤ 1", Unit: "×"}, true, report.Fail},
		{"full-run gate in a smoke run", lanes.Check{Name: "x", OK: false, Smoke: false, Value: &v, Goal: "≤ 1"}, false, report.NA},
		{"full-run gate in a full run", lanes.Check{Name: "x", OK: false, Smoke: false, Value: &v, Goal: "≤ 1"}, true, report.Fail},
		{"no value", lanes.Check{Name: "x", OK: true, Smoke: true}, true, report.NA},
		{"seeds, one never reached", lanes.Check{Name: "x", OK: false, Value: &v, Goal: "≤ 1", Seeds: []float64{v, math.Inf(1), math.NaN()}}, true, report.Fail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := lanesCheck("id", tc.in, tc.full)
			if c.Status != tc.status || (c.Value == nil) != (c.Status == report.NA) || c.Goal == "" || c.Metric != "x" {
				t.Fatalf("%+v", c)
			}
			if c.Value != nil && (*c.Value != v || len(c.Rounds) != 1 || c.Rounds[0] != v) {
				t.Fatalf("value %v rounds %v (not-measured and never-reached seeds must be left out)", *c.Value, c.Rounds)
			}
		})
	}
}
