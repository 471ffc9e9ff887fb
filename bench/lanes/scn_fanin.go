package lanes

import (
	"context"
	"time"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/procstat"
)

// fanInConns is the gate's connection count of one tenant.
const fanInConns = 256

type fanInVariant struct {
	throughput float64 // req/s
	notOK      int     // answers other than 200, and failures
	statuses   map[string]int
	codes      map[string]int
	cores      float64 // CPU of this process (generator + gateway + mock) ÷ wall time
	limit      float64 // the tightest limit health reports at the end (NaN: none)
	seedRun
}

type fanInRun struct{ off, on fanInVariant }

// RunFanIn: one tenant keeps 256 connections busy (closed loop) against a
// provider that takes them all (512 slots, 20 ms). The same load runs
// against the gateway with admission off and with ADAPTIVE_ADMISSION_MODE=
// enforce and every other setting at its default (lanes off by default),
// each on a fresh gateway, the order alternating by seed. Gates: enforce
// serves ≥ 0.95× the throughput of admission off, with no refusal.
func RunFanIn(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "one-tenant-256", Full: o.Full}
	envOn := defaultsEnv()
	envOff := map[string]string{"ADAPTIVE_ADMISSION_MODE": "off"}
	conns := max(16, int(float64(fanInConns)*o.Scale))
	rep.note("variants: %s against %s (\"the defaults\": only the mode is set)", envText(envOn), envText(envOff))
	rep.note("mock 512 slots × 20 ms (±30 %%); one tenant, closed loop of %d connections (a connection refused 429/503 waits %v, an SDK's first retry delay); 1 s warm-up, then 8 s measured; CPU-bound on a small machine (cores used below)", conns, refusedPause)
	var runs []fanInRun
	for i, seed := range seedsOf(o) {
		var run fanInRun
		order := []*fanInVariant{&run.off, &run.on}
		envs := []map[string]string{envOff, envOn}
		if i%2 == 1 {
			order[0], order[1], envs[0], envs[1] = order[1], order[0], envs[1], envs[0]
		}
		for j := range order {
			v, err := runFanIn(ctx, o, seed, envs[j], conns)
			if err != nil {
				return rep, err
			}
			*order[j] = v
		}
		runs = append(runs, run)
	}
	rep.figureSeeds("admission off: throughput", colOf(runs, func(r fanInRun) float64 { return r.off.throughput }), "req/s")
	rep.figureSeeds("enforce (defaults): throughput", colOf(runs, func(r fanInRun) float64 { return r.on.throughput }), "req/s")
	rep.figureSeeds("admission off: cores used (whole process)", colOf(runs, func(r fanInRun) float64 { return r.off.cores }), "")
	rep.figureSeeds("enforce: cores used (whole process)", colOf(runs, func(r fanInRun) float64 { return r.on.cores }), "")
	rep.figureSeeds("enforce: limit at the end", colOf(runs, func(r fanInRun) float64 { return r.on.limit }), "cost")
	rep.note("statuses, first seed: off %v %v, enforce %v %v", runs[0].off.statuses, runs[0].off.codes, runs[0].on.statuses, runs[0].on.codes)
	rep.gate("256 connections: enforce throughput ÷ admission-off throughput", aggMedian,
		colOf(runs, func(r fanInRun) float64 { return r.on.throughput / r.off.throughput }), "≥ 0.95", "×",
		func(v float64) bool { return v >= 0.95 }, "same load, same machine, alternating order")
	rep.gate("256 connections: enforce answers other than 200", aggMax, colOf(runs, func(r fanInRun) float64 { return float64(r.on.notOK) }), "= 0", "answers",
		func(v float64) bool { return v == 0 }, "refusals and failures in the measured 8 s")
	on, off := runs[0].on.seed(), runs[0].off.seed()
	rep.account("one-tenant-256 (enforce)", on.samples, on.mock, on.drained, nil, false)
	rep.account("one-tenant-256 (off)", off.samples, off.mock, off.drained, nil, false)
	return rep, nil
}

func runFanIn(ctx context.Context, o Options, seed int64, env map[string]string, conns int) (fanInVariant, error) {
	var out fanInVariant
	warm, dur := phases(o, time.Second, 300*time.Millisecond), phases(o, 8*time.Second, time.Second)
	r, err := startRigWith(singleModel("fi", env, providerLatency(o, 20*time.Millisecond, 2*fanInConns), false))
	if err != nil {
		return out, err
	}
	defer r.close()
	c := loadgen.NewClient(r.addr, conns)
	defer c.Close()
	spec := &loadgen.Spec{Path: "/v1/chat/completions", Body: []byte(body("fi")), Timeout: 10 * time.Second,
		Headers: [][2]string{{"Authorization", "Bearer tenant-fi"}}}
	if _, err := loadgen.Run(ctx, c, spec, loadgen.Load{Concurrency: conns, Duration: warm, Seed: uint64(seed), PauseAfterRejection: refusedPause}); err != nil {
		return out, err
	}
	cpu0, t0 := procstat.SelfCPU(), time.Now()
	res, err := loadgen.Run(ctx, c, spec, loadgen.Load{Concurrency: conns, Duration: dur, Seed: uint64(seed), PauseAfterRejection: refusedPause})
	if err != nil {
		return out, err
	}
	out.cores = (procstat.SelfCPU() - cpu0).Seconds() / time.Since(t0).Seconds()
	lims, _, _ := r.readHealth()
	out.limit = point{limits: lims}.effectiveLimit()
	sum := loadgen.Summarize(res, false)
	out.throughput, out.notOK, out.statuses, out.codes = sum.Throughput, sum.Arrivals-sum.OK, sum.Statuses, sum.Codes
	out.settle(r, recordSamples(res.Records), nil)
	return out, nil
}
