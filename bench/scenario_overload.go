package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

func init() {
	Register(Scenario{
		Name: "overload", Order: 30, Default: true, Run: runOverload,
		Description: "Open loop at twice the gateway's own closed-loop capacity (measured by passthrough in the same " +
			"run, or here if passthrough did not run) against a mock with a fixed number of slots sized so that " +
			"the upstream's knee sits at that capacity (slots = capacity × service time). A steady cell at half " +
			"the capacity comes first. Reported: goodput vs capacity, how excess requests were refused " +
			"(429/503, Retry-After, how fast), client timeouts, and memory vs the steady cell.",
	})
}

// rejectFastMS is "rejected fast": the p99 latency of 429/503 answers.
const rejectFastMS = 5

func runOverload(ctx context.Context, r *Runner, s *report.Scenario) error {
	var gws []GatewaySpec
	for _, v := range r.cfg.Variants {
		gws = append(gws, GatewaySpec{Label: GatewayLabel(v.Name), Variant: v.Name, Models: map[string]ModelSpec{
			"fast": {Targets: []string{""}},
			"knee": {Targets: []string{"knee-" + v.Name}},
		}})
	}
	env, err := r.StartEnv(ctx, s, EnvSpec{Mock: map[string]mockprovider.Behavior{"fast": {}}, Gateways: gws})
	if err != nil {
		return err
	}
	defer env.Stop()

	// Capacity: from passthrough, else measured here.
	capacity := map[string]float64{}
	capLoad := report.Load{ID: "capacity", Label: fmt.Sprintf("capacity, closed loop c=%d", r.cfg.Concurrency)}
	for _, v := range r.cfg.Variants {
		if r.cfg.OverloadCapacity > 0 {
			capacity[v.Name] = r.cfg.OverloadCapacity
			continue
		}
		if c := r.capacity[v.Name]; c > 0 {
			capacity[v.Name] = c
			continue
		}
		if len(s.Loads) == 0 {
			s.Loads = append(s.Loads, capLoad)
		}
		cell, err := r.Measure(ctx, env, s, env.Target(GatewayLabel(v.Name)), CellSpec{
			Load: capLoad, Round: 1, Spec: chatSpec("fast", false, "overload", r),
			Shape: loadgen.Load{Concurrency: r.cfg.Concurrency}, Warmup: true,
		})
		if err != nil {
			return err
		}
		if cell.Summary.Throughput <= 0 {
			return fmt.Errorf("could not measure the capacity of %s: no request succeeded", GatewayLabel(v.Name))
		}
		capacity[v.Name] = cell.Summary.Throughput
	}
	// One run per variant, plus, for a variant whose adaptive controller
	// enforces, the same variant with its limit started at the upstream's
	// knee: the default initial limit (64 cost units, 9 of the benchmark's
	// requests) is far below this mock's slots, and the limit grows by one
	// unit per window, so the default run measures the initial limit; the
	// knee run measures the admission mechanism at a limit that fits.
	type run struct {
		variant, label, model string
		capacity              float64
		slots                 int
	}
	var runs []run
	cost := requestCost(chatBody("knee", false))
	models := map[string]mockprovider.Behavior{}
	for _, v := range r.cfg.Variants {
		slots := max(1, int(math.Ceil(capacity[v.Name]*float64(r.cfg.OverloadLatencyMS)/1000)))
		runs = append(runs, run{variant: v.Name, label: GatewayLabel(v.Name), model: "knee-" + v.Name, capacity: capacity[v.Name], slots: slots})
		if v.Env["ADAPTIVE_ADMISSION_MODE"] != "enforce" {
			continue
		}
		limit := int64(slots) * cost
		name := v.Name + "-knee"
		g := GatewaySpec{Label: GatewayLabel(name), Variant: v.Name,
			Env: map[string]string{
				"ADAPTIVE_ADMISSION_INITIAL_LIMIT": fmt.Sprint(limit),
				"ADAPTIVE_ADMISSION_MAX_LIMIT":     fmt.Sprint(max(limit, 1000)),
			},
			Models: map[string]ModelSpec{"knee": {Targets: []string{"knee-" + name}}}}
		if _, err := r.AddGateway(ctx, env, s, g); err != nil {
			return err
		}
		runs = append(runs, run{variant: v.Name + ", limit at knee", label: g.Label, model: "knee-" + name, capacity: capacity[v.Name], slots: slots})
		s.Figures = append(s.Figures, figure("Initial admission limit of "+g.Label+" (slots × "+fmt.Sprint(cost)+", the cost of one request)", "cost units", []float64{float64(limit)}))
	}
	for _, rn := range runs {
		models[rn.model] = mockprovider.Behavior{LatencyMS: r.cfg.OverloadLatencyMS, Slots: rn.slots, OverSlots: "queue"}
	}
	if err := env.MockAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: models}); err != nil {
		return fmt.Errorf("configure the mock's slots: %w", err)
	}

	steady := report.Load{ID: "steady", Label: "open loop at 0.5× capacity"}
	over := report.Load{ID: "overload", Label: fmt.Sprintf("open loop at %g× capacity", r.cfg.OverloadFactor)}
	s.Loads = append(s.Loads, steady, over)
	for _, rn := range runs {
		s.Targets = append(s.Targets, rn.label)
	}
	spec := chatSpec("knee", false, "overload", r)
	for round := 1; round <= r.cfg.Rounds; round++ {
		for _, rn := range Rotate(runs, round-1) {
			t := env.Target(rn.label)
			for _, l := range []struct {
				load   report.Load
				factor float64
			}{{steady, 0.5}, {over, r.cfg.OverloadFactor}} {
				cs := CellSpec{Load: l.load, Round: round, Spec: spec, Warmup: l.load.ID == steady.ID,
					Shape: loadgen.Load{Rate: rn.capacity * l.factor, Workers: r.cfg.OverloadWorkers}}
				if _, err := r.Measure(ctx, env, s, t, cs); err != nil {
					return err
				}
				if err := env.waitMockIdle(ctx, rn.model, r.cfg.Timeout); err != nil {
					return err
				}
			}
		}
	}

	n := r.cfg.Rounds
	for _, rn := range runs {
		g := rn.label
		cp := rn.capacity
		note := ""
		if k := saturatedRounds(s, over.ID, g); k > 0 {
			note = fmt.Sprintf("generator saturated in %d of %d round(s): the offered rate was not achieved on time, so part of the latency and timeouts is the generator's", k, n)
		}
		overCell := func(f func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
			return func(round int) (float64, bool) { return cellValue(s, over.ID, g, round, f) }
		}
		vals, _ := PerRound(n, overCell(func(c *report.Cell) (float64, bool) { return c.Summary.Throughput / cp, true }))
		s.Checks = append(s.Checks, NewCheck("overload-goodput", s.Name, rn.variant, "Goodput at overload / capacity",
			AtLeast(0.9), "×", vals, note))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			m := &c.Summary
			excess := m.Arrivals - m.OK
			if excess == 0 {
				return 100, true
			}
			return 100 * float64(m.RejectionsRetryAfter) / float64(excess), true
		}))
		s.Checks = append(s.Checks, NewCheck("overload-rejected", s.Name, rn.variant,
			"Unserved requests answered 429/503 with Retry-After", Exactly(100), "%", vals, note))
		vals, sk := PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			return c.Summary.RejectionLatency.P99, c.Summary.RejectionLatency.N > 0
		}))
		rejNote := skippedNote(sk, "no 429/503 answers")
		if note != "" {
			rejNote = strings.TrimPrefix(rejNote+"; "+note, "; ")
		}
		s.Checks = append(s.Checks, NewCheck("overload-reject-p99", s.Name, rn.variant, "Rejection latency p99",
			AtMost(rejectFastMS), "ms", vals, rejNote))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			return float64(c.Summary.Timeouts + c.Summary.NotSent), true
		}))
		s.Checks = append(s.Checks, NewCheck("overload-timeouts", s.Name, rn.variant,
			fmt.Sprintf("Client timeouts (%s, incl. arrivals never sent within it)", r.cfg.Timeout), Exactly(0), "", vals, note))
		// The steady state is the smallest steady-cell peak: a process
		// rarely gives memory back, so a later round's steady cell starts
		// from what the previous overload grew.
		var steadyRSS int64
		for _, c := range s.Cells {
			if p := c.Proc("proxy"); c.Load == steady.ID && c.Target == g && p != nil && p.PeakRSS > 0 && (steadyRSS == 0 || p.PeakRSS < steadyRSS) {
				steadyRSS = p.PeakRSS
			}
		}
		vals, sk = PerRound(n, func(round int) (float64, bool) {
			o := s.Find(over.ID, g, round)
			if o == nil || o.Proc("proxy") == nil || steadyRSS == 0 {
				return 0, false
			}
			return float64(o.Proc("proxy").PeakRSS) / float64(steadyRSS), true
		})
		s.Checks = append(s.Checks, NewCheck("overload-rss", s.Name, rn.variant, "Peak RSS at overload / steady state (smallest steady-cell peak)",
			AtMost(2), "×", vals, skippedNote(sk, "no memory samples")))

		s.Figures = append(s.Figures, figure("Capacity of "+g, "req/s", []float64{cp}),
			figure("Mock slots for "+g, "", []float64{float64(rn.slots)}))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) { return c.Summary.Rate, true }))
		s.Figures = append(s.Figures, figure("Offered rate at overload, "+g, "req/s", vals))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) { return c.Summary.Throughput, true }))
		s.Figures = append(s.Figures, figure("Goodput at overload, "+g, "req/s", vals))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			return float64(c.Summary.LateSends), c.Summary.SendLag != nil
		}))
		s.Figures = append(s.Figures, figure("Generator sends more than 1 ms late at overload, "+g, "", vals))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			return c.Summary.RejectionService.P99, c.Summary.RejectionService.N > 0
		}))
		s.Figures = append(s.Figures, figure("Rejection p99 from the actual send (without the generator's lag), "+g, "ms", vals))
		vals, _ = PerRound(n, overCell(func(c *report.Cell) (float64, bool) {
			if c.Summary.SendLag == nil {
				return 0, false
			}
			return c.Summary.SendLag.P99, true
		}))
		s.Figures = append(s.Figures, figure("Generator send lag p99 at overload, "+g, "ms", vals))
		s.Figures = append(s.Figures, admissionFigures(env.Target(g))...)
	}
	if st, err := env.MockAdmin.Stats(); err == nil {
		for _, rn := range runs {
			m := st.Models[rn.model]
			s.Figures = append(s.Figures, figure("Mock max in flight behind "+rn.label+" (slots "+fmt.Sprint(rn.slots)+")",
				"", []float64{float64(m.MaxInflight)}))
		}
	}
	return env.Stop()
}

