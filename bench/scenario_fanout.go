package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

func init() {
	Register(Scenario{
		Name: "fanout", Order: 40, Default: true, Run: runFanout,
		Description: "The CPU of a fanned-out request relative to a single-target one, in the same gateway process " +
			"and round, closed loop, gateway only. Two fan-outs: a 3-target fusion (the panel of 3 asked in " +
			"parallel, then the judge with the caller's request plus the 3 answers: 4 upstream calls, " +
			"non-streaming) and a priority combo of 3 targets whose first two fail fast (the mock answers 503 at " +
			"once). With the default cooldowns and circuit breakers the failing targets are skipped most of the " +
			"time, so the combo mostly measures the skip path. The upstream calls per answered request are " +
			"counted at the mock. A round in which fewer than 99 % of a fan-out's answers are 200 is left out " +
			"of its CPU check (its CPU per answer would be that of refusals).",
	})
}

// Upstream model names of the fanout scenario: each model has its own, so
// per-target state (cooldowns, breakers, metrics) is not shared between
// the loads.
var (
	fanoutSingle   = "ok-x"
	fanoutPriority = []string{"fail-a", "fail-b", "ok-y"}
	fanoutPanel    = []string{"panel-a", "panel-b", "panel-c"}
	fanoutJudge    = "judge"
)

