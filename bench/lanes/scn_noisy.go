package lanes

import (
	"context"
	"fmt"
)

// RunNoisyNeighbourDefaults is the noisy neighbour with the defaults: no
// initial limit tuned to the knee, no lanes setting, only
// ADAPTIVE_ADMISSION_MODE=enforce (the gate needs enforce; the default is
// shadow). Tenant B at 30 % of capacity, A bursting to 5× for 20 s. Gates:
// B p99 ≤ 1.5× its unloaded p99, B refusals ≤ 0.5 %, A's goodput ≥ 90 % of
// the capacity B leaves.
func RunNoisyNeighbourDefaults(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "noisy-neighbour-defaults", Full: o.Full}
	env := defaultsEnv()
	rep.note("environment: %s (the defaults: only the mode is set, because the gate needs enforce)", envText(env))
	rep.note("mock 16 slots × 100 ms (±30 %%); B alone at 30 %% for 10 s, then B beside A at 5× for 20 s")
	runs, err := runSeeds(o, func(seed int64) (nnRun, error) { return runNoisyNeighbour(ctx, o, env, seed) })
	if err != nil {
		return rep, err
	}
	rep.figureSeeds("B unloaded p99", colOf(runs, func(r nnRun) float64 { return ms(r.unloaded.p99) }), "ms")
	rep.figureSeeds("B p99 beside A", colOf(runs, func(r nnRun) float64 { return ms(r.loaded.p99) }), "ms")
	rep.figureSeeds("A goodput", colOf(runs, func(r nnRun) float64 { return r.goodput }), fmt.Sprintf("req/s (capacity %.0f)", runs[0].capacity))
	rep.figureSeeds("limit at the end", colOf(runs, func(r nnRun) float64 { return r.limitEnd }), "cost")
	rep.figureSeeds("most requests queued at the provider", colOf(runs, func(r nnRun) float64 { return float64(r.maxQueued) }), "")
	rep.note("B statuses, first seed: %v %s; A: %v %s", runs[0].loaded.byStatus, topCodes(runs[0].loaded.byCode, 3), runs[0].a.byStatus, topCodes(runs[0].a.byCode, 3))
	rep.gate("defaults: B p99 ÷ unloaded", aggMedian, colOf(runs, func(r nnRun) float64 { return r.ratio }), "≤ 1.5", "×",
		func(v float64) bool { return v <= 1.5 }, "B's p99 beside A's burst ÷ B's p99 alone")
	rep.gate("defaults: B refusals", aggMedian, colOf(runs, func(r nnRun) float64 {
		rej := 0
		for st, n := range r.loaded.byStatus {
			if st != 200 {
				rej += n
			}
		}
		return 100 * float64(rej) / float64(max(1, r.loaded.n))
	}), "≤ 0.5", "%", func(v float64) bool { return v <= 0.5 }, "B's answers other than 200")
	rep.gate("defaults: A goodput ÷ the capacity B leaves", aggMedian, colOf(runs, func(r nnRun) float64 { return r.goodputShare }), "≥ 0.9", "×",
		func(v float64) bool { return v >= 0.9 }, "A's successes per second ÷ (capacity − B's rate)")
	closeOut(&rep, "noisy-neighbour-defaults", runs, false)
	return rep, nil
}
