package lanes

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// requestCost is the admission cost of the scenarios' small chat
// requests: one place at the provider.
const requestCost = 1

const smallBody = `{"model":"%s","messages":[{"role":"user","content":"hello"}]}`

func body(model string) string { return fmt.Sprintf(smallBody, model) }

func lanesEnv(slots int) map[string]string {
	return map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "enforce", "OMNIROUTE_CHAT_VIRTUAL_LANES": "true",
		// Start at the provider's knee: slots requests of cost 1.
		"ADAPTIVE_ADMISSION_INITIAL_LIMIT": strconv.Itoa(slots * requestCost),
	}
}

const singleModelFile = `{"providers":{"mock":{"base_url":"http://MOCK/v1","apis":["chat"],"auth":"none","connections":{"default":{}}}},
 "models":{"%s":{"targets":[{"connection":"mock","model":"%s"}]}},"auth":{"mode":"loopback"}}`

// singleModel is the rig most scenarios run: model name, served by the
// mock's model m-<name> (behaving as b), on env; requestLog as rigSpec's.
func singleModel(name string, env map[string]string, b mockprovider.Behavior, requestLog bool) rigSpec {
	upstream := "m-" + name
	return rigSpec{file: fmt.Sprintf(singleModelFile, name, upstream), env: env,
		behaviors: map[string]mockprovider.Behavior{upstream: b}, requestLog: requestLog}
}

// startSingle starts the singleModel rig of one provider with
// scaledSlots(o, base) slots answering in latency (providerLatency), and
// returns it with those slots and the provider's capacity in requests a
// second.
func startSingle(o Options, name string, env map[string]string, base int, latency time.Duration, requestLog bool) (*rig, int, float64, error) {
	slots := scaledSlots(o, base)
	r, err := startRigWith(singleModel(name, env, providerLatency(o, latency, slots), requestLog))
	return r, slots, float64(slots) / latency.Seconds(), err
}

func scaledSlots(o Options, base int) int { return max(4, int(math.Round(float64(base)*o.Scale))) }

// providerLatency is the mock behaviour of a model with mean latency mean
// and slots slots: ±30% uniform jitter unless Options.Lockstep.
func providerLatency(o Options, mean time.Duration, slots int) mockprovider.Behavior {
	ms := int(mean / time.Millisecond)
	if o.Lockstep {
		return mockprovider.Behavior{LatencyMS: ms, Slots: slots}
	}
	return mockprovider.Behavior{LatencyMS: ms * 7 / 10, LatencyJitterMS: ms * 6 / 10, Slots: slots}
}

// sampleMock records a model's in-flight and queued counts at the mock
// every 20 ms until stop is closed.
func sampleMock(m *mockprovider.Server, model string, t0 time.Time, stop <-chan struct{}) func() []mockPoint {
	var mu sync.Mutex
	var pts []mockPoint
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				c, _ := m.ModelCounters(model)
				mu.Lock()
				pts = append(pts, mockPoint{at: time.Since(t0), inflight: c.Inflight, queued: c.Queued})
				mu.Unlock()
			}
		}
	}()
	return func() []mockPoint {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return pts
	}
}

type mockPoint struct {
	at       time.Duration
	inflight int64
	queued   int64
}

