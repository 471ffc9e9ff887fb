package lanes

import (
	"context"
	"math"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// capacityRun is one seed of the capacity step.
type capacityRun struct {
	costFrom                           string
	costV                              float64
	kneeHi, kneeLo                     float64
	limitWarm, limitHalved, limitAfter float64 // mean limit at the end of each phase
	maxHalved                          float64 // largest limit once in the band for good
	toBand                             float64 // windows from the halving until the limit stays in the band
	inBand                             bool
	toRestore                          float64 // windows from the restore until ≥ 0.9 × the knee
	restored                           bool
	halvedWindows, restoredWindows     float64 // the phases' lengths in windows
	inflightHalved, inflightRestored   float64 // mock mean in flight (second half of each phase)
	paths                              []string
	seedRun
}

// RunCapacityStep: a provider of 32 slots × 200 ms, offered 1.25× its
// capacity, loses half its slots for 20 s and gets them back. The knee in
// cost units is slots × one request's cost (as the gateway reports it).
// Gates: the limit is within 1.2× of the new knee (knee ÷ 1.2 … 1.2 ×
// knee) within 5 windows of the halving and stays there; after the restore
// it reaches 0.9× the knee within 10 windows.
func RunCapacityStep(ctx context.Context, o Options) (Report, error) {
	return gated(ctx, &o, "capacity-step", "mock 32 → 16 → 32 slots × 200 ms (±30 %), slots resized in place; one tenant at 1.25× the 32-slot capacity, clients give up after 10 s", runCapacityStep, true, func(rep *Report, runs []capacityRun) {
		rep.note("warm-up 15 s, halved 20 s, restored 20 s; health read every 100 ms; a window is 1 s (ADAPTIVE_ADMISSION_WINDOW_MS default); the limit is the tightest currentLimit health reports")
		col := func(f func(capacityRun) float64) []float64 { return colOf(runs, f) }
		rep.note("request cost: %s = %g; limit paths in health: %v", runs[0].costFrom, runs[0].costV, runs[0].paths)
		rep.figureSeeds("knee at 32 slots (slots × request cost)", col(func(r capacityRun) float64 { return r.kneeHi }), "cost")
		rep.figureSeeds("limit at the end of the warm-up ÷ knee(32)", col(func(r capacityRun) float64 { return r.limitWarm / r.kneeHi }), "×")
		rep.figureSeeds("limit at the end of the halved phase ÷ knee(16)", col(func(r capacityRun) float64 { return r.limitHalved / r.kneeLo }), "×")
		rep.figureSeeds("largest limit once in the band ÷ knee(16)", col(func(r capacityRun) float64 { return r.maxHalved / r.kneeLo }), "×")
		rep.figureSeeds("limit at the end of the restored phase ÷ knee(32)", col(func(r capacityRun) float64 { return r.limitAfter / r.kneeHi }), "×")
		rep.figureSeeds("provider mean in flight, halved (second half) ÷ 16 slots", col(func(r capacityRun) float64 { return r.inflightHalved }), "×")
		rep.figureSeeds("provider mean in flight, restored (second half) ÷ 32 slots", col(func(r capacityRun) float64 { return r.inflightRestored }), "×")
		orInf := func(v float64, ok bool) float64 {
			if !ok {
				return math.Inf(1)
			}
			return v
		}
		untested := 0
		for _, r := range runs {
			if r.limitWarm < 0.9*r.kneeHi {
				untested++
			}
		}
		rep.gateWithin("capacity halves: windows until the limit stays within 1.2× the new knee",
			col(func(r capacityRun) float64 { return orInf(r.toBand, r.inBand) }), runs[0].halvedWindows,
			"≤ 5", "windows", func(v float64) bool { return v <= 5 },
			"band knee(16) ÷ 1.2 … 1.2 × knee(16), every health read from then to the restore; %d seed(s) had not reached 0.9 × knee(32) before the halving, so the step did not test them", untested)
		rep.gateWithin("capacity restored: windows until the limit ≥ 0.9× the knee",
			col(func(r capacityRun) float64 { return orInf(r.toRestore, r.restored) }), runs[0].restoredWindows,
			"≤ 10", "windows", func(v float64) bool { return v <= 10 }, "first health read at or above 0.9 × knee(32)")
	})
}

func runCapacityStep(ctx context.Context, o Options, seed int64, env map[string]string) (capacityRun, error) {
	var out capacityRun
	latency := 200 * time.Millisecond
	r, hi, capacity, err := startSingle(o, "cap", env, 32, latency, false)
	if err != nil {
		return out, err
	}
	lo := max(1, hi/2)
	warm := phases(o, 15*time.Second, 1500*time.Millisecond)
	halved := phases(o, 20*time.Second, 1500*time.Millisecond)
	restored := phases(o, 20*time.Second, 1500*time.Millisecond)
	defer r.close()
	t0 := time.Now()
	step, back := warm, warm+halved
	for _, c := range []struct {
		at    time.Duration
		slots int
	}{{step, lo}, {back, hi}} {
		if err := r.mock.ScheduleBehavior(t0.Add(c.at), mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{"m-cap": providerLatency(o, latency, c.slots)}}); err != nil {
			return out, err
		}
	}
	ob := r.observe(t0, 100*time.Millisecond, "m-cap")
	st := stream{name: "c", rate: 1.25 * capacity, to: back + restored, path: "/v1/chat/completions", body: body("cap"),
		headers: []string{"Authorization", "Bearer tenant-cap"}, timeout: 10 * time.Second}
	ss, pts, err := out.driveOne(ctx, r, t0, seed, ob, st)
	if err != nil {
		return out, err
	}
	out.paths = limitPaths(pts)
	pts = withLimit(pts)
	out.costV, out.costFrom = measuredCost(ss, pts, estimateCost(len(body("cap"))))
	out.kneeHi, out.kneeLo = float64(hi)*out.costV, float64(lo)*out.costV
	out.halvedWindows, out.restoredWindows = halved.Seconds(), restored.Seconds()
	eff := point.effectiveLimit
	tail := func(end, span time.Duration) []point { return between(pts, end-span, end) }
	out.limitWarm = meanLimit(tail(step, 2*time.Second), eff)
	out.limitHalved = meanLimit(tail(back, 2*time.Second), eff)
	out.limitAfter = meanLimit(tail(back+restored, 2*time.Second), eff)
	inBand := func(p point) bool {
		l := p.effectiveLimit()
		return !math.IsNaN(l) && l >= out.kneeLo/1.2 && l <= 1.2*out.kneeLo
	}
	out.toBand, out.inBand = windowsUntilStays(between(pts, step, back), step, halved, inBand)
	if out.inBand {
		entered := step + time.Duration(out.toBand*float64(time.Second))
		out.maxHalved = maxLimit(between(pts, entered, back), eff)
	} else {
		out.maxHalved = maxLimit(between(pts, step, back), eff)
	}
	out.toRestore, out.restored = windowsUntilFirst(between(pts, back, back+restored), back, restored, func(p point) bool {
		return p.effectiveLimit() >= 0.9*out.kneeHi
	})
	in, _ := meanInflight(between(pts, step+halved/2, back), "m-cap")
	out.inflightHalved = in / float64(lo)
	in, _ = meanInflight(between(pts, back+restored/2, back+restored), "m-cap")
	out.inflightRestored = in / float64(hi)
	return out, nil
}

// windowsUntilStays is how many 1 s windows after from pass until cond
// holds at every later point of the phase (pts: the phase's points). When
// the last point fails it returns the phase's length and false.
func windowsUntilStays(pts []point, from, span time.Duration, cond func(point) bool) (float64, bool) {
	if len(pts) == 0 {
		return math.NaN(), false
	}
	enter := -1
	for i := len(pts) - 1; i >= 0; i-- {
		if !cond(pts[i]) {
			break
		}
		enter = i
	}
	switch {
	case enter < 0:
		return span.Seconds(), false
	case enter == 0:
		return 0, true
	}
	return math.Ceil((pts[enter].at - from).Seconds()), true
}

// windowsUntilFirst is how many 1 s windows after from pass until cond
// first holds; the phase's length and false when it never does.
func windowsUntilFirst(pts []point, from, span time.Duration, cond func(point) bool) (float64, bool) {
	for _, p := range pts {
		if cond(p) {
			return math.Ceil((p.at - from).Seconds()), true
		}
	}
	return span.Seconds(), false
}
