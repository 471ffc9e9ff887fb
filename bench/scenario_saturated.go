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
		Name: "saturated", Order: 75, Run: runSaturated,
		Description: "The gateway's own CPU is the busy part: the gateway, this generator and a mock with no " +
			"concurrency cap share the machine's cores, and the load asks for more than they can do. Closed loops " +
			"of 64 and 256 connections against a mock answering at once and in 20 ms, 64 concurrent streams of " +
			"20 chunks 5 ms apart, and open loops at 2× and 5× the sustainable rate at 20 ms (admission off's " +
			"closed-loop goodput at 256 connections, measured in the same round). Every round starts fresh " +
			"processes and measures the targets in rotated order. Goals: admission on serves ≥ 0.95× admission " +
			"off with no refusal in every closed loop and the streams, and ≥ 0.9× its goodput in the open loops; " +
			"each cell reports the share of the machine's CPUs that was busy.",
	})
}

// Saturation loads: mock models and what each cell sends.
const (
	satFast   = "sat-0"      // the mock answers at once
	satSlow   = "sat-20"     // in 20 ms
	satStream = "sat-stream" // 20 chunks 5 ms apart
	// satStreams is the stream cell's concurrency and satStreamCount how
	// many streams it sends (the rig: 3,000).
	satStreams     = 64
	satStreamCount = 3000
)

// satClosed are the closed-loop cells: (connections, model).
var satClosed = []struct {
	conns int
	model string
}{{64, satFast}, {256, satFast}, {64, satSlow}, {256, satSlow}}

// satOverloads are the open-loop levels, × the sustainable rate.
var satOverloads = []float64{2, 5}

func satLoadID(conns int, model string) string { return fmt.Sprintf("closed-%d-%s", conns, model) }

