package lanes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// Helpers of the issue-11 gate scenarios (scn_*.go): seeds, aggregation
// over seeds, and the accounting every smoke run asserts.
//
// Each gate scenario runs once per seed (Seed, Seed+1, Seed+2 in the full
// run; Seed alone in the smoke run), each on a fresh mock and gateway. A
// latency, throughput or time-to-recover gate compares the median over the
// seeds with its goal; an invariant (no rejection without Retry-After, no
// request sent upstream after its deadline, the limit never above a bound)
// compares the worst seed. Every gate is a gate of the full run only: a
// smoke run checks only that the scenario ran and that its counts add up.

// seedsOf returns the seeds of a run.
func seedsOf(o Options) []int64 {
	if o.Full {
		return []int64{o.Seed, o.Seed + 1, o.Seed + 2}
	}
	return []int64{o.Seed}
}

// agg says how a gate combines its per-seed values.
type agg int

const (
	aggMedian agg = iota // latency, throughput, time to recover
	aggMax               // an invariant whose worst value is the largest
	aggMin               // an invariant whose worst value is the smallest
)

func (a agg) of(v []float64) float64 {
	switch a {
	case aggMax:
		return extreme(v, func(x, y float64) bool { return x > y })
	case aggMin:
		return extreme(v, func(x, y float64) bool { return x < y })
	}
	return median(v)
}

func (a agg) String() string {
	return [...]string{"median", "worst (largest)", "worst (smallest)"}[a]
}

// median of the values that are not NaN (NaN when none).
func median(v []float64) float64 {
	var ok []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return math.NaN()
	}
	sort.Float64s(ok)
	if len(ok)%2 == 1 {
		return ok[len(ok)/2]
	}
	return (ok[len(ok)/2-1] + ok[len(ok)/2]) / 2
}

// extreme is the value that wins better over every other; a NaN (not
// measured) wins, so an invariant that could not be measured on one seed
// is not measured.
func extreme(v []float64, better func(x, y float64) bool) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	out := v[0]
	for _, x := range v {
		if math.IsNaN(x) {
			return x
		}
		if better(x, out) {
			out = x
		}
	}
	return out
}

func seedList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = trimFloat(x)
	}
	return strings.Join(parts, " / ")
}

func trimFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.IsInf(x, 1):
		return "∞"
	case math.Abs(x) >= 100 || x == math.Trunc(x):
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// gate records a full-run gate over per-seed values: the aggregate is its
// value, pass decides on it (a NaN never passes), and the detail gets the
// per-seed values appended.
func (r *Report) gate(name string, a agg, vals []float64, goal, unit string, pass func(float64) bool, format string, args ...any) {
	v := a.of(vals)
	ok := !math.IsNaN(v) && pass(v)
	detail := fmt.Sprintf(format, args...)
	if len(vals) > 1 {
		detail += fmt.Sprintf(" [%s of %d seeds: %s]", a, len(vals), seedList(vals))
	}
	r.checkv(name, v, goal, unit, ok, false, "%s", detail)
	r.Checks[len(r.Checks)-1].Seeds = append([]float64(nil), vals...)
}

// gateWithin is gate for a time-to-reach value where +Inf marks a seed that
// never got there within the watched span: an infinite median fails with
// the span as its value (a lower bound).
func (r *Report) gateWithin(name string, vals []float64, span float64, goal, unit string, pass func(float64) bool, format string, args ...any) {
	never := 0
	for _, v := range vals {
		if math.IsInf(v, 1) {
			never++
		}
	}
	detail := fmt.Sprintf(format, args...)
	if never > 0 {
		detail += fmt.Sprintf("; %d of %d seed(s) never got there within the watched %s %s (∞)", never, len(vals), trimFloat(span), unit)
	}
	if v := aggMedian.of(vals); math.IsInf(v, 1) {
		r.checkv(name, span, goal, unit, false, false, "%s; the value is the watched span, a lower bound [median of %d seeds: %s]", detail, len(vals), seedList(vals))
		r.Checks[len(r.Checks)-1].Seeds = append([]float64(nil), vals...)
		return
	}
	r.gate(name, aggMedian, vals, goal, unit, pass, "%s", detail)
}

// figureSeeds records the median of per-seed values as a figure.
func (r *Report) figureSeeds(name string, vals []float64, unit string) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: median(vals), Unit: unit, Seeds: append([]float64(nil), vals...)})
}

