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
		Name: "streaming", Order: 20, Default: true, Run: runStreaming,
		Description: "Concurrent chat streams paced like a real model (time to first token, then evenly spaced " +
			"chunks): the first-token overhead over the mock reached directly, CPU per SSE event, and how many " +
			"streams complete.",
	})
}

func runStreaming(ctx context.Context, r *Runner, s *report.Scenario) error {
	env, err := r.StartEnv(ctx, s, EnvSpec{
		Mock: map[string]mockprovider.Behavior{"paced": {
			LatencyMS: r.cfg.StreamLatencyMS, ChunkCount: r.cfg.StreamChunks, ChunkGapMS: r.cfg.StreamGapMS,
		}},
		Direct: true, Reference: true,
		Gateways: r.gatewaysFor(map[string]ModelSpec{"paced": {Targets: []string{""}}}),
	})
	if err != nil {
		return err
	}
	defer env.Stop()

	load := report.Load{ID: "streams", Label: fmt.Sprintf("%d streams, %d ms + %d × %d ms",
		r.cfg.Streams, r.cfg.StreamLatencyMS, r.cfg.StreamChunks, r.cfg.StreamGapMS)}
	s.Loads = []report.Load{load}
	for _, t := range env.Targets {
		s.Targets = append(s.Targets, t.Label)
	}
	spec := chatSpec("paced", true, "streaming", r)
	for round := 1; round <= r.cfg.Rounds; round++ {
		if err := r.MeasureRound(ctx, env, s, round, CellSpec{Load: load, Spec: spec, Shape: loadgen.Load{Concurrency: r.cfg.Streams}, Warmup: true}); err != nil {
			return err
		}
	}

	n := r.cfg.Rounds
	completion := func(target string) func(int) (float64, bool) {
		return func(round int) (float64, bool) {
			return cellValue(s, load.ID, target, round, func(c *report.Cell) (float64, bool) {
				if c.Summary.Arrivals == 0 {
					return 0, false
				}
				return 100 * float64(c.Summary.OK) / float64(c.Summary.Arrivals), true
			})
		}
	}
	for _, v := range r.cfg.Variants {
		g := GatewayLabel(v.Name)
		vals, sk := PerRound(n, ratio(s, load.ID, g, TargetR, cpuPerEvent("proxy")))
		s.Checks = append(s.Checks, NewCheck("cpu-per-event", s.Name, v.Name, "CPU per SSE event G/R",
			AtMost(2), "×", vals, skippedNote(sk, "no CPU figure")))
		vals, sk = PerRound(n, addedRatio(s, load.ID, g, ttft50))
		s.Checks = append(s.Checks, NewCheck("first-token-overhead", s.Name, v.Name, "First-token overhead over D (p50), G/R",
			AtMost(1.5), "×", vals, skippedNote(sk, "R's first token was less than 0.01 ms slower than D's")))
		vals, sk = PerRound(n, completion(g))
		s.Checks = append(s.Checks, NewCheck("stream-completion", s.Name, v.Name, "Streams completed",
			Exactly(100), "%", vals, skippedNote(sk, "no streams")))
	}
	for _, t := range s.Targets {
		if t == TargetD {
			continue
		}
		vals, _ := PerRound(n, added(s, load.ID, t, ttft50))
		s.Figures = append(s.Figures, figure("First-token overhead over D (p50), "+t, "ms", vals))
	}
	for _, t := range s.Targets {
		vals, _ := PerRound(n, completion(t))
		s.Figures = append(s.Figures, figure("Streams completed, "+t, "%", vals))
	}
	return env.Stop()
}
