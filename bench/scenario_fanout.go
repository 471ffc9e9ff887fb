package bench

import (
	"context"
	"fmt"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

func init() {
	Register(Scenario{
		Name: "fanout", Order: 40, Default: true, Run: runFanout,
		Description: "A priority combo of 3 targets whose first two fail fast (the mock answers 503 at once), so " +
			"every request costs three upstream attempts, against a single-target model: the CPU of a fanned-out " +
			"request relative to a single-target one, in the same gateway process and round. (The 3-target " +
			"fusion of issue 4 is the separate scenario \"fusion\".) If a circuit breaker later skips the " +
			"failing targets, this measures the skip path instead.",
	})
}

func runFanout(ctx context.Context, r *Runner, s *report.Scenario) error {
	fail := mockprovider.Behavior{Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}}
	env, err := r.StartEnv(ctx, s, EnvSpec{
		Mock: map[string]mockprovider.Behavior{"fail-a": fail, "fail-b": fail, "ok-x": {}, "ok-y": {}},
		// Two upstream names for the same behaviour: today's gateway panics
		// at start-up when two models share a target (connection + upstream
		// model): its per-target metrics are registered twice.
		Gateways: r.gatewaysFor(map[string]ModelSpec{
			"single": {Targets: []string{"ok-x"}},
			"fan3":   {Strategy: "priority", Targets: []string{"fail-a", "fail-b", "ok-y"}},
		}),
	})
	if err != nil {
		return err
	}
	defer env.Stop()

	single := report.Load{ID: "single", Label: fmt.Sprintf("1 target, closed loop c=%d", r.cfg.FanoutConcurrency)}
	fan := report.Load{ID: "priority3", Label: fmt.Sprintf("priority combo, 2 fast failures + 1 success, c=%d", r.cfg.FanoutConcurrency)}
	s.Loads = []report.Load{single, fan}
	for _, t := range env.Targets {
		s.Targets = append(s.Targets, t.Label)
	}
	specs := map[string]*loadgen.Spec{
		single.ID: chatSpec("single", false, "fanout", r),
		fan.ID:    chatSpec("fan3", false, "fanout", r),
	}
	for round := 1; round <= r.cfg.Rounds; round++ {
		for _, t := range Rotate(env.Targets, round-1) {
			for _, l := range Rotate(s.Loads, round-1) {
				cs := CellSpec{Load: l, Round: round, Spec: specs[l.ID], Shape: loadgen.Load{Concurrency: r.cfg.FanoutConcurrency}, Warmup: true}
				if _, err := r.Measure(ctx, env, s, t, cs); err != nil {
					return err
				}
			}
		}
	}

	n := r.cfg.Rounds
	for _, v := range r.cfg.Variants {
		g := GatewayLabel(v.Name)
		loadRatio := func(f func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
			return func(round int) (float64, bool) {
				a, ok1 := cellValue(s, fan.ID, g, round, f)
				b, ok2 := cellValue(s, single.ID, g, round, f)
				return a / b, ok1 && ok2 && b > 0
			}
		}
		vals, sk := PerRound(n, loadRatio(cpuPerReq("proxy")))
		s.Checks = append(s.Checks, NewCheck("fanout-cpu", s.Name, v.Name, "CPU per request, 3-target priority combo / single target",
			AtMost(3.5), "×", vals, skippedNote(sk, "no CPU figure")))
		vals, _ = PerRound(n, loadRatio(cpuPerReq("mock")))
		s.Figures = append(s.Figures, figure("Mock CPU per request, combo / single, "+g, "×", vals))
		vals, _ = PerRound(n, loadRatio(throughput))
		s.Figures = append(s.Figures, figure("Throughput, combo / single, "+g, "×", vals))
		vals, _ = PerRound(n, func(round int) (float64, bool) {
			a, ok1 := cellValue(s, fan.ID, g, round, p50)
			b, ok2 := cellValue(s, single.ID, g, round, p50)
			return a - b, ok1 && ok2
		})
		s.Figures = append(s.Figures, figure("Added p50 of the combo over single, "+g, "ms", vals))
	}
	return env.Stop()
}
