package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/omniroute/gateway/bench/lanes"
	"github.com/omniroute/gateway/bench/report"
)

// The admission scenarios of bench/lanes. Each runs the gateway inside the
// bench process (gateway.New over a real loopback listener) against an
// in-process mock, so it measures behaviour (who gets served, how fast,
// who is refused), not the gateway's CPU.
//
// They run only with admission on: they measure what the lanes do. With
// admission off nothing bounds the provider's FIFO queue, so the other
// tenant's latency just grows with the burst's backlog (A offers 5× the
// capacity for 20 s: minutes of queue) and the run would measure the
// client timeout.

// lanesVariant labels the checks of the lanes scenarios.
const lanesVariant = "admission-on"

const lanesEnvText = " The gateway runs inside the bench process with ADAPTIVE_ADMISSION_MODE=enforce and " +
	"OMNIROUTE_CHAT_VIRTUAL_LANES=true (bench/lanes' own configuration: the initial admission limit is set to " +
	"the provider's knee, slots × the cost of one request, where the overload scenario keeps the default); " +
	"admission off is not run, because without admission nothing bounds the provider's queue and the other " +
	"tenant's latency only measures the backlog. Tail-latency ratios are gates of the full run only (--lanes-full)."

func init() {
	for _, l := range []struct {
		name, desc string
		order      int
		run        func(context.Context, lanes.Options) (lanes.Report, error)
	}{
		{"noisy-neighbour", "Tenant A bursts to 5× the provider's capacity while tenant B runs at 30 %: B sees no " +
			"503 and its p99 stays within 1.5× of its p99 with A absent.", 50, lanes.RunNoisyNeighbour},
		{"interactive-batch", "A batch flood (x-omniroute-priority: batch, 3× capacity) beside interactive traffic " +
			"at 30 %, then interactive goes idle: interactive success ≥ 99.5 %, and batch uses ≥ 90 % of the " +
			"capacity within 2 s once interactive is idle.", 51, lanes.RunBatchFlood},
		{"fanout-lanes", "Fan-out to 8 targets of which 3 are kept at their max_concurrent by other traffic (fusion " +
			"over all 8, fusion over the 5 healthy, round-robin over 8): the mock never sees a target over its " +
			"limit, fan-out succeeds, and skipped targets are reported.", 52, lanes.RunFanout},
	} {
		Register(Scenario{Name: l.name, Order: l.order, Default: true, Description: l.desc + lanesEnvText, Run: lanesScenario(l.run)})
	}
}

func lanesScenario(run func(context.Context, lanes.Options) (lanes.Report, error)) func(context.Context, *Runner, *report.Scenario) error {
	return func(ctx context.Context, r *Runner, s *report.Scenario) error {
		load0 := loadAvg()
		rep, err := run(ctx, lanes.Options{Full: r.cfg.LanesFull, Seed: int64(r.cfg.Seed), Scale: r.cfg.LanesScale})
		if err != nil {
			return err
		}
		s.Notes = append(s.Notes, rep.Notes...)
		// These scenarios share the cores with what they measure; a busy
		// machine shows in their latencies first.
		s.Notes = append(s.Notes, fmt.Sprintf("machine load average (1 min) at the start / end of the scenario: %.2f / %.2f on %d CPUs", load0, loadAvg(), runtime.NumCPU()))
		for _, f := range rep.Figures {
			if math.IsNaN(f.Value) || math.IsInf(f.Value, 0) {
				continue // not measured; the external report has it as null
			}
			rounds := finiteOnly(f.Seeds)
			if len(rounds) == 0 {
				rounds = []float64{f.Value}
			}
			s.Figures = append(s.Figures, report.Figure{Name: f.Name, Value: f.Value, Unit: f.Unit, Rounds: rounds})
		}
		checks := make([]report.Check, len(rep.Checks))
		for i, c := range rep.Checks {
			checks[i] = lanesCheck(fmt.Sprintf("%s-%d", s.Name, i+1), c, rep.Full)
		}
		r.logf("  %s (%s run): %d figures, %d checks", s.Name, map[bool]string{true: "full", false: "smoke"}[rep.Full], len(rep.Figures), len(rep.Checks))
		return r.External(s, rep, checks...)
	}
}

// lanesCheck turns a bench/lanes gate into a report check. The verdict is
// the package's; a gate of the full run only is n/a in a smoke run, with
// what was measured in the note.
func lanesCheck(id string, c lanes.Check, full bool) report.Check {
	goal := c.Goal
	if goal == "" {
		goal = "holds"
	} else if c.Unit != "" {
		goal += " " + c.Unit
	}
	ch := report.Check{ID: id, Variant: lanesVariant, Metric: c.Name, Goal: goal, Unit: c.Unit, Note: c.Detail}
	switch {
	case !full && !c.Smoke:
		ch.Status = report.NA
		ch.Note = "a gate of the full run only (a smoke run has too few samples for a tail ratio); measured: " + c.Detail
	case c.Value == nil:
		ch.Status = report.NA
		ch.Note = "not measurable: " + c.Detail
	default:
		v := *c.Value
		ch.Value, ch.Rounds = &v, finiteOnly(c.Seeds)
		if len(ch.Rounds) == 0 {
			ch.Rounds = []float64{v}
		}
		ch.Status = report.Fail
		if c.OK {
			ch.Status = report.Pass
		}
	}
	return ch
}

// finiteOnly drops NaN (not measured) and ±Inf (never reached) values,
// which JSON cannot carry.
func finiteOnly(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}
