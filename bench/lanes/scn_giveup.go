package lanes

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// giveUpTimeout is when the clients of the give-up gate leave.
const giveUpTimeout = 300 * time.Millisecond

type giveUpRun struct {
	maxRatio, meanRatio float64 // limit ÷ knee
	cost                float64
	costFrom            string
	sent, ok, timedOut  int
	arrivedAfterLeft    int // reached the provider after their client had left
	completedAfterLeft  int // the provider finished them after their client had left
	maxQueued           int64
	maxRules            []string // the controller's last phase rule at the largest limit
	seedRun
}

// RunGiveUp: clients that give up after 300 ms offer 3× the provider's
// capacity (16 slots × 100 ms) for 20 s from a cold start. A client that
// leaves gives the controller no latency sample; the gate is that the limit
// is never above 1.3× the knee (slots × cost). Also counted from the
// mock's request log: requests that reached the provider after their
// client had left.
func RunGiveUp(ctx context.Context, o Options) (Report, error) {
	return gated(ctx, &o, "give-up", fmt.Sprintf("mock 16 slots × 100 ms (±30 %%); one tenant at 3× capacity for 20 s from a cold start; clients close their connection after %v; health read every 100 ms", giveUpTimeout), runGiveUp, true, func(rep *Report, runs []giveUpRun) {
		rep.note("request cost: %s = %g", runs[0].costFrom, runs[0].cost)
		rep.figureSeeds("requests sent", colOf(runs, func(r giveUpRun) float64 { return float64(r.sent) }), "")
		rep.figureSeeds("successes within 300 ms", colOf(runs, func(r giveUpRun) float64 { return float64(r.ok) }), "")
		rep.figureSeeds("clients that gave up", colOf(runs, func(r giveUpRun) float64 { return float64(r.timedOut) }), "")
		rep.figureSeeds("requests that reached the provider after their client left", colOf(runs, func(r giveUpRun) float64 { return float64(r.arrivedAfterLeft) }), "")
		rep.figureSeeds("requests the provider finished after their client left", colOf(runs, func(r giveUpRun) float64 { return float64(r.completedAfterLeft) }), "")
		rep.figureSeeds("most requests queued at the provider", colOf(runs, func(r giveUpRun) float64 { return float64(r.maxQueued) }), "")
		rep.figureSeeds("mean limit ÷ knee", colOf(runs, func(r giveUpRun) float64 { return r.meanRatio }), "×")
		var rules []string
		for _, r := range runs {
			rules = append(rules, strings.Join(r.maxRules, "+"))
		}
		rep.note("the controller's last phase rule at the largest limit, per seed: %s", strings.Join(rules, " / "))
		rep.gate("clients giving up: largest limit ÷ knee", aggMax, colOf(runs, func(r giveUpRun) float64 { return r.maxRatio }), "≤ 1.3", "×",
			func(v float64) bool { return v <= 1.3 }, "the tightest currentLimit in health, every 100 ms, ÷ (16 slots × request cost)")
	})
}

func runGiveUp(ctx context.Context, o Options, seed int64, env map[string]string) (giveUpRun, error) {
	var out giveUpRun
	r, slots, capacity, err := startSingle(o, "gu", env, 16, 100*time.Millisecond, true)
	if err != nil {
		return out, err
	}
	defer r.close()
	dur := phases(o, 20*time.Second, 2*time.Second)
	t0 := time.Now()
	ob := r.observe(t0, 100*time.Millisecond, "m-gu")
	st := stream{name: "c", rate: 3 * capacity, to: dur, path: "/v1/chat/completions", body: body("gu"),
		headers: []string{"Authorization", "Bearer tenant-gu"}, timeout: giveUpTimeout, tag: true}
	ss, pts, err := out.driveOne(ctx, r, t0, seed, ob, st)
	if err != nil {
		return out, err
	}
	out.cost, out.costFrom = measuredCost(ss, pts, estimateCost(len(body("gu"))))
	knee := float64(slots) * out.cost
	lim := withLimit(pts)
	out.maxRatio = maxLimit(lim, point.effectiveLimit) / knee
	out.meanRatio = meanLimit(lim, point.effectiveLimit) / knee
	out.maxRules = rulesAtMax(lim, point.effectiveLimit)
	for _, p := range pts {
		out.maxQueued = max(out.maxQueued, p.mock["m-gu"].Queued)
	}
	left := map[string]time.Time{}
	for _, s := range ss {
		out.sent++
		switch {
		case s.status == 200:
			out.ok++
		case s.timedOut:
			out.timedOut++
			left[s.id] = t0.Add(s.at + giveUpTimeout)
		}
	}
	for _, rec := range r.mock.Requests().Records {
		at, ok := left[rec.Headers["x-request-id"]]
		if !ok {
			continue
		}
		if rec.Arrived.After(at) {
			out.arrivedAfterLeft++
		}
		if rec.Outcome == "completed" && rec.Ended.After(at) {
			out.completedAfterLeft++
		}
	}
	return out, nil
}
