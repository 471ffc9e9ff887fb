package lanes

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// incident is one way the only target of a model fails for a while.
type incident struct {
	name string
	fail mockprovider.FailSpec
	// hint is the provider's own Retry-After (0: none).
	hint time.Duration
}

var incidents = []incident{
	{"hang", mockprovider.FailSpec{Mode: mockprovider.FailHang}, 0},
	{"429 storm (Retry-After: 2)", mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 429, RetryAfter: "2"}, 2 * time.Second},
	{"503 storm", mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}, 0},
}

// recoveryGoal is the bound: traffic flows again within
// max(provider hint, 5 s) of the provider's recovery.
func (in incident) recoveryGoal() time.Duration { return max(in.hint, 5*time.Second) }

// incidentTTFB is the gateway's upstream time-to-first-byte timeout in the
// incident scenario, so a hang produces upstream timeouts (the default is
// 300 s, longer than the clients wait).
const incidentTTFB = "2000"

// incidentRun is one incident on one seed.
type incidentRun struct {
	recover       float64 // s from recovery until traffic flows (the observed span when it never did)
	span          float64 // s watched after the recovery
	flowed        bool
	firstOK       float64 // s from recovery to the first success of a request sent after it
	providerAfter int     // requests the provider received in the 5 s after recovery
	okBefore      float64 // success share before the incident
	raDuring      string
	raAfter       string
	noRetry       int // non-200 answers with X-Should-Retry: false
	codesAfter    map[string]int
	seedRun
}

// RunIncidents: the only target of a model hangs, answers 429 with
// Retry-After: 2, or answers 503 for 10 s while one tenant sends half the
// provider's capacity; then the provider recovers. Gate: traffic flows
// again (every 500 ms bin of requests sent from then on succeeds ≥ 90 %)
// within max(provider hint, 5 s) of the recovery. Also reported: the
// Retry-After values the gateway sent during and after the incident.
func RunIncidents(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	rep := Report{Scenario: "incidents", Full: o.Full}
	env := gateEnv(map[string]string{"OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS": incidentTTFB})
	rep.note("environment: %s; each incident on its own fresh gateway and mock; the three run side by side", envText(env))
	rep.note("mock 16 slots × 100 ms (±30 %%); one tenant at 50 %% of capacity, clients give up after 5 s; healthy 5 s, incident 10 s, then 20 s watched")
	rep.note("traffic flows from the first 500 ms bin (by send time, after the recovery) from which every bin has ≥ 90 %% successes")
	seeds := seedsOf(o)
	runs := make([][]incidentRun, len(incidents))
	for _, seed := range seeds {
		var wg sync.WaitGroup
		errs := make([]error, len(incidents))
		for i, in := range incidents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var run incidentRun
				run, errs[i] = runIncident(ctx, o, seed, in, env)
				runs[i] = append(runs[i], run)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return rep, err
			}
		}
	}
	for i, in := range incidents {
		rs := runs[i]
		col := func(f func(incidentRun) float64) []float64 { return colOf(rs, f) }
		rep.figureSeeds(in.name+": success before the incident", col(func(r incidentRun) float64 { return 100 * r.okBefore }), "%")
		rep.figureSeeds(in.name+": first success after recovery", col(func(r incidentRun) float64 { return r.firstOK }), "s")
		rep.figureSeeds(in.name+": provider requests in the 5 s after recovery", col(func(r incidentRun) float64 { return float64(r.providerAfter) }), "")
		rep.figureSeeds(in.name+": answers with X-Should-Retry: false", col(func(r incidentRun) float64 { return float64(r.noRetry) }), "")
		var during, after, codes []string
		for _, r := range rs {
			during = append(during, r.raDuring)
			after = append(after, r.raAfter)
			codes = append(codes, topCodes(r.codesAfter, 3))
		}
		rep.note("%s: Retry-After sent during the incident, per seed: %s", in.name, strings.Join(during, " | "))
		rep.note("%s: Retry-After sent after recovery, per seed: %s", in.name, strings.Join(after, " | "))
		rep.note("%s: error codes after recovery, per seed: %s", in.name, strings.Join(codes, " | "))
		goal := in.recoveryGoal().Seconds()
		rep.gateWithin(in.name+": traffic flows again after recovery", col(func(r incidentRun) float64 {
			if !r.flowed {
				return math.Inf(1)
			}
			return r.recover
		}), rs[0].span, fmt.Sprintf("≤ %g", goal), "s", func(v float64) bool { return v <= goal },
			"goal max(provider hint %v, 5 s)", in.hint)
	}
	var all []incidentRun
	for i := range incidents {
		all = append(all, runs[i]...)
	}
	rep.generatorFigure(colOf(all, func(r incidentRun) float64 { return r.late }), colOf(all, func(r incidentRun) float64 { return r.lagP99 }))
	for i, in := range incidents {
		b := runs[i][0].seed()
		rep.account(in.name, b.samples, b.mock, b.drained, nil, false)
	}
	return rep, nil
}

