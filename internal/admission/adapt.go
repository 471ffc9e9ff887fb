package admission

import (
	"math"
	"time"
)

// Pressure is a resource-pressure severity observed during a window.
type Pressure uint8

// Pressure severities.
const (
	PressureNormal Pressure = iota
	PressureHigh
	PressureCritical
)

var pressureNames = [...]string{"normal", "high", "critical"}

func (p Pressure) String() string {
	if int(p) < len(pressureNames) {
		return pressureNames[p]
	}
	return "unknown"
}

// Outcome is how an admitted request ended, as the controller sees it.
type Outcome uint8

// Outcomes.
const (
	// Success: the caller got its answer.
	Success Outcome = iota
	// Cancelled: the caller left; says nothing about capacity.
	Cancelled
	// LocalReject: the request itself was refused (4xx other than 408/429).
	LocalReject
	// UpstreamError: the provider failed (5xx) or rate-limited (429).
	UpstreamError
	// Timeout: no answer in time (408, 504, or an upstream timeout).
	Timeout
)

var outcomeNames = [...]string{"success", "cancelled", "local_reject", "upstream_error", "timeout"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Completion is one released lease as the adaptation rule sees it.
type Completion struct {
	Outcome Outcome
	// Latency is the congestion sample: time to first token for a stream,
	// time to the whole answer otherwise. Used only when Sampled.
	Latency time.Duration
	// Sampled is false for outcomes that carry no latency information:
	// failures (a fast 4xx or a refused connection says nothing about
	// queueing), cancellations and probes. OmniRoute sampled them all.
	Sampled bool
	// Drops counts upstream attempts of the request that ended in a 429, a
	// 5xx or a timeout, including ones that were failed over.
	Drops int
}

// Rule names the branch of the update rule a window close took.
type Rule uint8

// Rules.
const (
	RuleHold Rule = iota
	RuleCritical
	RuleDecrease
	RuleIncrease
	RuleRecover
)

var ruleNames = [...]string{"hold", "critical", "decrease", "increase", "recover"}

func (r Rule) String() string { return ruleNames[r] }

// WindowReport describes one window close.
type WindowReport struct {
	Before, After int64
	Utilization   float64
	Gradient      float64
	Completed     int64
	Samples       int64
	Drops         int64
	Pressure      Pressure
	Rule          Rule
	// Guarded is true when the drift guard capped an increase.
	Guarded bool
	// Queueing is true when an increase was withheld because the window's
	// latency sat above the no-queue baseline (a standing queue).
	Queueing bool
	// SlowStart is true when an increase was multiplicative because demand
	// queued at the limit.
	SlowStart bool
	// Undone is true when the answers after a slow-start step showed a
	// queue, so the step was taken back: mid-window to the level before it,
	// or at the window's end to the knee estimate (see CloseWindow).
	Undone bool
}

// Adapter is the adaptive limit: dual latency EWMAs, a utilisation integral
// and the per-window update rule. It is not safe for concurrent use; one
// actor owns it.
type Adapter struct {
	cfg      Config
	limit    int64
	ceiling  int64
	short    float64 // ms
	long     float64 // ms
	winSum   float64 // ms, latency samples of the window
	winStart time.Time
	last     time.Time
	integral float64 // cost × ms, of min(active, limit)

	completed, samples, drops int64
	frozen                    bool
	limited                   bool // demand queued or was refused at the limit this window
	// ssthresh ends slow start, as in TCP: growth is multiplicative only
	// below the level at which congestion was last seen, so the limit
	// does not overshoot a provider's knee by half again every time.
	ssthresh  int64
	sinceCong int // windows since the last congestion signal
	// probeFrom is the limit before the last slow-start step (0: the last
	// window was no such step). That step is a probe: once the answers
	// admitted under it show a queue at the provider, the limit goes back
	// to probeFrom at once instead of at the window's end, so a provider
	// already at its knee sees the overshoot for a few round trips, not a
	// whole window. probeSum and probeN are the latency samples since.
	probeFrom int64
	probeSum  float64
	probeN    int64
	undone    bool // a probe was undone in this window
	// descending is the level before a slow-start step that a window
	// closing with a standing queue took back, for as long as the windows
	// after it still queue (0: not descending); see CloseWindow.
	descending   int64
	recent       [recentSamples]float64 // latest latency samples (ring), ms
	recentAt     int
	criticalUsed bool
	pressure     Pressure

	winPeak int64
	peaks   []int64 // peak in-flight cost of the last windows (ring)
	peakAt  int

	means  []float64 // mean latency of the last windows with samples (ring), ms
	meanAt int

	lastUtil float64
}

// NewAdapter starts at the clamped initial limit with the first window
// opening at now.
func NewAdapter(cfg Config, now time.Time) *Adapter {
	a := &Adapter{cfg: cfg, winStart: now, last: now}
	a.limit = cfg.ClampedInitial()
	a.ceiling = a.limit
	a.ssthresh = cfg.MaxLimit
	n := cfg.DriftGuardWindows
	if n < 1 {
		n = 1
	}
	a.peaks = make([]int64, n)
	a.means = make([]float64, baselineWindows)
	return a
}

// baselineWindows is how many windows the no-queue latency baseline
// remembers; a provider that became slower for good is re-learnt after as
// many windows.
const baselineWindows = 60

// queueHold is how far a window's mean latency may sit above the baseline
// before additive increases stop: about one request queued at a provider
// serving sixteen at a time.
const queueHold = 0.05

// Baseline is the lowest window mean latency remembered (ms; 0 = none).
func (a *Adapter) Baseline() float64 {
	b := 0.0
	for _, m := range a.means {
		if m > 0 && (b == 0 || m < b) {
			b = m
		}
	}
	return b
}

// Limit is the current limit.
func (a *Adapter) Limit() int64 { return a.limit }

// Pressure is the current window's pressure.
func (a *Adapter) Pressure() Pressure { return a.pressure }

// EWMAs returns the short and long latency EWMAs in milliseconds.
func (a *Adapter) EWMAs() (short, long float64) { return a.short, a.long }

// Utilization is the utilisation of the last closed window.
func (a *Adapter) Utilization() float64 { return a.lastUtil }

// RecentPeak is the largest in-flight cost seen over the guard's history,
// the current window included.
func (a *Adapter) RecentPeak() int64 {
	p := a.winPeak
	for _, v := range a.peaks {
		p = max(p, v)
	}
	return p
}

// Sample adds the time since the last sample, weighted by the in-flight
// cost (capped at the limit, so shadow oversubscription counts as full), to
// the utilisation integral, and records active as a peak candidate.
func (a *Adapter) Sample(now time.Time, active int64) {
	if dt := now.Sub(a.last); dt > 0 {
		a.integral += float64(min(max(active, 0), a.limit)) * float64(dt) / float64(time.Millisecond)
		a.last = now
	}
	a.winPeak = max(a.winPeak, active)
}

// ObservePeak records an in-flight peak seen between samples (the gate
// tracks the true maximum).
func (a *Adapter) ObservePeak(p int64) { a.winPeak = max(a.winPeak, p) }

// Complete records a released lease. active is the in-flight cost after the
// release. It reports whether the limit changed (a slow-start probe undone).
func (a *Adapter) Complete(now time.Time, active int64, c Completion) bool {
	a.Sample(now, active)
	a.completed++
	if c.Drops > 0 {
		a.drops += int64(c.Drops)
	}
	if c.Outcome == UpstreamError || c.Outcome == Timeout {
		a.frozen = true // as OmniRoute: a failed request alone stops growth for the window
	}
	if c.Sampled && c.Outcome == Success {
		return a.observeLatency(c.Latency)
	}
	return false
}

// Probe check: the answers since a slow-start step are judged once there
// are probeSamples of them; their mean more than probeTolerance above the
// no-queue baseline means the step put requests in the provider's queue.
// At ±30% answer-length noise the mean of 32 varies by about 3%, and the
// baseline (the lowest recent window mean) sits a few percent low, so
// 15% is well clear of noise and well below the +30-50% a real overshoot
// shows.
const (
	probeSamples   = 32
	probeTolerance = 0.15
)

// dropShare is the share of a window's completions that must have seen a
// drop (an upstream 429, 5xx or timeout) for the window to cut the limit;
// up to 100 completions a single drop does. A combo whose broken first
// target is retried once per cooldown, in front of a healthy one serving a
// thousand answers a second, would otherwise cut the limit every few
// windows down to its minimum, throttling traffic that never touched the
// broken target (breakers and cooldowns are what keep that one out); a
// provider at its capacity refuses far more than 1%.
const dropShare = 0.01

func (a *Adapter) dropsCongest() bool {
	return a.drops > 0 && float64(a.drops) >= dropShare*float64(a.completed)
}

// kneeEstimate is where a provider that queued at level starts queueing,
// by Little's law: with the provider full, answers take mean instead of
// base because level/mean of work is all it completes per unit of time, so
// it keeps level×base/mean busy without a queue. The result is kept
// between lo (known good) and hi-1 (queued), so one estimate never cuts
// below the limit before the probe however noisy the latency.
func kneeEstimate(level int64, base, mean float64, lo, hi int64) int64 {
	k := hi - 1
	if base > 0 && mean > base {
		k = int64(math.Floor(float64(level) * base / mean))
	}
	return max(lo, min(k, hi-1))
}

// checkProbe undoes the last slow-start step when its answers queue: the
// limit goes back at once, and slow start may later go only as far as the
// knee the latest answers point to (the cumulative mean that tripped the
// check still mixes in answers admitted before the step; the last
// recentSamples do not), then one step a window.
func (a *Adapter) checkProbe(s float64) bool {
	if a.probeFrom == 0 {
		return false
	}
	a.probeSum += s
	a.probeN++
	base := a.Baseline()
	if a.probeN < probeSamples || base <= 0 || a.probeSum/float64(a.probeN) <= base*(1+probeTolerance) {
		return false
	}
	stepped := a.limit
	a.limit = clamp(a.probeFrom, a.cfg.MinLimit, a.cfg.MaxLimit)
	a.ssthresh = max(a.cfg.MinLimit, kneeEstimate(stepped, base, a.recentMean(), a.limit, stepped))
	a.sinceCong = 0
	a.probeFrom = 0
	a.undone = true
	return true
}

// recentSamples is how many of the latest latency samples recentMean
// averages: enough to damp ±30% answer-length noise to about ±5%.
const recentSamples = 16

func (a *Adapter) recentMean() float64 {
	sum, n := 0.0, 0
	for _, v := range a.recent {
		if v > 0 {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// observeLatency feeds one sample into the window's mean. OmniRoute moved
// both EWMAs per sample; at a hundred completions a second that makes the
// short one the noise of the last two answers (a ±30% spread in answer
// lengths crosses the gradient threshold every window and the limit
// collapses) and the long one forgets within a tenth of a second (a limit
// creeping past the provider's knee never shows a gradient). Both now
// move once per window, toward the window's mean latency, by their alphas.
func (a *Adapter) observeLatency(d time.Duration) bool {
	s := float64(d) / float64(time.Millisecond)
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		s = 0
	}
	a.samples++
	a.winSum += s
	a.recent[a.recentAt] = s
	a.recentAt = (a.recentAt + 1) % recentSamples
	return a.checkProbe(s)
}

// NoteLimited records that demand exceeded the limit in the current window
// (a request had to queue, or would have in shadow mode).
func (a *Adapter) NoteLimited() { a.limited = true }

// Slow-start factors: a window that was full, had demand queued at the
// limit and showed no sign of congestion grows the limit by a factor
// instead of one step, up to the level where congestion was last seen
// (ssthresh). OmniRoute's one step per window takes minutes to reach a
// provider's capacity from the default 64 (a small request costs 6-7),
// refusing most of the traffic meanwhile. The first step at or above the
// initial limit is ×1.25: it probes unknown ground, and a provider already
// at its knee sees a quarter more work for the few round trips the probe
// check needs, not half as much again (the noisy-neighbour tenant's p99 is
// what a probe costs). Every further step of an unbroken run, and any step
// below the initial limit (which the operator, or the default, vouches
// for), is ×1.5, so the default 64 still reaches 400 in five windows, as
// CUBIC's max probing starts slowly and speeds up away from known ground.
const (
	regrowFactor = 1.5
	probeFactor  = 1.25
)

func (a *Adapter) slowStartStep(next int64) int64 {
	f := regrowFactor
	if next >= a.ceiling && a.probeFrom == 0 { // not continuing a run
		f = probeFactor
	}
	return int64(math.Ceil(float64(next) * f))
}

// ObservePressure raises the window's pressure. Critical pressure cuts the
// limit at once (×CriticalDecreaseFactor), once per window; it reports
// whether the limit changed.
func (a *Adapter) ObservePressure(p Pressure) bool {
	if p > a.pressure {
		a.pressure = p
	}
	if p != PressureCritical || a.criticalUsed {
		return false
	}
	a.criticalUsed = true
	next := max(a.cfg.MinLimit, int64(math.Floor(float64(a.limit)*a.cfg.CriticalDecreaseFactor)))
	changed := next != a.limit
	a.limit = next
	return changed
}

// CloseWindow applies the update rule and opens the next window at now.
// active is the in-flight cost at now.
//
// In order, the first match of: critical pressure → ×CriticalDecreaseFactor
// (unless already applied this window); high pressure, a latency gradient
// (short−long)/long ≥ LatencyGradientThreshold, or drops in at least
// dropShare of the window's completions → ×DecreaseFactor; no failure,
// normal pressure, utilisation ≥
// HighUtilizationThreshold and at least one completion → +IncreaseStep,
// capped by the drift guard, or by the slow-start factor (slowStartStep,
// up to ssthresh) when demand queued at the limit. A slow-start step is a probe: see checkProbe and the
// standing-queue case below for how one that queues is taken back. Then,
// on its own, a window at or below LowUtilizationThreshold forgets the
// gradient (short := long) and, when nothing completed, recovers one step
// toward the initial limit.
func (a *Adapter) CloseWindow(now time.Time, active int64) WindowReport {
	a.Sample(now, active)
	elapsed := float64(now.Sub(a.winStart)) / float64(time.Millisecond)
	elapsed = math.Min(math.Max(elapsed, 1), float64(a.cfg.WindowMs))
	util := a.integral / elapsed / float64(a.limit)
	if math.IsNaN(util) || util < 0 {
		util = 0
	}
	util = math.Min(util, 1)
	base := a.Baseline()
	mean := 0.0
	if a.samples > 0 {
		m := a.winSum / float64(a.samples)
		mean = m
		if a.short <= 0 && a.long <= 0 {
			a.short, a.long = m, m
		} else {
			a.short = a.cfg.ShortLatencyAlpha*m + (1-a.cfg.ShortLatencyAlpha)*a.short
			a.long = a.cfg.LongLatencyAlpha*m + (1-a.cfg.LongLatencyAlpha)*a.long
		}
	}
	gradient := 0.0
	if a.long > 0 {
		gradient = (a.short - a.long) / a.long
	}
	r := WindowReport{Before: a.limit, Utilization: util, Gradient: gradient, Completed: a.completed,
		Samples: a.samples, Drops: a.drops, Pressure: a.pressure}
	step := min(a.cfg.IncreaseStep, a.cfg.MaxIncreasePerWindow)
	next := a.limit
	switch {
	case a.pressure == PressureCritical:
		r.Rule = RuleCritical
		if !a.criticalUsed {
			next = int64(math.Floor(float64(next) * a.cfg.CriticalDecreaseFactor))
		}
	case a.pressure == PressureHigh || a.dropsCongest() ||
		(!a.undone && a.samples > 0 && gradient >= a.cfg.LatencyGradientThreshold):
		r.Rule = RuleDecrease
		next = int64(math.Floor(float64(next) * a.cfg.DecreaseFactor))
		if a.probeFrom > 0 && a.probeFrom < next {
			next, r.Undone = a.probeFrom, true // the step that caused it goes first
		}
	case a.undone:
		// A probe was undone mid-window; its answers raised this window's
		// latency, which says nothing more. Hold.
	case !a.frozen && a.pressure == PressureNormal && util >= a.cfg.HighUtilizationThreshold && a.completed > 0 &&
		base > 0 && mean > base*(1+queueHold):
		// Full, and slower than without a queue: the provider is at its
		// knee. The gradient cannot see a limit that creeps one step a
		// window (each step adds a sliver of latency and the EWMAs follow),
		// so growth stops here instead. A slow-start step that led here
		// is taken back to the knee the window's latency points to (a
		// mild overshoot, or the mid-window check would have caught it),
		// and so is each following window's limit while it still queues
		// (the estimate from a window that mixes answers from before and
		// after the step runs high), never below the level before the
		// step: latency that stays high may also be the gateway's own CPU
		// or a slower provider, which a lower limit would not cure. A
		// standing queue with no slow-start step before it only holds, as
		// OmniRoute's rule does.
		r.Queueing = true
		if lo := max(a.probeFrom, a.descending); lo > 0 {
			next = kneeEstimate(a.limit, base, mean, lo, a.limit)
			r.Undone = true
		}
	case !a.frozen && a.pressure == PressureNormal && util >= a.cfg.HighUtilizationThreshold && a.completed > 0:
		r.Rule = RuleIncrease
		want := next + step
		if a.limited && next < a.ssthresh {
			want = max(want, min(a.ssthresh, a.slowStartStep(next)))
			r.SlowStart = true
		}
		if a.cfg.DriftGuardFactor > 0 {
			guard := max(a.ceiling, int64(math.Floor(a.cfg.DriftGuardFactor*float64(a.RecentPeak()))))
			if want > guard {
				r.Guarded = true
				want = max(next, guard)
			}
		}
		next = want
	}
	if util <= a.cfg.LowUtilizationThreshold {
		a.short = a.long
		if a.pressure != PressureCritical && !a.frozen && a.completed == 0 && a.limit < a.ceiling {
			next = min(a.ceiling, next+step)
			if r.Rule == RuleHold {
				r.Rule = RuleRecover
			}
		}
	}
	// Remember where congestion showed (a cut, or growth held at a
	// standing queue) as the end of slow start; forget it after a quiet
	// minute, since providers change.
	switch {
	case a.undone: // checkProbe set it
	case r.Undone:
		a.ssthresh, a.sinceCong = max(a.cfg.MinLimit, next), 0
	case r.Rule == RuleDecrease || r.Rule == RuleCritical:
		a.ssthresh, a.sinceCong = max(a.cfg.MinLimit, int64(math.Floor(float64(r.Before)*0.9))), 0
	case r.Queueing:
		a.ssthresh, a.sinceCong = max(a.cfg.MinLimit, r.Before), 0
	default:
		if a.sinceCong++; a.sinceCong >= baselineWindows {
			a.ssthresh = a.cfg.MaxLimit
		}
	}
	a.limit = clamp(next, a.cfg.MinLimit, a.cfg.MaxLimit)
	r.After = a.limit
	r.Undone = r.Undone || a.undone
	lo := max(a.probeFrom, a.descending)
	a.descending = 0
	if r.Queueing && r.Undone {
		a.descending = lo
	}
	a.probeFrom, a.probeSum, a.probeN, a.undone = 0, 0, 0, false
	if r.SlowStart && r.After > r.Before {
		a.probeFrom = r.Before
	}
	a.lastUtil = util

	a.peaks[a.peakAt] = a.winPeak
	a.peakAt = (a.peakAt + 1) % len(a.peaks)
	if mean > 0 {
		a.means[a.meanAt] = mean
		a.meanAt = (a.meanAt + 1) % len(a.means)
	}
	a.winPeak = active
	a.integral, a.completed, a.samples, a.drops, a.winSum = 0, 0, 0, 0, 0
	a.frozen, a.criticalUsed, a.pressure, a.limited = false, false, PressureNormal, false
	a.winStart, a.last = now, now
	return r
}