func runFanout(ctx context.Context, r *Runner, s *report.Scenario) error {
	fail := mockprovider.Behavior{Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}}
	mock := map[string]mockprovider.Behavior{"fail-a": fail, "fail-b": fail, fanoutSingle: {}, "ok-y": {}, fanoutJudge: {}}
	for _, p := range fanoutPanel {
		mock[p] = mockprovider.Behavior{}
	}
	env, err := r.StartEnv(ctx, s, EnvSpec{
		Mock: mock,
		Gateways: r.gatewaysFor(map[string]ModelSpec{
			"single": {Targets: []string{fanoutSingle}},
			"fan3":   {Strategy: "priority", Targets: fanoutPriority},
			// quorum 3: every answer carries the whole panel.
			"fusion3":      {Strategy: "fusion", Targets: fanoutPanel, Fusion: &FusionSpec{Quorum: 3, Judge: "fusion-judge"}},
			"fusion-judge": {Targets: []string{fanoutJudge}},
		}),
	})
	if err != nil {
		return err
	}
	defer env.Stop()

	c := r.cfg.FanoutConcurrency
	single := report.Load{ID: "single", Label: fmt.Sprintf("1 target, closed loop c=%d", c)}
	fusion := report.Load{ID: "fusion3", Label: fmt.Sprintf("fusion, panel of 3 + judge, c=%d", c)}
	fan := report.Load{ID: "priority3", Label: fmt.Sprintf("priority combo, 2 failing + 1 ok, c=%d", c)}
	s.Loads = []report.Load{single, fusion, fan}
	for _, t := range env.Targets {
		s.Targets = append(s.Targets, t.Label)
	}
	specs := map[string]*loadgen.Spec{
		single.ID: chatSpec("single", false, "fanout", r),
		fusion.ID: chatSpec("fusion3", false, "fanout", r),
		fan.ID:    chatSpec("fan3", false, "fanout", r),
	}
	upstream := map[string][]string{
		single.ID: {fanoutSingle},
		fusion.ID: append(append([]string(nil), fanoutPanel...), fanoutJudge),
		fan.ID:    fanoutPriority,
	}
	limits := map[string][]float64{}
	for round := 1; round <= r.cfg.Rounds; round++ {
		for _, t := range Rotate(env.Targets, round-1) {
			for _, l := range Rotate(s.Loads, round-1) {
				cs := CellSpec{Load: l, Round: round, Spec: specs[l.ID], Shape: loadgen.Load{Concurrency: c}, Warmup: true,
					CountUpstream: upstream[l.ID]}
				if _, err := r.Measure(ctx, env, s, t, cs); err != nil {
					return err
				}
				// The adaptive limit right after the cell: upstream errors
				// (the combo's failing targets) cut it.
				if a, err := admissionHealth(t.Addr); err == nil && a.Mode == "enforce" {
					key := t.Label + "/" + l.ID
					limits[key] = append(limits[key], float64(a.CurrentLimit))
				}
			}
		}
	}

	n := r.cfg.Rounds
	for _, v := range r.cfg.Variants {
		g := GatewayLabel(v.Name)
		for _, f := range []struct {
			load       report.Load
			id, metric string
		}{
			{fusion, "fusion-cpu", "CPU per request, 3-target fusion (3 panel members + judge) / single target"},
			{fan, "fanout-cpu", "CPU per request, 3-target priority combo whose first two fail (skipped while cooling down) / single target"},
		} {
			loadRatio := func(fn func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
				return func(round int) (float64, bool) {
					a, ok1 := cellValue(s, f.load.ID, g, round, fn)
					b, ok2 := cellValue(s, single.ID, g, round, fn)
					return a / b, ok1 && ok2 && b > 0
				}
			}
			// A round whose fan-out answers are mostly refusals measures
			// the refusal, not the fan-out: it is left out, with why.
			var refused []string
			vals, sk := PerRound(n, func(round int) (float64, bool) {
				if c := s.Find(f.load.ID, g, round); c != nil && c.Summary.Answered > 0 &&
					float64(c.Summary.OK) < minFanoutSuccess*float64(c.Summary.Answered) {
					refused = append(refused, fmt.Sprintf("round %d: %d of %d answers not 200 (%s)", round,
						c.Summary.Answered-c.Summary.OK, c.Summary.Answered, codesText(c.Summary.Codes)))
					return 0, false
				}
				return loadRatio(cpuPerReq("proxy"))(round)
			})
			why := "no CPU figure"
			if len(refused) > 0 {
				why = "fewer than 99 % of the fan-out answers were 200, so the CPU per answer is that of refusals: " + strings.Join(refused, "; ")
			}
			s.Checks = append(s.Checks, NewCheck(f.id, s.Name, v.Name, f.metric,
				AtMost(3.5), "×", vals, skippedNote(sk, why)))
			name := f.load.ID
			vals, _ = PerRound(n, func(round int) (float64, bool) { return cellValue(s, f.load.ID, g, round, upstreamPerAnswer) })
			s.Figures = append(s.Figures, figure("Upstream calls per answered request, "+name+", "+g, "", vals))
			vals, _ = PerRound(n, func(round int) (float64, bool) {
				return cellValue(s, f.load.ID, g, round, func(c *report.Cell) (float64, bool) {
					return 100 * float64(c.Summary.OK) / float64(c.Summary.Answered), c.Summary.Answered > 0
				})
			})
			s.Figures = append(s.Figures, figure("Answers that were 200, "+name+", "+g, "%", vals))
			vals, _ = PerRound(n, loadRatio(cpuPerReq("mock")))
			s.Figures = append(s.Figures, figure("Mock CPU per request, "+name+" / single, "+g, "×", vals))
			vals, _ = PerRound(n, loadRatio(throughput))
			s.Figures = append(s.Figures, figure("Throughput, "+name+" / single, "+g, "×", vals))
			vals, _ = PerRound(n, func(round int) (float64, bool) {
				a, ok1 := cellValue(s, f.load.ID, g, round, p50)
				b, ok2 := cellValue(s, single.ID, g, round, p50)
				return a - b, ok1 && ok2
			})
			s.Figures = append(s.Figures, figure("Added p50 of "+name+" over single, "+g, "ms", vals))
		}
	}
	for _, v := range r.cfg.Variants {
		g := GatewayLabel(v.Name)
		for _, l := range s.Loads {
			if vals := limits[g+"/"+l.ID]; len(vals) > 0 {
				s.Figures = append(s.Figures, figure("Admission limit right after the "+l.ID+" cell, "+g, "cost units", vals))
			}
		}
		s.Figures = append(s.Figures, admissionFigures(env.Target(g))...)
	}
	return env.Stop()
}

// minFanoutSuccess is the share of 200 answers a fan-out cell needs for its
// CPU per answer to count as the fan-out's.
const minFanoutSuccess = 0.99

func codesText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s × %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "no error code"
	}
	return strings.Join(parts, ", ")
}

// upstreamPerAnswer is the mock's requests over the cell's answered
// requests.
func upstreamPerAnswer(c *report.Cell) (float64, bool) {
	if len(c.Upstream) == 0 || c.Summary.Answered == 0 {
		return 0, false
	}
	var n int64
	for _, v := range c.Upstream {
		n += v
	}
	return float64(n) / float64(c.Summary.Answered), true
}