// admissionFigures reads what the adaptive controller of t did over the
// scenario (its health at the end): the limit it ended at, the peak cost
// it held, its admissions and its rejections by reason.
func admissionFigures(t *Target) []report.Figure {
	a, err := admissionHealth(t.Addr)
	if err != nil || a.Mode == "off" {
		return nil
	}
	one := func(v float64) []float64 { return []float64{v} }
	out := []report.Figure{
		figure(fmt.Sprintf("Admission (%s) limit at the end, %s", a.Mode, t.Label), "cost units", one(float64(a.CurrentLimit))),
		figure("Admitted by the adaptive controller over the scenario, "+t.Label, "", one(float64(a.AdmittedCount))),
		figure("Try-acquires that found no room (busyCount), "+t.Label, "", one(float64(a.BusyCount))),
	}
	for _, k := range slices.Sorted(maps.Keys(a.RejectedByReason)) {
		out = append(out, figure(fmt.Sprintf("Rejected by the adaptive controller, %s, %s", k, t.Label), "", one(float64(a.RejectedByReason[k]))))
	}
	return out
}

// waitMockIdle waits until the mock has nothing in flight for model (what
// clients abandoned at the end of an overload cell), at most limit.
func (e *Env) waitMockIdle(ctx context.Context, model string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		st, err := e.MockAdmin.Stats()
		if err != nil {
			return fmt.Errorf("read mock stats: %w", err)
		}
		if st.Models[model].Inflight == 0 {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// saturatedRounds counts the rounds whose cell had a saturated generator.
func saturatedRounds(s *report.Scenario, load, target string) int {
	k := 0
	for _, c := range s.Cells {
		if c.Load == load && c.Target == target && c.Summary.GeneratorSaturated {
			k++
		}
	}
	return k
}
