package lanes

import (
	"context"
	"fmt"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// latencyRun is one seed of the latency step.
type latencyRun struct {
	throughput, inflight    float64 // ÷ new capacity, ÷ slots, from 10 s after the step
	limitBefore, limitAfter float64 // ÷ knee
	p50After                float64
	seedRun
	costFrom                 string
	cost                     float64
	capacityOld, capacityNew float64
}

// RunLatencyStep: a provider of 32 slots whose service time doubles (200 →
// 400 ms) with its slots unchanged, so its capacity halves but its knee in
// flight stays 32. Offered 1.25× the old capacity throughout. Gates, from
// 10 s after the step: throughput ≥ 90 % of the new capacity, and the
// provider's mean in flight (mock ground truth) ≥ 0.9 × its slots.
func RunLatencyStep(ctx context.Context, o Options) (Report, error) {
	return gated(ctx, &o, "latency-step", "mock 32 slots, 200 → 400 ms (±30 %) after a 15 s warm-up, then 25 s; one tenant at 1.25× the 200 ms capacity, clients give up after 10 s; measured from 10 s after the step", runLatencyStep, true, func(rep *Report, runs []latencyRun) {
		col := func(f func(latencyRun) float64) []float64 { return colOf(runs, f) }
		rep.note("request cost: %s = %g", runs[0].costFrom, runs[0].cost)
		rep.figure("capacity before / after the step", runs[0].capacityOld, fmt.Sprintf("req/s / %.0f req/s", runs[0].capacityNew))
		rep.figureSeeds("limit before the step ÷ knee (slots × cost)", col(func(r latencyRun) float64 { return r.limitBefore }), "×")
		rep.figureSeeds("limit at the end ÷ knee", col(func(r latencyRun) float64 { return r.limitAfter }), "×")
		rep.figureSeeds("success p50 after the step", col(func(r latencyRun) float64 { return r.p50After }), "ms")
		rep.gate("latency doubles: throughput ÷ the new capacity", aggMedian, col(func(r latencyRun) float64 { return r.throughput }),
			"≥ 0.9", "×", func(v float64) bool { return v >= 0.9 }, "successes completed from 10 s after the step to the end, per second, ÷ slots ÷ 400 ms")
		rep.gate("latency doubles: provider mean in flight ÷ slots", aggMedian, col(func(r latencyRun) float64 { return r.inflight }),
			"≥ 0.9", "×", func(v float64) bool { return v >= 0.9 }, "mock's time-integrated in flight over the same span")
	})
}

func runLatencyStep(ctx context.Context, o Options, seed int64, env map[string]string) (latencyRun, error) {
	var out latencyRun
	slots := scaledSlots(o, 32)
	before, after := 200*time.Millisecond, 400*time.Millisecond
	out.capacityOld, out.capacityNew = float64(slots)/before.Seconds(), float64(slots)/after.Seconds()
	warm := phases(o, 15*time.Second, 1500*time.Millisecond)
	rest := phases(o, 25*time.Second, 3*time.Second)
	settle := phases(o, 10*time.Second, time.Second)
	r, err := startRigWith(singleModel("lat", env, providerLatency(o, before, slots), false))
	if err != nil {
		return out, err
	}
	defer r.close()
	t0 := time.Now()
	if err := r.mock.ScheduleBehavior(t0.Add(warm), mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{"m-lat": providerLatency(o, after, slots)}}); err != nil {
		return out, err
	}
	ob := r.observe(t0, 100*time.Millisecond, "m-lat")
	end := warm + rest
	st := stream{name: "c", rate: 1.25 * out.capacityOld, to: end, path: "/v1/chat/completions", body: body("lat"),
		headers: []string{"Authorization", "Bearer tenant-lat"}, timeout: 10 * time.Second}
	ss, pts, err := out.driveOne(ctx, r, t0, seed, ob, st)
	if err != nil {
		return out, err
	}
	out.cost, out.costFrom = measuredCost(ss, pts, estimateCost(len(body("lat"))))
	knee := float64(slots) * out.cost
	from := warm + settle
	done := 0
	for _, s := range ss {
		if fin := s.at + s.latency; s.status == 200 && fin >= from && fin < end {
			done++
		}
	}
	out.throughput = float64(done) / (end - from).Seconds() / out.capacityNew
	in, _ := meanInflight(between(pts, from, end), "m-lat")
	out.inflight = in / float64(slots)
	lim := withLimit(pts)
	out.limitBefore = meanLimit(between(lim, warm-2*time.Second, warm), point.effectiveLimit) / knee
	out.limitAfter = meanLimit(between(lim, end-2*time.Second, end), point.effectiveLimit) / knee
	out.p50After = ms(summarize(ss, func(s sample) bool { return s.at >= from }).p50)
	return out, nil
}