// account is the smoke check of every gate scenario: it ran (samples
// exist), every request has one outcome, no client success lacks a
// completion at the provider, and the mock's own books balance once
// drained; needLimit adds that health reported an admission limit.
func (r *Report) account(name string, ss []sample, m mockprovider.Counters, drained bool, pts []point, needLimit bool) {
	s := summarize(ss, nil)
	buckets := 0
	for _, n := range s.byStatus {
		buckets += n
	}
	limits := 0
	for _, p := range pts {
		if !math.IsNaN(p.effectiveLimit()) {
			limits++
		}
	}
	balanced := m.Requests == m.Completed+m.Failed+m.Cancelled
	ok := s.n > 0 && buckets == s.n && int64(s.ok) <= m.Completed && drained && balanced && (!needLimit || limits > 0)
	r.checkv(name+": ran, every request accounted for", float64(s.n), "> 0", "requests", ok, true,
		"%d requests (%d ok, statuses %v); provider: %d received = %d completed + %d failed + %d cancelled (drained %t); %d health reads with a limit",
		s.n, s.ok, s.byStatus, m.Requests, m.Completed, m.Failed, m.Cancelled, drained, limits)
}

// drainWait bounds how long a run waits for the mock to finish every
// request. It is a wait, not a figure: the wait ends as soon as the mock
// is drained, and only a request the gateway never ends (the leak the
// smoke check's "drained" looks for) uses all of it; a few seconds were
// not enough for a -race gateway on a loaded machine.
const drainWait = time.Minute

