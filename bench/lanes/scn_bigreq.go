package lanes

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// sizedBody is a chat request for model whose one user message pads the
// body to size bytes (at least the request's skeleton).
func sizedBody(model string, size int) []byte {
	skel := fmt.Sprintf(smallBody, model)
	pad := max(0, size-len(skel)+len("hello"))
	return []byte(strings.Replace(skel, "hello", strings.Repeat("a", pad), 1))
}

type bigRun struct {
	bigServed          float64 // share of the 2 MiB requests answered 200
	bigSent            int
	bigCodes           map[string]int
	bigP50, bigP99     float64
	smallP99, smallU99 float64
	smallAdded         float64 // ms
	smallCodes         map[string]int
	seedRun
}

// RunBigRequests: a tenant sending 1 KiB requests at 60 % of the provider's
// capacity (16 slots × 100 ms) beside a tenant sending 2 MiB requests at 20
// %. Gates: ≥ 90 % of the 2 MiB requests are served; the small tenant's p99
// stays within its unloaded p99 + 100 ms.
func RunBigRequests(ctx context.Context, o Options) (Report, error) {
	return gated(ctx, &o, "big-requests", "mock 16 slots × 100 ms (±30 %); tenant small: 1 KiB bodies at 60 % of capacity (5 s warm-up, 10 s alone, then 20 s beside big); tenant big: 2 MiB bodies at 20 %; clients wait up to 30 s", runBigRequests, false, func(rep *Report, runs []bigRun) {
		rep.note("2 MiB request cost by internal/admission's default quanta: %g; 1 KiB: %g",
			estimateCost(2<<20), estimateCost(1<<10))
		rep.figureSeeds("2 MiB requests sent", colOf(runs, func(r bigRun) float64 { return float64(r.bigSent) }), "")
		rep.figureSeeds("2 MiB success p50", colOf(runs, func(r bigRun) float64 { return r.bigP50 }), "ms")
		rep.figureSeeds("2 MiB success p99", colOf(runs, func(r bigRun) float64 { return r.bigP99 }), "ms")
		rep.figureSeeds("1 KiB p99 alone", colOf(runs, func(r bigRun) float64 { return r.smallU99 }), "ms")
		rep.figureSeeds("1 KiB p99 beside 2 MiB", colOf(runs, func(r bigRun) float64 { return r.smallP99 }), "ms")
		rep.note("2 MiB error codes, first seed: %s; 1 KiB: %s", topCodes(runs[0].bigCodes, 4), topCodes(runs[0].smallCodes, 4))
		rep.gate("big requests: 2 MiB requests served", aggMedian, colOf(runs, func(r bigRun) float64 { return 100 * r.bigServed }), "≥ 90", "%",
			func(v float64) bool { return v >= 90 }, "200 answers among the 2 MiB requests")
		rep.gate("big requests: 1 KiB p99 added over unloaded", aggMedian, colOf(runs, func(r bigRun) float64 { return r.smallAdded }), "≤ 100", "ms",
			func(v float64) bool { return v <= 100 }, "p99 beside the 2 MiB tenant − p99 alone (after a 5 s warm-up); it says little while the 2 MiB requests are refused (served: %s %%)",
			seedList(colOf(runs, func(r bigRun) float64 { return 100 * r.bigServed })))
	})
}

func runBigRequests(ctx context.Context, o Options, seed int64, env map[string]string) (bigRun, error) {
	var out bigRun
	r, _, capacity, err := startSingle(o, "big", env, 16, 100*time.Millisecond, false)
	if err != nil {
		return out, err
	}
	warm, calib := phases(o, 5*time.Second, 500*time.Millisecond), phases(o, 10*time.Second, time.Second)
	mixed := phases(o, 20*time.Second, 2*time.Second)
	bigRate := 0.2 * capacity
	if !o.Full {
		bigRate = min(bigRate, 3) // a few 2 MiB bodies are enough to exercise the path
	}
	defer r.close()
	small := stream{name: "small-alone", rate: 0.6 * capacity, to: warm, path: "/v1/chat/completions", bodyRaw: sizedBody("big", 1<<10),
		headers: []string{"Authorization", "Bearer tenant-small"}, timeout: 30 * time.Second}
	// A warm-up first: 60 % of capacity is more than the default initial
	// limit admits at once, and a calibration that includes the limit's
	// climb would make "unloaded" slower than steady state.
	r.drive(ctx, time.Now(), seed+2, small)
	small.to = calib
	unloaded := summarize(r.drive(ctx, time.Now(), seed, small).by["small-alone"], nil)
	if unloaded.ok == 0 {
		return out, noSuccess("calibration", unloaded)
	}
	small.name, small.to = "small", mixed
	big := stream{name: "big", rate: bigRate, to: mixed, path: "/v1/chat/completions", bodyRaw: sizedBody("big", 2<<20),
		headers: []string{"Authorization", "Bearer tenant-big"}, timeout: 30 * time.Second}
	res := r.drive(ctx, time.Now(), seed+1, small, big)
	out.settle(r, allSamples(res), nil)
	sm, bg := summarize(res.by["small"], nil), summarize(res.by["big"], nil)
	if bg.n == 0 || sm.n == 0 {
		return out, errNoSamples
	}
	out.bigSent, out.bigServed, out.bigCodes = bg.n, bg.successRate(), bg.byCode
	out.bigP50, out.bigP99 = math.NaN(), math.NaN()
	if bg.ok > 0 {
		out.bigP50, out.bigP99 = ms(bg.p50), ms(bg.p99)
	}
	out.smallU99, out.smallP99, out.smallCodes = ms(unloaded.p99), ms(sm.p99), sm.byCode
	out.smallAdded = out.smallP99 - out.smallU99
	return out, nil
}
