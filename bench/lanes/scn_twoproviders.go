package lanes

import (
	"context"
	"math"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// Two providers of different capacity behind one round-robin model, each a
// provider (connection) of its own, so a per-upstream controller can tell
// them apart.
const twoProvidersFile = `{"providers":{
  "small":{"base_url":"http://MOCK/v1","apis":["chat"],"auth":"none","connections":{"default":{}}},
  "big":{"base_url":"http://MOCK/v1","apis":["chat"],"auth":"none","connections":{"default":{}}}},
 "models":{"duo":{"strategy":"round-robin","targets":[{"connection":"small","model":"m-small"},{"connection":"big","model":"m-big"}]}},
 "auth":{"mode":"loopback"}}`

// upstreamUse is one provider's ground truth over a span.
type upstreamUse struct {
	util, outstanding float64 // mean in flight ÷ slots, mean (in flight + queued) ÷ slots
	limit             float64 // its own limit in health (NaN: the gateway reports none)
}

type twoRun struct {
	smallA, bigA, smallB, bigB upstreamUse
	globalA, globalB           float64 // the tightest limit of all
	okA, okB                   float64 // successes per second
	paths                      []string
	seedRun
}

// RunTwoProviders: a round-robin model over a 16-slot and a 48-slot
// provider (200 ms each: 80 and 240 req/s) offered 1.25× their joint
// capacity; after 20 s the small one slows to 800 ms for 20 s. Gates: each
// provider runs at its own knee (mean in flight ≥ 0.9 × its slots, and in
// flight plus queued at the provider ≤ 1.2 × its slots), and while the
// small one is slow the big one still runs at its knee and its own limit
// (when the gateway reports per-upstream limits) does not fall.
func RunTwoProviders(ctx context.Context, o Options) (Report, error) {
	return gated(ctx, &o, "two-providers", "model duo: round-robin over provider small (m-small: 16 slots × 200 ms) and provider big (m-big: 48 slots × 200 ms), ±30 % latency; one tenant at 1.25× the joint 320 req/s; clients give up after 10 s", runTwoProviders, true, func(rep *Report, runs []twoRun) {
		rep.note("phase A 20 s (measured from 5 s); phase B: m-small at 800 ms for 20 s (measured from 5 s in); per-upstream limits are health currentLimits whose path names small or big")
		rep.note("limit paths in health: %v", runs[0].paths)
		use := func(f func(twoRun) upstreamUse, g func(upstreamUse) float64) []float64 {
			return colOf(runs, func(r twoRun) float64 { return g(f(r)) })
		}
		util := func(u upstreamUse) float64 { return u.util }
		out := func(u upstreamUse) float64 { return u.outstanding }
		sa, ba := func(r twoRun) upstreamUse { return r.smallA }, func(r twoRun) upstreamUse { return r.bigA }
		sb, bb := func(r twoRun) upstreamUse { return r.smallB }, func(r twoRun) upstreamUse { return r.bigB }
		rep.figureSeeds("A: successes", colOf(runs, func(r twoRun) float64 { return r.okA }), "req/s (capacity 320)")
		rep.figureSeeds("B: successes", colOf(runs, func(r twoRun) float64 { return r.okB }), "req/s (capacity 260)")
		rep.figureSeeds("A: tightest limit", colOf(runs, func(r twoRun) float64 { return r.globalA }), "cost")
		rep.figureSeeds("B: tightest limit", colOf(runs, func(r twoRun) float64 { return r.globalB }), "cost")
		rep.figureSeeds("B: m-small mean in flight ÷ slots", use(sb, util), "×")
		rep.figureSeeds("B: m-small (in flight + queued) ÷ slots", use(sb, out), "×")
		rep.figureSeeds("B: m-big (in flight + queued) ÷ slots", use(bb, out), "×")
		for _, g := range []struct {
			name string
			f    func(twoRun) upstreamUse
		}{{"A: m-small (16 slots)", sa}, {"A: m-big (48 slots)", ba}} {
			rep.gate(g.name+" mean in flight ÷ slots", aggMedian, use(g.f, util), "≥ 0.9", "×", func(v float64) bool { return v >= 0.9 }, "mock ground truth")
			rep.gate(g.name+" (in flight + queued) ÷ slots", aggMedian, use(g.f, out), "≤ 1.2", "×", func(v float64) bool { return v <= 1.2 },
				"no standing queue at the provider beyond its knee")
		}
		rep.gate("B: m-big mean in flight ÷ slots while m-small is slow", aggMedian, use(bb, util), "≥ 0.9", "×", func(v float64) bool { return v >= 0.9 },
			"a slow provider must not lower the other's limit")
		bigLimit := colOf(runs, func(r twoRun) float64 { return r.bigB.limit / r.bigA.limit })
		rep.gate("B: m-big's own limit ÷ its limit in A", aggMedian, bigLimit, "≥ 0.9", "×", func(v float64) bool { return v >= 0.9 },
			"%s", map[bool]string{true: "n/a: health reports no limit per upstream", false: "health's per-upstream currentLimit"}[math.IsNaN(median(bigLimit))])
	})
}

func runTwoProviders(ctx context.Context, o Options, seed int64, env map[string]string) (twoRun, error) {
	var out twoRun
	small, big := scaledSlots(o, 16), scaledSlots(o, 48)
	latency := 200 * time.Millisecond
	capacity := float64(small+big) / latency.Seconds()
	phaseA, phaseB := phases(o, 20*time.Second, 1500*time.Millisecond), phases(o, 20*time.Second, 1500*time.Millisecond)
	settle := phases(o, 5*time.Second, 500*time.Millisecond)
	r, err := startRig(twoProvidersFile, env, map[string]mockprovider.Behavior{
		"m-small": providerLatency(o, latency, small), "m-big": providerLatency(o, latency, big)})
	if err != nil {
		return out, err
	}
	defer r.close()
	t0 := time.Now()
	if err := r.mock.ScheduleBehavior(t0.Add(phaseA), mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{
		"m-small": providerLatency(o, 4*latency, small)}}); err != nil {
		return out, err
	}
	ob := r.observe(t0, 100*time.Millisecond, "m-small", "m-big")
	end := phaseA + phaseB
	st := stream{name: "c", rate: 1.25 * capacity, to: end, path: "/v1/chat/completions", body: body("duo"),
		headers: []string{"Authorization", "Bearer tenant-duo"}, timeout: 10 * time.Second}
	ss, pts, err := out.driveOne(ctx, r, t0, seed, ob, st)
	if err != nil {
		return out, err
	}
	out.paths = limitPaths(pts)
	spanA, spanB := between(pts, settle, phaseA), between(pts, phaseA+settle, end)
	measure := func(span []point, model, provider string, slots int) upstreamUse {
		in, q := meanInflight(span, model)
		return upstreamUse{util: in / float64(slots), outstanding: (in + q) / float64(slots),
			limit: meanLimit(span, func(p point) float64 { return p.upstreamLimit(provider) })}
	}
	out.smallA, out.bigA = measure(spanA, "m-small", "small", small), measure(spanA, "m-big", "big", big)
	out.smallB, out.bigB = measure(spanB, "m-small", "small", small), measure(spanB, "m-big", "big", big)
	out.globalA = meanLimit(withLimit(spanA), point.effectiveLimit)
	out.globalB = meanLimit(withLimit(spanB), point.effectiveLimit)
	okIn := func(from, to time.Duration) float64 {
		n := 0
		for _, s := range ss {
			if fin := s.at + s.latency; s.status == 200 && fin >= from && fin < to {
				n++
			}
		}
		return float64(n) / (to - from).Seconds()
	}
	out.okA, out.okB = okIn(settle, phaseA), okIn(phaseA+settle, end)
	return out, nil
}
