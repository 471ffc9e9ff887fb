package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

func init() {
	Register(Scenario{
		Name: "passthrough", Order: 10, Default: true, Run: runPassthrough,
		Description: "Non-streaming chat completions through one target: a closed loop (capacity, CPU per request, " +
			"peak memory) and open loops at fixed rates (latency the hop adds over the mock reached directly). " +
			"The mock answers at once, so every microsecond is the hop's.",
	})
}

// chatBody is a small chat request (the same bytes go to every target, so
// the gateway's target keeps the caller's model name and rewrites nothing).
func chatBody(model string, stream bool) []byte {
	s := `{"model":"` + model + `","messages":[{"role":"user","content":"Hello from omniroute-bench"}]`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// chatSpec is a chat request; tenant names the caller's API key.
func chatSpec(model string, stream bool, tenant string, r *Runner) *loadgen.Spec {
	t := r.cfg.Timeout
	if stream {
		t = r.cfg.StreamTimeout
	}
	return &loadgen.Spec{
		Path: "/v1/chat/completions", Body: chatBody(model, stream), Stream: stream, Timeout: t,
		Headers: [][2]string{{"Authorization", "Bearer sk-omniroute-bench-" + tenant}},
	}
}

// gatewaysFor returns one gateway per variant with the same models.
func (r *Runner) gatewaysFor(models map[string]ModelSpec) []GatewaySpec {
	var gs []GatewaySpec
	for _, v := range r.cfg.Variants {
		gs = append(gs, GatewaySpec{Label: GatewayLabel(v.Name), Variant: v.Name, Models: models})
	}
	return gs
}

func runPassthrough(ctx context.Context, r *Runner, s *report.Scenario) error {
	env, err := r.StartEnv(ctx, s, EnvSpec{
		Mock:   map[string]mockprovider.Behavior{"fast": {}},
		Direct: true, Reference: true,
		Gateways: r.gatewaysFor(map[string]ModelSpec{"fast": {Targets: []string{""}}}),
	})
	if err != nil {
		return err
	}
	defer env.Stop()

	closed := report.Load{ID: "closed", Label: fmt.Sprintf("closed loop c=%d", r.cfg.Concurrency)}
	type cellLoad struct {
		load  report.Load
		shape loadgen.Load
	}
	loads := []cellLoad{{closed, loadgen.Load{Concurrency: r.cfg.Concurrency}}}
	for _, rate := range r.cfg.Rates {
		loads = append(loads, cellLoad{
			report.Load{ID: fmt.Sprintf("open-%g", rate), Label: fmt.Sprintf("open loop %g req/s", rate)},
			loadgen.Load{Rate: rate, Workers: 1024},
		})
	}
	for _, l := range loads {
		s.Loads = append(s.Loads, l.load)
	}
	for _, t := range env.Targets {
		s.Targets = append(s.Targets, t.Label)
	}
	spec := chatSpec("fast", false, "passthrough", r)
	for round := 1; round <= r.cfg.Rounds; round++ {
		for _, l := range loads {
			for _, t := range Rotate(env.Targets, round-1) {
				cs := CellSpec{Load: l.load, Round: round, Spec: spec, Shape: l.shape, Warmup: true}
				if r.cfg.CPUProfile && round == 1 && l.load.ID == closed.ID && t.Proc != nil && t.Label != TargetR {
					cs.Profile = "profile-passthrough-" + strings.ReplaceAll(t.Label, " ", "_") + ".pprof"
				}
				if _, err := r.Measure(ctx, env, s, t, cs); err != nil {
					return err
				}
			}
		}
	}

	n := r.cfg.Rounds
	for _, v := range r.cfg.Variants {
		g := GatewayLabel(v.Name)
		vals, sk := PerRound(n, ratio(s, closed.ID, g, TargetR, throughput))
		s.Checks = append(s.Checks, NewCheck("throughput", s.Name, v.Name, "Throughput G/R (closed loop)",
			AtLeast(throughputGoalOf(v.Name)), "×", vals, skippedNote(sk, "no successful requests")))
		vals, sk = PerRound(n, ratio(s, closed.ID, g, TargetR, cpuPerReq("proxy")))
		s.Checks = append(s.Checks, NewCheck("cpu-per-request", s.Name, v.Name, "CPU per request G/R (closed loop)",
			AtMost(2), "×", vals, skippedNote(sk, "no CPU figure")))
		for _, l := range loads[1:] {
			vals, sk = PerRound(n, addedRatio(s, l.load.ID, g, p50))
			s.Checks = append(s.Checks, NewCheck("added-p50-"+l.load.ID, s.Name, v.Name,
				fmt.Sprintf("Added p50 over D, G/R (%s)", l.load.Label), AtMost(1.5), "×", vals,
				skippedNote(sk, "R added less than 0.01 ms over D")))
		}

		var idle []float64
		for _, p := range s.Idle {
			if p.Name == g {
				idle = append(idle, float64(p.PeakRSS)/(1<<20))
			}
		}
		s.Checks = append(s.Checks, NewCheck("idle-rss", s.Name, v.Name, "Idle RSS of the gateway", AtMost(40), "MB", idle, ""))
		var peak int64
		for _, c := range s.Cells {
			if p := c.Proc("proxy"); c.Target == g && p != nil {
				peak = max(peak, p.PeakRSS, p.HWM)
			}
		}
		var peaks []float64
		if peak > 0 {
			peaks = []float64{float64(peak) / (1 << 20)}
		}
		s.Checks = append(s.Checks, NewCheck("peak-rss", s.Name, v.Name, "Peak RSS of the gateway (VmHWM and 100 ms samples)", AtMost(150), "MB", peaks, ""))

		capVals, _ := PerRound(n, func(round int) (float64, bool) { return cellValue(s, closed.ID, g, round, throughput) })
		if len(capVals) > 0 {
			r.capacity[v.Name] = report.Median(capVals)
		}
		s.Figures = append(s.Figures, figure("Capacity of "+g+" (closed loop)", "req/s", capVals))
		vals, _ = PerRound(n, ratio(s, closed.ID, g, TargetD, throughput))
		s.Figures = append(s.Figures, figure("Throughput G/D, "+v.Name, "×", vals))
	}
	vals, _ := PerRound(n, ratio(s, closed.ID, TargetR, TargetD, throughput))
	s.Figures = append(s.Figures, figure("Throughput R/D", "×", vals))
	for _, l := range loads[1:] {
		for _, t := range s.Targets[1:] {
			vals, _ := PerRound(n, added(s, l.load.ID, t, p50))
			s.Figures = append(s.Figures, figure(fmt.Sprintf("Added p50 over D, %s, %s", t, l.load.Label), "ms", vals))
			vals, _ = PerRound(n, added(s, l.load.ID, t, p99))
			s.Figures = append(s.Figures, figure(fmt.Sprintf("Added p99 over D, %s, %s", t, l.load.Label), "ms", vals))
		}
	}
	return env.Stop()
}