// RunNoisyNeighbour: tenant B sends steady traffic at 30% of the provider's
// capacity while tenant A bursts to 5× capacity. Gates: B sees no 503, and
// B's p99 stays within 1.5× of its p99 with A absent.
func RunNoisyNeighbour(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "noisy-neighbour", Full: o.Full}
	slots := scaledSlots(o, 16)
	nn, err := runNoisyNeighbour(ctx, o, lanesEnv(slots), o.Seed)
	if err != nil {
		return rep, err
	}
	loaded, unloaded := nn.loaded, nn.unloaded
	rep.figure("B admission wait p50 / p99", ms(pct(nn.waits, 0.5)), fmt.Sprintf("ms / %.0f ms", ms(pct(nn.waits, 0.99))))
	rep.figure("provider capacity (slots / latency)", nn.capacity, "req/s")
	rep.figure("B offered", nn.bRate, "req/s")
	rep.figure("A offered", nn.aRate, "req/s")
	rep.figure("B unloaded p50", ms(unloaded.p50), "ms")
	rep.figure("B unloaded p99", ms(unloaded.p99), "ms")
	rep.figure("B with A bursting p50", ms(loaded.p50), "ms")
	rep.figure("B with A bursting p99", ms(loaded.p99), "ms")
	rep.figure("B p99 ratio", nn.ratio, "x")
	rep.figure("B requests / non-200", float64(loaded.n), fmt.Sprintf("(non-200: %d)", loaded.non200()))
	rep.figure("A goodput", nn.goodput, fmt.Sprintf("req/s (%.0f%% of capacity left by B)", 100*nn.goodputShare))
	rep.figure("A rejected (503)", float64(nn.a.byStatus[503]), "requests")
	rep.figure("max requests queued at the provider", float64(nn.maxQueued), "")
	rep.figure("limit at the end", nn.limitEnd, "cost")
	rep.checkv("B sees no 503", float64(loaded.non200()), "= 0", "non-200", loaded.byStatus[503] == 0 && loaded.non200() == 0, false,
		"%d of %d B requests failed (%v %v)", loaded.non200(), loaded.n, loaded.byStatus, loaded.byCode)
	rep.checkv("ran: every B request answered (200 or a coded refusal)", float64(loaded.answered()), fmt.Sprintf("= %d", loaded.n), "requests", loaded.n > 0 && loaded.answered() == loaded.n, true,
		"%d of %d answered (%v %v)", loaded.answered(), loaded.n, loaded.byStatus, loaded.byCode)
	rep.checkv("B p99 within 1.5x of unloaded", nn.ratio, "≤ 1.5", "×", nn.ratio <= 1.5, false, "%.1f ms vs %.1f ms unloaded (%.2fx)", ms(loaded.p99), ms(unloaded.p99), nn.ratio)
	return rep, nil
}

// nnRun is one noisy-neighbour run.
type nnRun struct {
	capacity, bRate, aRate float64
	unloaded, loaded, a    summary
	ratio                  float64 // B p99 with A ÷ without
	goodput, goodputShare  float64 // A's successes per second, and ÷ the capacity B leaves
	maxQueued              int64
	limitEnd               float64
	waits                  []time.Duration // B's admission waits, sorted
	seedRun
}

// runNoisyNeighbour runs B alone (calibration, seed) and then B beside A's
// burst (seed+1) on a fresh gateway with env.
func runNoisyNeighbour(ctx context.Context, o Options, env map[string]string, seed int64) (nnRun, error) {
	var out nnRun
	r, slots, capacity, err := startSingle(o, "nn", env, 16, 100*time.Millisecond, false)
	if err != nil {
		return out, err
	}
	defer r.close()
	out.capacity = capacity
	calib, burst := phases(o, 10*time.Second, 1500*time.Millisecond), phases(o, 20*time.Second, 2500*time.Millisecond)
	b := stream{name: "b", rate: 0.3 * out.capacity, path: "/v1/chat/completions", body: body("nn"), headers: []string{"Authorization", "Bearer tenant-b"}, capture: "X-OmniRoute-Admission-Wait-Ms"}
	a := stream{name: "a", rate: 5 * out.capacity, path: "/v1/chat/completions", body: body("nn"), headers: []string{"Authorization", "Bearer tenant-a"}}
	out.bRate, out.aRate = b.rate, a.rate
	o.Logger.Info("noisy neighbour: calibration", "slots", slots, "capacityRps", out.capacity)
	b.to = calib
	out.unloaded = summarize(r.drive(ctx, time.Now(), seed, b).by["b"], nil)
	o.Logger.Info("noisy neighbour: burst")
	b.to, a.to = burst, burst
	stop := make(chan struct{})
	t1 := time.Now()
	collect := sampleMock(r.mock, "m-nn", t1, stop)
	res := r.drive(ctx, t1, seed+1, b, a)
	close(stop)
	pts := collect()
	if out.unloaded.ok == 0 {
		return out, noSuccess("calibration", out.unloaded)
	}
	if len(res.by["b"]) == 0 {
		return out, errNoSamples
	}
	out.settle(r, allSamples(res), nil)
	out.loaded = summarize(res.by["b"], nil)
	out.a = summarize(res.by["a"], nil)
	out.limitEnd = float64(r.gw.Lanes().Snapshot().CurrentLimit)
	for _, p := range pts {
		out.maxQueued = max(out.maxQueued, p.queued)
	}
	out.ratio = ms(out.loaded.p99) / ms(out.unloaded.p99)
	for _, s := range res.by["b"] {
		n, _ := strconv.Atoi(s.header)
		out.waits = append(out.waits, time.Duration(n)*time.Millisecond)
	}
	sortDurations(out.waits)
	out.goodput = float64(out.a.ok) / burst.Seconds()
	out.goodputShare = out.goodput / (out.capacity - out.bRate)
	return out, nil
}

