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
		Name: "gomaxprocs", Order: 70, Default: true, Run: runGOMAXPROCS,
		Description: "The passthrough closed loop against each variant run with GOMAXPROCS=1 and GOMAXPROCS=2: " +
			"the throughput ratio shows whether the gateway's work spreads across cores. The mock and the " +
			"generator share the same 2 cores, so the ceiling of the ratio is below 2. Skip it with " +
			"--gomaxprocs-scaling=false.",
	})
}

func procsLabel(variant string, p int) string {
	return fmt.Sprintf("%s P=%d", GatewayLabel(variant), p)
}

func runGOMAXPROCS(ctx context.Context, r *Runner, s *report.Scenario) error {
	var gws []GatewaySpec
	for _, v := range r.cfg.Variants {
		for _, p := range []int{1, 2} {
			gws = append(gws, GatewaySpec{Label: procsLabel(v.Name, p), Variant: v.Name,
				Env:    map[string]string{"GOMAXPROCS": fmt.Sprint(p)},
				Models: map[string]ModelSpec{"fast": {Targets: []string{""}}}})
		}
	}
	env, err := r.StartEnv(ctx, s, EnvSpec{Mock: map[string]mockprovider.Behavior{"fast": {}}, Gateways: gws})
	if err != nil {
		return err
	}
	defer env.Stop()

	load := report.Load{ID: "closed", Label: fmt.Sprintf("closed loop c=%d", r.cfg.Concurrency)}
	s.Loads = []report.Load{load}
	for _, t := range env.Targets {
		s.Targets = append(s.Targets, t.Label)
	}
	spec := chatSpec("fast", false, "gomaxprocs", r)
	for round := 1; round <= r.cfg.Rounds; round++ {
		if err := r.MeasureRound(ctx, env, s, round, CellSpec{Load: load, Spec: spec, Shape: loadgen.Load{Concurrency: r.cfg.Concurrency}, Warmup: true}); err != nil {
			return err
		}
	}
	for _, v := range r.cfg.Variants {
		vals, sk := PerRound(r.cfg.Rounds, ratio(s, load.ID, procsLabel(v.Name, 2), procsLabel(v.Name, 1), throughput))
		s.Checks = append(s.Checks, NewCheck("gomaxprocs-scaling", s.Name, v.Name, "Throughput GOMAXPROCS=2 / GOMAXPROCS=1",
			AtLeast(1.7), "×", vals, skippedNote(sk, "no successful requests")))
		vals, _ = PerRound(r.cfg.Rounds, ratio(s, load.ID, procsLabel(v.Name, 2), procsLabel(v.Name, 1), cpuPerReq("proxy")))
		s.Figures = append(s.Figures, figure("CPU per request P=2 / P=1, "+GatewayLabel(v.Name), "×", vals))
		for _, p := range []int{1, 2} {
			vals, _ = PerRound(r.cfg.Rounds, func(round int) (float64, bool) {
				return cellValue(s, load.ID, procsLabel(v.Name, p), round, coresUsed)
			})
			s.Figures = append(s.Figures, figure("Cores used by "+procsLabel(v.Name, p), "cores", vals))
		}
		perCore := func(c *report.Cell) (float64, bool) {
			cores, ok := coresUsed(c)
			return c.Summary.Throughput / cores, ok && cores > 0
		}
		vals, _ = PerRound(r.cfg.Rounds, ratio(s, load.ID, procsLabel(v.Name, 2), procsLabel(v.Name, 1), perCore))
		s.Figures = append(s.Figures, figure("Throughput per core used, P=2 / P=1 (1.0 = linear), "+GatewayLabel(v.Name), "×", vals))
	}
	return env.Stop()
}

// coresUsed is the target process's CPU time over the phase's wall time.
func coresUsed(c *report.Cell) (float64, bool) {
	p := c.Proc("proxy")
	if p == nil || c.Summary.ElapsedS <= 0 {
		return 0, false
	}
	return p.CPUSeconds / c.Summary.ElapsedS, true
}