// drain waits up to d for the mock to finish every request (the gateway may
// still be serving requests whose clients left) and returns its totals.
func (r *rig) drain(d time.Duration) (mockprovider.Counters, bool) {
	deadline := time.Now().Add(d)
	for {
		t := r.mock.Stats().Totals
		if t.Inflight == 0 && t.Queued == 0 {
			return t, true
		}
		if time.Now().After(deadline) {
			return t, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lateSends is the share of samples the generator sent more than 5 ms late
// and their p99 lag: a loaded machine's generator falls behind before the
// gateway does, and the figure says so instead of hiding it.
func lateSends(ss []sample) (share float64, p99 time.Duration) {
	if len(ss) == 0 {
		return 0, 0
	}
	lags := make([]time.Duration, len(ss))
	late := 0
	for i, s := range ss {
		lags[i] = s.lag
		if s.lag > 5*time.Millisecond {
			late++
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	return float64(late) / float64(len(ss)), pct(lags, 0.99)
}

// generatorFigure reports the generator's lateness over seeds.
func (r *Report) generatorFigure(shares, p99s []float64) {
	r.figureSeeds("generator: sends > 5 ms late", shares, "% (more than 5 % means the offered load was not achieved on time)")
	r.figureSeeds("generator: p99 send lag", p99s, "ms")
}

// allSamples flattens results.
func allSamples(res *results) []sample {
	var out []sample
	for _, ss := range res.by {
		out = append(out, ss...)
	}
	return out
}

// rejection reports whether a sample is a refusal (429 or 503).
func rejection(s sample) bool { return s.status == 429 || s.status == 503 }

// wellFormedRejection: 429 or 503 with Retry-After and a reason (the body's
// error code or an X-OmniRoute-Reason header).
func wellFormedRejection(s sample) bool {
	return rejection(s) && s.retryAfter != "" && (s.code != "" || s.reason != "")
}

// retryAfterSummary describes the Retry-After values of samples: count,
// min / median / max seconds and any value that is not a number.
func retryAfterSummary(ss []sample) string {
	var secs []float64
	other := map[string]int{}
	for _, s := range ss {
		if s.retryAfter == "" {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(s.retryAfter, "%g", &v); err == nil {
			secs = append(secs, v)
		} else {
			other[s.retryAfter]++
		}
	}
	if len(secs) == 0 && len(other) == 0 {
		return "none"
	}
	sort.Float64s(secs)
	out := fmt.Sprintf("%d answers", len(secs)+len(other))
	if len(secs) > 0 {
		out += fmt.Sprintf(", min %s s / median %s s / max %s s", trimFloat(secs[0]), trimFloat(median(secs)), trimFloat(secs[len(secs)-1]))
	}
	if len(other) > 0 {
		out += fmt.Sprintf(", other values %v", other)
	}
	return out
}

// topCodes renders the most frequent error codes.
func topCodes(byCode map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range byCode {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var parts []string
	for i, x := range all {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", x.k, x.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// gateEnv is the environment of a gate scenario: enforce and virtual lanes
// explicitly (the defaults will change), every other admission setting at
// its default, plus extra.
func gateEnv(extra map[string]string) map[string]string {
	env := map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce", "OMNIROUTE_CHAT_VIRTUAL_LANES": "true"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// openGate opens the report of a scenario run on gateEnv(nil), as the
// gated scenarios all begin: the options' defaults, the report, and the
// environment as its first note.
func openGate(o *Options, scenario string) (Report, map[string]string) {
	o.defaults()
	rep := Report{Scenario: scenario, Full: o.Full}
	env := gateEnv(nil)
	rep.note("environment: %s", envText(env))
	return rep, env
}

// gateRuns opens a gated scenario's report (openGate), notes what it
// runs (about, formatted with args) and runs run once a seed on the gate
// environment.
func gateRuns[R any](ctx context.Context, o *Options, scenario string, run func(context.Context, Options, int64, map[string]string) (R, error),
	about string, args ...any) (Report, []R, error) {
	rep, env := openGate(o, scenario)
	rep.note(about, args...)
	runs, err := runSeeds(*o, func(seed int64) (R, error) { return run(ctx, *o, seed, env) })
	return rep, runs, err
}

// gated is a gated scenario whose report ends as most do: gateRuns (about
// is plain text), then report adds the scenario's figures, notes and
// gates over the seeds' runs, then closeOut under the scenario's own name.
func gated[R seeded](ctx context.Context, o *Options, scenario, about string, run func(context.Context, Options, int64, map[string]string) (R, error),
	needLimit bool, report func(rep *Report, runs []R)) (Report, error) {
	rep, runs, err := gateRuns(ctx, o, scenario, run, "%s", about)
	if err != nil {
		return rep, err
	}
	report(&rep, runs)
	closeOut(&rep, scenario, runs, needLimit)
	return rep, nil
}

// defaultsEnv is the environment of a gate that says "with the defaults":
// only the mode, because the gate needs enforce (the default is shadow).
func defaultsEnv() map[string]string { return map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce"} }

// envText renders an environment for a report figure's label.
func envText(env map[string]string) string {
	var parts []string
	for k, v := range env {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// colOf maps per-seed runs to one value each.
func colOf[T any](runs []T, f func(T) float64) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// finite is v, or nil for NaN and ±Inf (JSON has neither).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func finites(vs []float64) []*float64 {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*float64, len(vs))
	for i, v := range vs {
		out[i] = finite(v)
	}
	return out
}

// MarshalJSON writes a figure with null for a value that was not measured.
func (f Figure) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name  string
		Value *float64
		Unit  string
		Seeds []*float64 `json:",omitempty"`
	}{f.Name, finite(f.Value), f.Unit, finites(f.Seeds)})
}

// MarshalJSON writes a check with null for a per-seed value that was not
// measured (or ∞: never reached).
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	return json.Marshal(struct {
		plain
		Seeds []*float64 `json:",omitempty"`
	}{plain(c), finites(c.Seeds)})
}

// refusedPause is how long a closed-loop client of the gate scenarios
// waits after a 429 or 503 before its next request (the Anthropic and
// OpenAI SDKs' first retry delay), so a refused client does not spin.
const refusedPause = 500 * time.Millisecond

// seedRun is what every gate scenario keeps of one seed for its accounting
// check and the generator figure; the scenarios' per-seed results embed it.
type seedRun struct {
	samples []sample
	pts     []point
	mock    mockprovider.Counters
	drained bool
	// late is the share (%) of sends more than 5 ms behind schedule, lagP99
	// the p99 send lag (ms).
	late, lagP99 float64
}

// settle drains the mock (waiting up to drainWait) and keeps the seed's samples
// and observations.
func (b *seedRun) settle(r *rig, ss []sample, pts []point) {
	b.samples, b.pts = ss, pts
	b.mock, b.drained = r.drain(drainWait)
	late, p99 := lateSends(ss)
	b.late, b.lagP99 = 100*late, ms(p99)
}

// driveOne is a one-stream gate's seed: it drives st from t0, stops the
// observer and settles the run; a stream that made no request is
// errNoSamples.
func (b *seedRun) driveOne(ctx context.Context, r *rig, t0 time.Time, seed int64, ob *observer, st stream) ([]sample, []point, error) {
	ss := r.drive(ctx, t0, seed, st).by[st.name]
	pts := ob.finish()
	if len(ss) == 0 {
		return nil, nil, errNoSamples
	}
	b.settle(r, ss, pts)
	return ss, pts, nil
}

func (b seedRun) seed() seedRun { return b }

// seeded is a per-seed result.
type seeded interface{ seed() seedRun }

// runSeeds runs f for every seed of the run, in order.
func runSeeds[T any](o Options, f func(seed int64) (T, error)) ([]T, error) {
	var out []T
	for _, seed := range seedsOf(o) {
		v, err := f(seed)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// closeOut adds the generator's lateness over every seed and the smoke
// check of the first seed (needLimit: health must have reported a limit).
func closeOut[T seeded](rep *Report, name string, runs []T, needLimit bool) {
	rep.generatorFigure(colOf(runs, func(r T) float64 { return r.seed().late }), colOf(runs, func(r T) float64 { return r.seed().lagP99 }))
	b := runs[0].seed()
	rep.account(name, b.samples, b.mock, b.drained, b.pts, needLimit)
}