func runSaturated(ctx context.Context, r *Runner, s *report.Scenario) error {
	mock := map[string]mockprovider.Behavior{
		satFast: {}, satSlow: {LatencyMS: 20},
		satStream: {ChunkCount: 20, ChunkGapMS: 5},
	}
	models := map[string]ModelSpec{satFast: {Targets: []string{""}}, satSlow: {Targets: []string{""}}, satStream: {Targets: []string{""}}}
	type cell struct {
		load  report.Load
		spec  *loadgen.Spec
		shape loadgen.Load
	}
	var closed []cell
	for _, c := range satClosed {
		closed = append(closed, cell{
			report.Load{ID: satLoadID(c.conns, c.model), Label: fmt.Sprintf("closed loop c=%d, mock %s", c.conns, strings.TrimPrefix(c.model, "sat-")+" ms")},
			chatSpec(c.model, false, "saturated", r), loadgen.Load{Concurrency: c.conns},
		})
	}
	closed = append(closed, cell{
		report.Load{ID: "streams", Label: fmt.Sprintf("%d streams of 20 chunks 5 ms apart, %d streams", satStreams, satStreamCount)},
		chatSpec(satStream, true, "saturated", r), loadgen.Load{Concurrency: satStreams, MaxRequests: satStreamCount},
	})
	sustainLoad := satLoadID(256, satSlow)
	var open []report.Load
	for _, f := range satOverloads {
		open = append(open, report.Load{ID: fmt.Sprintf("open-%gx", f), Label: fmt.Sprintf("open loop %g× the sustainable rate, mock 20 ms", f)})
	}
	for _, c := range closed {
		s.Loads = append(s.Loads, c.load)
	}
	s.Loads = append(s.Loads, open...)
	off, on := GatewayLabel("admission-off"), GatewayLabel("admission-on")

	for round := 1; round <= r.cfg.Rounds; round++ {
		// Fresh processes every round: a gateway's learnt limits do not
		// carry from one round into the next.
		env, err := r.StartEnv(ctx, s, EnvSpec{Mock: mock, Reference: true, Gateways: r.gatewaysFor(models)})
		if err != nil {
			return err
		}
		if round == 1 {
			for _, t := range env.Targets {
				s.Targets = append(s.Targets, t.Label)
			}
		}
		measure := func(l report.Load, spec *loadgen.Spec, shape loadgen.Load) error {
			return r.MeasureRound(ctx, env, s, round, CellSpec{Load: l, Spec: spec, Shape: shape, Warmup: true})
		}
		for _, c := range closed {
			if err := measure(c.load, c.spec, c.shape); err != nil {
				_ = env.Stop()
				return err
			}
		}
		sustainable, ok := cellValue(s, sustainLoad, off, round, throughput)
		if !ok {
			_ = env.Stop()
			return fmt.Errorf("saturated: admission off answered nothing at %s in round %d, so there is no sustainable rate", sustainLoad, round)
		}
		for i, f := range satOverloads {
			shape := loadgen.Load{Rate: f * sustainable, Workers: 2048}
			if err := measure(open[i], chatSpec(satSlow, false, "saturated", r), shape); err != nil {
				_ = env.Stop()
				return err
			}
		}
		if err := env.Stop(); err != nil {
			return err
		}
	}

	n := r.cfg.Rounds
	refusals := func(target, load string) func(int) (float64, bool) {
		return func(round int) (float64, bool) {
			return cellValue(s, load, target, round, func(c *report.Cell) (float64, bool) {
				return float64(c.Summary.Rejections), c.Summary.Arrivals > 0
			})
		}
	}
	for _, c := range closed {
		vals, sk := PerRound(n, ratio(s, c.load.ID, on, off, throughput))
		s.Checks = append(s.Checks, NewCheck("throughput-"+c.load.ID, s.Name, "admission-on", "Throughput on/off ("+c.load.Label+")",
			AtLeast(0.95), "×", vals, skippedNote(sk, "no successful requests")))
		vals, sk = PerRound(n, refusals(on, c.load.ID))
		s.Checks = append(s.Checks, NewCheck("refusals-"+c.load.ID, s.Name, "admission-on", "Refusals (429/503), admission on ("+c.load.Label+")",
			Exactly(0), "requests", vals, skippedNote(sk, "no requests")))
	}
	for _, l := range open {
		vals, sk := PerRound(n, ratio(s, l.ID, on, off, throughput))
		s.Checks = append(s.Checks, NewCheck("goodput-"+l.ID, s.Name, "admission-on", "Goodput on/off ("+l.Label+")",
			AtLeast(0.9), "×", vals, skippedNote(sk, "no successful requests")))
		for _, t := range []string{on, off} {
			vals, _ = PerRound(n, refusals(t, l.ID))
			s.Figures = append(s.Figures, figure("Refusals, "+t+", "+l.Label, "requests", vals))
			vals, _ = PerRound(n, func(round int) (float64, bool) {
				return cellValue(s, l.ID, t, round, func(c *report.Cell) (float64, bool) {
					return c.Summary.RejectionService.P99, c.Summary.Rejections > 0
				})
			})
			s.Figures = append(s.Figures, figure("Refusal p99 from the send, "+t+", "+l.Label, "ms", vals))
			vals, _ = PerRound(n, func(round int) (float64, bool) { return cellValue(s, l.ID, t, round, p99) })
			s.Figures = append(s.Figures, figure("Success p99, "+t+", "+l.Label, "ms", vals))
		}
	}
	vals, _ := PerRound(n, func(round int) (float64, bool) { return cellValue(s, sustainLoad, off, round, throughput) })
	s.Figures = append(s.Figures, figure("Sustainable rate (admission off, closed loop c=256, mock 20 ms)", "req/s", vals))
	for _, l := range s.Loads {
		for _, t := range s.Targets {
			vals, _ := PerRound(n, func(round int) (float64, bool) { return cellValue(s, l.ID, t, round, throughput) })
			s.Figures = append(s.Figures, figure("Goodput, "+t+", "+l.Label, "req/s", vals))
			vals, _ = PerRound(n, func(round int) (float64, bool) {
				return cellValue(s, l.ID, t, round, func(c *report.Cell) (float64, bool) { return 100 * c.MachineBusy, c.MachineBusy > 0 })
			})
			s.Figures = append(s.Figures, figure("Machine CPUs busy, "+t+", "+l.Label, "%", vals))
			if t == TargetR {
				continue
			}
			vals, _ = PerRound(n, func(round int) (float64, bool) {
				return cellValue(s, l.ID, t, round, func(c *report.Cell) (float64, bool) {
					p := c.Proc("proxy")
					if p == nil || c.Summary.ElapsedS <= 0 {
						return 0, false
					}
					return p.CPUSeconds / c.Summary.ElapsedS, true
				})
			})
			s.Figures = append(s.Figures, figure("Gateway CPU (cores), "+t+", "+l.Label, "cores", vals))
		}
	}
	vals, _ = PerRound(n, func(round int) (float64, bool) { return cellValue(s, "streams", on, round, ttft50) })
	s.Figures = append(s.Figures, figure("First token p50, "+on+", streams", "ms", vals))
	vals, _ = PerRound(n, func(round int) (float64, bool) { return cellValue(s, "streams", off, round, ttft50) })
	s.Figures = append(s.Figures, figure("First token p50, "+off+", streams", "ms", vals))
	return nil
}