func runIncident(ctx context.Context, o Options, seed int64, in incident, env map[string]string) (incidentRun, error) {
	var out incidentRun
	slots, latency := scaledSlots(o, 16), 100*time.Millisecond
	capacity := float64(slots) / latency.Seconds()
	healthy := phases(o, 5*time.Second, 600*time.Millisecond)
	during := phases(o, 10*time.Second, 800*time.Millisecond)
	after := phases(o, 20*time.Second, 1500*time.Millisecond)
	normal := providerLatency(o, latency, slots)
	failing := normal
	failing.Fail = in.fail
	r, err := startRigWith(singleModel("inc", env, normal, true))
	if err != nil {
		return out, err
	}
	defer r.close()
	t0 := time.Now()
	recovery := healthy + during
	if err := r.mock.ScheduleBehavior(t0.Add(healthy), mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{"m-inc": failing}}); err != nil {
		return out, err
	}
	if err := r.mock.ScheduleBehavior(t0.Add(recovery), mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{"m-inc": normal}}); err != nil {
		return out, err
	}
	st := stream{name: "c", rate: 0.5 * capacity, to: recovery + after, path: "/v1/chat/completions", body: body("inc"),
		headers: []string{"Authorization", "Bearer tenant-inc"}, timeout: 5 * time.Second, tag: true}
	ss := r.drive(ctx, t0, seed, st).by["c"]
	if len(ss) == 0 {
		return out, errNoSamples
	}
	out.settle(r, ss, nil)
	out.recover, out.flowed = flowsAgain(ss, recovery, recovery+after, 500*time.Millisecond)
	out.span = after.Seconds()
	out.firstOK = math.NaN()
	codes := map[string]int{}
	var during0, after0 []sample
	okBefore, nBefore := 0, 0
	for _, s := range ss {
		switch {
		case s.at < healthy:
			nBefore++
			if s.status == 200 {
				okBefore++
			}
		case s.at < recovery:
			during0 = append(during0, s)
		default:
			after0 = append(after0, s)
			if s.status == 200 {
				if d := (s.at + s.latency - recovery).Seconds(); math.IsNaN(out.firstOK) || d < out.firstOK {
					out.firstOK = d
				}
			} else if s.code != "" {
				codes[s.code]++
			}
		}
		if s.status != 200 && strings.EqualFold(s.shouldRetry, "false") {
			out.noRetry++
		}
	}
	out.codesAfter = codes
	if nBefore > 0 {
		out.okBefore = float64(okBefore) / float64(nBefore)
	}
	out.raDuring, out.raAfter = retryAfterSummary(during0), retryAfterSummary(after0)
	for _, rec := range r.mock.Requests().Records {
		if d := rec.Arrived.Sub(t0.Add(recovery)); d >= 0 && d < 5*time.Second {
			out.providerAfter++
		}
	}
	return out, nil
}

// flowsAgain finds when traffic flows again after from: the start of the
// first bin (by send time) from which every non-empty bin up to to has at
// least 90 % successes, in seconds after from. When the last bin still
// fails it reports the watched span (a lower bound) and false.
func flowsAgain(ss []sample, from, to, bin time.Duration) (float64, bool) {
	n := int((to - from + bin - 1) / bin)
	if n <= 0 {
		return math.NaN(), false
	}
	sent, ok := make([]int, n), make([]int, n)
	for _, s := range ss {
		if s.at < from || s.at >= to {
			continue
		}
		i := int((s.at - from) / bin)
		sent[i]++
		if s.status == 200 {
			ok[i]++
		}
	}
	start := -1
	for i := n - 1; i >= 0; i-- {
		if sent[i] == 0 {
			continue
		}
		if float64(ok[i]) < 0.9*float64(sent[i]) {
			break
		}
		start = i
	}
	if start < 0 {
		return (to - from).Seconds(), false
	}
	return (time.Duration(start) * bin).Seconds(), true
}