// RunBatchFlood: an interactive tenant at 30% of capacity while a batch
// tenant floods at 3×; then interactive goes idle. Gates: interactive
// success ≥ 99.5%; batch uses ≥ 90% of capacity within 2 s of
// interactive going idle.
func RunBatchFlood(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "batch-flood", Full: o.Full}
	slots, latency := scaledSlots(o, 16), 100*time.Millisecond
	capacity := float64(slots) / latency.Seconds()
	r, err := startRigWith(singleModel("bf", lanesEnv(slots), providerLatency(o, latency, slots), false))
	if err != nil {
		return rep, err
	}
	defer r.close()
	calib, flood, idle := phases(o, 5*time.Second, time.Second), phases(o, 15*time.Second, 2*time.Second), phases(o, 5*time.Second, 2500*time.Millisecond)
	in := stream{name: "interactive", rate: 0.3 * capacity, path: "/v1/chat/completions", body: body("bf"), headers: []string{"Authorization", "Bearer user"}}
	bt := stream{name: "batch", rate: 3 * capacity, path: "/v1/chat/completions", body: body("bf"),
		headers: []string{"Authorization", "Bearer bulk", "X-OmniRoute-Priority", "batch"}}
	in.to = calib
	unloaded := summarize(r.drive(ctx, time.Now(), o.Seed, in).by["interactive"], nil)
	in.to, bt.to = flood, flood+idle
	stop := make(chan struct{})
	t1 := time.Now()
	collect := sampleMock(r.mock, "m-bf", t1, stop)
	res := r.drive(ctx, t1, o.Seed+1, in, bt)
	close(stop)
	pts := collect()
	if unloaded.ok == 0 {
		return rep, noSuccess("calibration", unloaded)
	}
	inter := summarize(res.by["interactive"], nil)
	batchFlood := summarize(res.by["batch"], func(s sample) bool { return s.at < flood })
	lastInteractive := time.Duration(0)
	for _, s := range res.by["interactive"] {
		lastInteractive = max(lastInteractive, s.at)
	}
	target := int64(math.Ceil(0.9 * float64(slots)))
	fill := time.Duration(-1)
	var floodInflight, idleInflight, nFlood, nIdle float64
	for _, p := range pts {
		switch {
		case p.at > flood/3 && p.at < flood:
			floodInflight += float64(p.inflight)
			nFlood++
		case p.at > lastInteractive+2*time.Second && p.at < flood+idle:
			idleInflight += float64(p.inflight)
			nIdle++
		}
		if fill < 0 && p.at > lastInteractive && p.inflight >= target {
			fill = p.at - lastInteractive
		}
	}
	rep.figure("provider capacity", capacity, "req/s")
	rep.figure("interactive unloaded p95", ms(unloaded.p95), "ms")
	rep.figure("interactive under batch flood p95", ms(inter.p95), "ms")
	rep.figure("interactive under batch flood p99", ms(inter.p99), "ms")
	rep.figure("interactive success", 100*inter.successRate(), fmt.Sprintf("%% of %d", inter.n))
	rep.figure("batch goodput during the flood", float64(batchFlood.ok)/flood.Seconds(), "req/s")
	if nFlood > 0 {
		rep.figure("mean provider in-flight during the flood", floodInflight/nFlood, fmt.Sprintf("of %d slots", slots))
	}
	if nIdle > 0 {
		rep.figure("mean provider in-flight, interactive idle (after 2 s)", idleInflight/nIdle, fmt.Sprintf("of %d slots", slots))
	}
	rep.figure("time for batch to reach 90% of capacity after interactive stopped", ms(fill), "ms")
	rep.checkv("interactive success >= 99.5%", 100*inter.successRate(), "≥ 99.5", "%", inter.successRate() >= 0.995, false, "%d of %d succeeded (%v)", inter.ok, inter.n, inter.byStatus)
	rep.checkv("ran: every interactive request answered (200 or a coded refusal)", float64(inter.answered()), fmt.Sprintf("= %d", inter.n), "requests", inter.n > 0 && inter.answered() == inter.n, true,
		"%d of %d answered (%v %v)", inter.answered(), inter.n, inter.byStatus, inter.byCode)
	// Never reached: report the time watched as a lower bound (it fails).
	fillMS := ms(flood + idle - lastInteractive)
	if fill >= 0 {
		fillMS = ms(fill)
	}
	rep.checkv("batch >= 90% of capacity within 2 s of interactive idle", fillMS, "≤ 2000", "ms", fill >= 0 && fill <= 2*time.Second, false,
		"%s", fillDetail(target, fill, flood+idle-lastInteractive))
	rep.checkv("interactive p95 within 1.2x of unloaded", ms(inter.p95)/ms(unloaded.p95), "≤ 1.2", "×", ms(inter.p95) <= 1.2*ms(unloaded.p95), false,
		"%.1f ms vs %.1f ms", ms(inter.p95), ms(unloaded.p95))
	return rep, nil
}

