package lanes

import (
	"context"
	"fmt"
	"time"
)

// overloadLevels are the offered loads of the overload gate, × capacity.
var overloadLevels = []float64{5, 10}

// overloadLevel is one level on one seed.
type overloadLevel struct {
	goodput     float64 // ÷ capacity
	p99Ratio    float64 // success p99 ÷ unloaded p99
	p99         float64
	malformed   int // non-200 answers that are not 429/503 with Retry-After and a reason
	rejections  int
	rejP99      float64 // ms, from the actual send
	codes       map[string]int
	statuses    map[int]int
	late, lag99 float64
}

type overloadRun struct {
	unloadedP99 float64
	levels      []overloadLevel
	seedRun
}

// RunOverload: one tenant offers 5× and then 10× the provider's capacity
// (16 slots × 200 ms: 80 req/s, so 10× stays within what a small machine
// can send) for 20 s each, after a calibration at 30 %. Gates per
// level: goodput ≥ 90 % of capacity; success p99 ≤ 2× the unloaded p99;
// every refusal is a 429 or 503 with Retry-After and a reason (no other
// failure, no client timeout); refusal p99 ≤ 10 ms.
func RunOverload(ctx context.Context, o Options) (Report, error) {
	rep, runs, err := gateRuns(ctx, &o, "overload-5x-10x", runOverload, "mock 16 slots × 200 ms (±30 %%), capacity 80 req/s; one tenant: 10 s at 30 %% (unloaded p99), 20 s at 5×, 3 s idle, 20 s at 10×; clients give up after 10 s")
	if err != nil {
		return rep, err
	}
	rep.figureSeeds("unloaded success p99", colOf(runs, func(r overloadRun) float64 { return r.unloadedP99 }), "ms")
	for li, f := range overloadLevels {
		lv := func(g func(overloadLevel) float64) []float64 {
			return colOf(runs, func(r overloadRun) float64 { return g(r.levels[li]) })
		}
		name := fmt.Sprintf("%g× capacity", f)
		rep.figureSeeds(name+": success p99", lv(func(l overloadLevel) float64 { return l.p99 }), "ms")
		rep.figureSeeds(name+": refusals", lv(func(l overloadLevel) float64 { return float64(l.rejections) }), "")
		rep.note("%s, first seed: statuses %v, codes %s", name, runs[0].levels[li].statuses, topCodes(runs[0].levels[li].codes, 4))
		rep.gate(name+": goodput ÷ capacity", aggMedian, lv(func(l overloadLevel) float64 { return l.goodput }), "≥ 0.9", "×",
			func(v float64) bool { return v >= 0.9 }, "successes among the requests sent at this level, per second, ÷ slots ÷ 200 ms")
		rep.gate(name+": success p99 ÷ unloaded p99", aggMedian, lv(func(l overloadLevel) float64 { return l.p99Ratio }), "≤ 2", "×",
			func(v float64) bool { return v <= 2 }, "p99 of the successes (from the send) ÷ the calibration's")
		rep.gate(name+": answers that are neither 200 nor 429/503 with Retry-After and a reason", aggMax,
			lv(func(l overloadLevel) float64 { return float64(l.malformed) }), "= 0", "answers", func(v float64) bool { return v == 0 },
			"client timeouts and connection errors count too")
		rep.gate(name+": refusal p99", aggMedian, lv(func(l overloadLevel) float64 { return l.rejP99 }), "≤ 10", "ms",
			func(v float64) bool { return v <= 10 }, "429/503 latency from the actual send")
		rep.generatorFigure(lv(func(l overloadLevel) float64 { return 100 * l.late }), lv(func(l overloadLevel) float64 { return l.lag99 }))
	}
	b := runs[0].seed()
	rep.account("overload", b.samples, b.mock, b.drained, b.pts, true)
	return rep, nil
}

func runOverload(ctx context.Context, o Options, seed int64, env map[string]string) (overloadRun, error) {
	var out overloadRun
	r, _, capacity, err := startSingle(o, "ov", env, 16, 200*time.Millisecond, false)
	if err != nil {
		return out, err
	}
	calib := phases(o, 10*time.Second, time.Second)
	level := phases(o, 20*time.Second, time.Second)
	gap := phases(o, 3*time.Second, 500*time.Millisecond)
	defer r.close()
	base := stream{path: "/v1/chat/completions", body: body("ov"), headers: []string{"Authorization", "Bearer tenant-ov"}, timeout: 10 * time.Second}
	cal := base
	cal.name, cal.rate, cal.to = "calib", 0.3*capacity, calib
	ss := []stream{cal}
	at := calib
	for _, f := range overloadLevels {
		s := base
		s.name, s.rate, s.from, s.to = fmt.Sprintf("x%g", f), f*capacity, at, at+level
		ss = append(ss, s)
		at += level + gap
	}
	t0 := time.Now()
	ob := r.observe(t0, 250*time.Millisecond)
	res := r.drive(ctx, t0, seed, ss...)
	out.settle(r, allSamples(res), ob.finish())
	unloaded := summarize(res.by["calib"], nil)
	if unloaded.ok == 0 {
		return out, noSuccess("calibration", unloaded)
	}
	out.unloadedP99 = ms(unloaded.p99)
	for _, f := range overloadLevels {
		ls := res.by[fmt.Sprintf("x%g", f)]
		sum := summarize(ls, nil)
		l := overloadLevel{p99: ms(sum.p99), codes: sum.byCode, statuses: sum.byStatus}
		l.goodput = float64(sum.ok) / level.Seconds() / capacity
		l.p99Ratio = l.p99 / out.unloadedP99
		var rej []time.Duration
		for _, s := range ls {
			if s.status == 200 {
				continue
			}
			if !wellFormedRejection(s) {
				l.malformed++
			}
			if rejection(s) {
				rej = append(rej, s.latency)
			}
		}
		l.rejections = len(rej)
		sortDurations(rej)
		l.rejP99 = ms(pct(rej, 0.99))
		if len(rej) == 0 {
			l.rejP99 = 0
		}
		late, p99 := lateSends(ls)
		l.late, l.lag99 = late, ms(p99)
		out.levels = append(out.levels, l)
	}
	return out, nil
}