const fanoutTargets = 8

// fanoutFile: eight upstream models behind one connection; fusion "fo"
// over all eight, "fo5" over the five healthy ones, round-robin "fo-rr"
// over all eight, and background models bg-5..bg-7 that share (and keep
// full) the caps of the last three.
func fanoutFile(slots func(i int) int) string {
	var t8, t5 []string
	for i := 0; i < fanoutTargets; i++ {
		t := fmt.Sprintf(`{"connection":"mock","model":"m-fo-%d","max_concurrent":%d}`, i, slots(i))
		t8 = append(t8, t)
		if i < 5 {
			t5 = append(t5, t)
		}
	}
	models := []string{
		`"fo":{"strategy":"fusion","targets":[` + strings.Join(t8, ",") + `],"fusion":{"quorum":3,"judge":"fo-judge"}}`,
		`"fo5":{"strategy":"fusion","targets":[` + strings.Join(t5, ",") + `],"fusion":{"quorum":3,"judge":"fo-judge"}}`,
		`"fo-rr":{"strategy":"round-robin","targets":[` + strings.Join(t8, ",") + `]}`,
		`"fo-judge":{"targets":[{"connection":"mock","model":"m-fo-judge"}]}`,
	}
	for i := 5; i < fanoutTargets; i++ {
		models = append(models, fmt.Sprintf(`"bg-%d":{"targets":[{"connection":"mock","model":"m-fo-%d","max_concurrent":%d}]}`, i, i, slots(i)))
	}
	return `{"providers":{"mock":{"base_url":"http://MOCK/v1","apis":["chat"],"auth":"none","connections":{"default":{}}}},
 "models":{` + strings.Join(models, ",") + `},"auth":{"mode":"loopback"}}`
}

// RunFanout: fusion and round-robin fan-out to eight targets, three of them
// kept at their concurrency limit by other traffic. Gates: the mock never
// sees a target over its limit (its slots reject any excess), fan-out
// requests succeed, and skipped targets are reported.
func RunFanout(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "fanout-8-with-3-saturated", Full: o.Full}
	// Five healthy targets (8 slots, 50 ms) and three slow ones (4 slots,
	// 300 ms) that background traffic keeps full. The gateway's
	// max_concurrent equals the mock's slots; the mock rejects any excess.
	slots := func(i int) int {
		if i >= 5 {
			return 4
		}
		return 8
	}
	behaviors := map[string]mockprovider.Behavior{"m-fo-judge": {LatencyMS: 20}}
	for i := 0; i < fanoutTargets; i++ {
		lat := 50
		if i >= 5 {
			lat = 300
		}
		behaviors[fmt.Sprintf("m-fo-%d", i)] = mockprovider.Behavior{LatencyMS: lat, Slots: slots(i), OverSlots: "reject"}
	}
	env := map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce", "OMNIROUTE_CHAT_VIRTUAL_LANES": "true",
		"ADAPTIVE_ADMISSION_INITIAL_LIMIT": "1000", "ADAPTIVE_ADMISSION_MAX_LIMIT": "1000"}
	r, err := startRig(fanoutFile(slots), env, behaviors)
	if err != nil {
		return rep, err
	}
	defer r.close()
	dur := phases(o, 15*time.Second, 2*time.Second)
	bgRate := 10 * 4 / 0.3 * o.Scale // ten times a saturated target's capacity
	var ss []stream
	for i := 5; i < fanoutTargets; i++ {
		m := fmt.Sprintf("bg-%d", i)
		ss = append(ss, stream{name: m, rate: bgRate, to: dur, path: "/v1/chat/completions", body: body(m), headers: []string{"Authorization", "Bearer background"}})
	}
	ss = append(ss,
		stream{name: "fo", rate: 6 * o.Scale, to: dur, path: "/v1/chat/completions", body: body("fo"), headers: []string{"Authorization", "Bearer fanout"}, capture: "X-OmniRoute-Fusion-Panel"},
		stream{name: "fo5", rate: 6 * o.Scale, to: dur, path: "/v1/chat/completions", body: body("fo5"), headers: []string{"Authorization", "Bearer fanout5"}},
		stream{name: "fo-rr", rate: 24 * o.Scale, to: dur, path: "/v1/chat/completions", body: body("fo-rr"), headers: []string{"Authorization", "Bearer rr"}, capture: "X-OmniRoute-Skipped-Targets"},
	)
	// Let the background fill the three saturated targets first.
	for i := range ss[3:] {
		ss[3+i].from = 300 * time.Millisecond
	}
	res := r.drive(ctx, time.Now(), o.Seed, ss...)
	fo, fo5, rr := summarize(res.by["fo"], nil), summarize(res.by["fo5"], nil), summarize(res.by["fo-rr"], nil)
	if fo.n == 0 || rr.n == 0 {
		return rep, errNoSamples
	}
	skipped, reported := 0, 0
	for _, s := range res.by["fo"] {
		if i := strings.Index(s.header, "skipped="); i >= 0 {
			n, _ := strconv.Atoi(strings.SplitN(s.header[i+len("skipped="):], ";", 2)[0])
			skipped += n
			reported++
		}
	}
	rrSkips := 0
	for _, s := range res.by["fo-rr"] {
		if s.header != "" {
			rrSkips++
		}
	}
	st := r.mock.Stats()
	over, overCap := int64(0), false
	var maxIn []string
	for i := 0; i < fanoutTargets; i++ {
		c := st.Models[fmt.Sprintf("m-fo-%d", i)]
		over += c.Failed
		overCap = overCap || c.MaxInflight > int64(slots(i))
		maxIn = append(maxIn, fmt.Sprintf("%d/%d", c.MaxInflight, slots(i)))
	}
	bg503 := 0
	for i := 5; i < fanoutTargets; i++ {
		bg503 += summarize(res.by[fmt.Sprintf("bg-%d", i)], nil).byStatus[503]
	}
	snap := r.gw.Lanes().Snapshot()
	rep.figure("fusion over 8 (3 saturated): success", 100*fo.successRate(), fmt.Sprintf("%% of %d", fo.n))
	rep.figure("fusion over 8: p50 / p99", ms(fo.p50), fmt.Sprintf("ms / %.1f ms", ms(fo.p99)))
	rep.figure("fusion over the 5 healthy only: p50 / p99", ms(fo5.p50), fmt.Sprintf("ms / %.1f ms", ms(fo5.p99)))
	rep.figure("added p99 latency of the 3 saturated targets", ms(fo.p99-fo5.p99), "ms")
	rep.figure("mean panel members skipped per fusion request", float64(skipped)/float64(max(reported, 1)), "")
	rep.figure("round-robin over 8: success", 100*rr.successRate(), fmt.Sprintf("%% of %d", rr.n))
	rep.figure("round-robin requests that reported skipped targets", float64(rrSkips), "")
	rep.figure("background requests refused targets_busy", float64(bg503), "")
	rep.figure("try-acquires that found no room (snapshot busyCount)", float64(snap.BusyCount), "")
	rep.checkv("the mock never sees a target over its limit", float64(over), "= 0", "requests", over == 0 && !overCap, true,
		"%d requests found every slot taken; max in flight by target %s", over, strings.Join(maxIn, " "))
	rep.checkv("fan-out requests succeed (the lower of fusion and round-robin)", 100*min(fo.successRate(), rr.successRate()), "≥ 99", "%", fo.successRate() >= 0.99 && rr.successRate() >= 0.99, false,
		"fusion %d/%d, round-robin %d/%d (%v %v)", fo.ok, fo.n, rr.ok, rr.n, fo.byCode, rr.byCode)
	rep.checkv("ran: every fan-out request answered (200 or a coded refusal)", float64(fo.answered()+rr.answered()), fmt.Sprintf("= %d", fo.n+rr.n), "requests", fo.n > 0 && rr.n > 0 && fo.answered() == fo.n && rr.answered() == rr.n, true,
		"fusion %d of %d, round-robin %d of %d answered (%v %v)", fo.answered(), fo.n, rr.answered(), rr.n, fo.byStatus, rr.byStatus)
	rep.checkv("skipped targets are reported (fusion answers naming their panel; skips seen)", 100*float64(reported)/float64(fo.n), "= 100", "%", reported == fo.n && skipped > 0 && rrSkips > 0 && snap.BusyCount > 0, true,
		"%d fusion responses of %d reported their panel (%d members skipped in all); %d round-robin answers named skipped targets", reported, fo.n, skipped, rrSkips)
	return rep, nil
}

func fillDetail(target int64, fill, watched time.Duration) string {
	if fill < 0 {
		return fmt.Sprintf("never reached %d in flight in the %v watched after interactive stopped", target, watched.Round(time.Millisecond))
	}
	return fmt.Sprintf("reached %d in flight after %v", target, fill)
}
