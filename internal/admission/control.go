package admission

import (
	"math"
	"time"

	"github.com/omniroute/gateway/internal/enum"
	"github.com/omniroute/gateway/internal/pressure"
)

// Controller is one upstream's adaptive admission limit: how much work
// (in cost units, one per small request) the gateway keeps in flight at
// the provider. It follows the provider's capacity both ways and does not
// mistake slower for congested.
//
// It rests on Little's law, as TCP BBR does: at the knee of a provider
// with S slots and service time T, the requests in flight are S whatever T
// is, and any excess waits in the provider's queue. So the controller does
// not compare latencies with a fixed baseline and cut by a factor; it
// measures, in phases of about two service times, the mean in flight I,
// each answer's latency against its kind's no-queue latency (time to first
// token for streams, the whole answer otherwise) and the share of the time
// the answers spent waiting rather than being served. When answers queue,
// the knee is I × (1 − waited/held), and the limit is set to it at once,
// so a halved capacity is found in a phase or two. When they do not queue
// but demand exceeds the limit, the limit was too low: it grows ×1.25 per
// phase until a queue first shows (cold start, after measuring the
// no-queue latency at 4), ×1.5 back toward a knee it knew, and at a known
// knee it probes ×1.15 every 6 to 12 phases (less often while the knee
// stays put), judged against the phase before it and by Little's law,
// which finds restored capacity within seconds and keeps the limit within
// a fifth of the knee.
//
// Slower is not congested: when the answers at the limit queue with no
// probe before it, the next phase is a test at three quarters of the
// limit. If latency falls with the load, the provider was queueing and the
// limit goes to the knee measured before the test; if it stays (the
// provider got slower, or the answers got longer), the no-queue latencies
// are re-learnt from the test and the limit stays. A test whose drains
// could not lower the load (the limit at its floor) re-learns nothing. A minimum-latency
// baseline that never re-learns is what made Vegas-style controllers
// collapse to a third of capacity after a latency step.
//
// Abandoned and timed-out requests are evidence, not silence: a caller
// that left or an attempt that timed out is a sample of at least the time
// it waited, and requests still waiting for their first byte count with
// twice their mean age (the mean age of a steady stream of requests in
// flight is half their latency), so a hang or a queue that makes callers
// give up raises the measured latency instead of leaving no sample. Upstream
// 429s, 5xx and timeouts in at least 1 % of a phase's answers cut the limit
// to 90 % of what was served.
//
// The Controller is not safe for concurrent use; one actor owns it. It
// reads the gate's counters through Reading and never sleeps: the caller
// drives it with Observe and Tick on its own clock.
type Controller struct {
	cfg   ControlConfig
	base  float64 // the knee estimate, cost units
	limit int64   // the limit in effect: base × the phase's gain
	kind  phaseKind

	phaseStart  time.Time
	measureFrom time.Time
	m           measure
	atMeasure   Reading // the gate's counters when measurement began
	haveStart   bool    // atMeasure holds a reading

	// The controller's state falls in groups, each read and written by
	// its own part of the decision (see the type of each).
	latencies
	knees
	probing
	testRun
	cpuBound
	hangMemory

	pressure     Pressure
	criticalAt   time.Time
	last         PhaseReport
	phases       uint64
	queueSeen    bool
	lastReadings Reading
}

// latencies: what the answers' timing says about the provider and the
// gateway. baseline is the no-queue latency per kind of sample, seconds
// (0: not yet known), and baseErr its relative standard error; heldEWMA
// the mean time an answer holds its slot.
type latencies struct {
	baseline [numKinds]float64
	baseErr  [numKinds]float64
	// startN, startSum and startSq accumulate the answers of start-up
	// phases without a queue: the first no-queue latency is their mean, so
	// that it rests on every answer seen before the first queue rather
	// than on one phase's.
	startN   [numKinds]int
	startSum [numKinds]float64
	startSq  [numKinds]float64
	heldEWMA float64
	// local is the gateway's own mean wait to read an answer over the
	// last judged phase (seconds).
	local float64
	// shortEWMA and longEWMA follow the answers' latencies (seconds; the
	// OmniRoute health names shortLatencyEwma and longLatencyEwma, with
	// its weights): what operators' dashboards plot, not what the
	// controller decides by.
	shortEWMA, longEWMA float64
}

// knees: where answers began to queue, and what a fall of it has
// not yet confirmed.
type knees struct {
	// knee is the last level at which answers queued (0: never), and
	// kneeAt when.
	knee   float64
	kneeAt time.Time
	// prevKnee is the knee before it last fell, while the fall is not
	// yet confirmed (0: none).
	prevKnee float64
	// calmKnee is the knee last found by a phase judged while the CPU
	// was not used up (0: none): growth on the gateway's own saturation
	// alone stops at calmHeadroom times it, so a busy CPU never doubles
	// the limit far past a capacity the provider showed without noise
	// (measured: 16 slots pushed to 800 while 2 MiB bodies used the CPU).
	calmKnee float64
	// highKnee is the highest knee found within highMemory, and highAt
	// when it was last found there: capacity that fell (an incident, a
	// burst of other callers on a shared provider) usually comes back to
	// it. While the knee sits well below it, probes stay as frequent as
	// after a move, and once two probe steps pass the knee without a
	// queue the limit grows back toward it ×1.5 a phase rather than ×1.15
	// (measured on the controller's simulation, 32 slots halved for 20 s
	// and restored: the knee took more than 10 s to return in 8 of 40
	// seeds, up to 19 s, probing every 12 phases of 0.4 s and climbing
	// ×1.15 a phase).
	highKnee float64
	highAt   time.Time
}

// probing: the cruise between probes above the limit, and what a probe
// is compared with.
type probing struct {
	// lastFull is the last judged phase if it was a cruise or a probe
	// full with demand waiting: what a probe is compared with (an unsure
	// probe is compared with the same phase again); probeUnsure counts
	// the repeats of an unsure probe; cruiseLeft counts phases at the
	// limit before the next probe.
	lastFull    phaseMeasure
	probeUnsure int
	cruiseLeft  int
	// cruiseEvery is the number of cruise phases between probes: it
	// doubles (up to maxCruisePhases) each time a probe finds the knee
	// where it was, since every probe queues answers for a phase, and
	// returns to cruisePhases when the knee moves.
	cruiseEvery int
	// lastRate is the delivery rate (answers per second) of the last
	// judged phase that was full with demand waiting, and lastLevel its
	// mean in flight: a step up that delivers no more is past the knee.
	lastRate, lastLevel float64
	gainSuspect         bool
}

// testRun: a test is a run of drain phases checking whether the queue
// seen at the limit is the load's.
type testRun struct {
	// calibrating: the first phase, at calibrateLevel.
	calibrating bool
	// suspect: the last phase showed a queue that only just cleared the
	// bar; the next phase at the same level confirms or clears it.
	suspect bool
	testing bool
	// credibleTest: the test under way began on a queue too deep for the
	// machine's CPU to explain (see judge's credible); it runs on while
	// the CPU is used up.
	credibleTest bool
	verify       bool           // the test checks a kind's first no-queue latency
	chain        []phaseMeasure // the phase that queued (the trigger), then each drain above the current one
	// drainLevel is the in-flight level the current drain phase keeps to.
	drainLevel float64
}

// cpuBound: whether the gateway's own CPU, not the provider, was the
// busy part of the phases judged.
type cpuBound struct {
	// selfBound: the last judged phase's answers waited longer on the
	// gateway than at the provider (see judge).
	selfBound bool
	// judgedBusy: the phase being judged ran on a used-up CPU.
	judgedBusy bool
	// busySteps counts the busy steps since the last judged phase.
	busySteps int
}

// hangMemory: an incident in which the provider stopped answering.
type hangMemory struct {
	// hangFrom is the knee estimate when a hang began (0: no hang);
	// hangOver: the last phase hung.
	hangFrom float64
	hangOver bool
	// hangRestore is the level to return to once a hang ends: the
	// highest knee estimate any phase of the incident started from (its
	// timeouts and losses lower the limit phase by phase, but an outage
	// says nothing about the capacity behind it). 0: none.
	hangRestore float64
}

// ControlConfig tunes a Controller.
type ControlConfig struct {
	MinLimit, MaxLimit, InitialLimit int64
	// Window is the longest phase (and the reporting window).
	Window time.Duration
	// MinSamples is how many answers a phase needs before it is judged
	// (it is extended up to two windows to collect them).
	MinSamples int
	// Tolerance is how far above its no-queue latency the mean answer may
	// be before it counts as queued: the noise of a mean of MinSamples
	// answers whose lengths vary ±30 % is about 4 %, and the no-queue
	// latency is the lowest recent mean, a few percent low.
	Tolerance float64
	// Shadow: the limit is not enforced (everything is admitted), so a
	// drain test cannot lower the load; a queue sets the knee directly.
	Shadow bool
}

// DefaultControlConfig returns the defaults.
func DefaultControlConfig() ControlConfig {
	return ControlConfig{MinLimit: 1, MaxLimit: 4096, InitialLimit: 16, Window: time.Second, MinSamples: 16, Tolerance: 0.15}
}

type phaseKind uint8

const (
	phaseStartup phaseKind = iota // ×1.25 while demand exceeds the limit, until a queue shows
	phaseCruise                   // at the knee estimate
	phaseGrow                     // ×1.5 back toward a known knee well above the limit
	phaseProbe                    // ×1.15 past the knee, every cruisePhases phases
	phaseDrain                    // ×0.75: is the queue the load's, or is the provider slower?
)

var phaseNames = [...]string{"startup", "cruise", "grow", "probe", "drain"}

func (k phaseKind) String() string { return enum.Name(phaseNames[:], k, "unknown") }

func (k phaseKind) gain() float64 {
	switch k {
	case phaseStartup:
		return startupGain
	case phaseGrow:
		return growGain
	case phaseProbe:
		return probeGain
	case phaseDrain:
		return drainGain
	}
	return 1
}

// minQueueDelay is the least added latency that counts as a queue at
// the provider (see Controller.judge).
const minQueueDelay = 2 * time.Millisecond

// localWaits is how many of the gateway's own scheduling waits an
// answer's measured latency may hold without any queue at the provider:
// the gateway's goroutine waits for a CPU before it reads the answer, and
// a provider on the same machine (a mock, a local model server) waits as
// long for one to write it. Both grow with the load and shrink with the
// limit, exactly like a provider's queue, without being one a limit can
// cure.
const localWaits = 2

// busyWaits is how many of the gateway's own waits a queue must exceed to
// be believed while the CPU is used up (see judge's credible).
const busyWaits = 8

// noiseOf is the least added latency (seconds) that can be a queue at
// the provider in the phase m measured: minQueueDelay, or the gateway's
// own mean wait to read an answer, localWaits times, when that is more.
// On a gateway that is not busy the wait is microseconds and changes
// nothing; on one whose CPU (or machine) is the bottleneck, a "queue"
// that such waits explain is not believed, so the limit does not fall
// below what the provider serves.
func noiseOf(m *measure) float64 {
	return max(minQueueDelay.Seconds(), localWaits*m.localMean())
}

// Gains of the phases, and how many phases at the knee separate probes.
const (
	// Steps up are ×1.25: a step past the knee then overshoots it by at
	// most a quarter for the phase that shows it, which is what the
	// provider's queue (and a caller with a short timeout) can take.
	startupGain = 1.25
	// selfBoundGain is start-up's step while the gateway's own waits are
	// longer than the provider's answers (see judge's selfBound).
	selfBoundGain = 2
	growGain      = 1.5
	// calibrateLevel is where a cold controller measures the provider's
	// no-queue latency before it goes to its initial limit: every later
	// judgement compares with that latency, and one measured at a level
	// past the knee would hide the queue for good.
	calibrateLevel = 4
	// probeGain is the step past a known knee (and on up while each step
	// shows more capacity): small enough that a probe (rounded down)
	// keeps the limit within a fifth of the knee, and its verdict comes
	// from comparing it with the phase before rather than from its
	// latency clearing the queue bar.
	probeGain    = 1.15
	drainGain    = 0.75
	cruisePhases = 6
	// maxCruisePhases bounds the interval between probes of a steady knee
	// (about 2.5 s at 100 ms answers), which bounds how long restored
	// capacity goes unnoticed.
	maxCruisePhases = 12
	// kneeMemory is how long a knee is trusted: providers change.
	kneeMemory = 30 * time.Second
	// elastic: a drain test whose latency fell by less than this share of
	// the load's fall shows no queue (the provider is slower).
	elastic = 0.3
	// lossShare is the share of a phase's answers that must be upstream
	// 429s, 5xx or timeouts for the phase to count as loss.
	lossShare = 0.01
	// fillShare: a phase is full when the mean in flight reached this
	// share of its limit.
	fillShare = 0.8
)

// Kinds of latency sample: a stream's time to first token and a plain
// answer's whole latency are different quantities, each with its own
// no-queue latency, so a change in the mix is not read as a queue.
const (
	kindStream = iota
	kindPlain
	numKinds
)

// Sample is one finished attempt on the upstream.
type Sample struct {
	// Latency is the congestion signal: time to first token for a stream,
	// the whole answer otherwise; for a censored sample, the time it had
	// waited when it ended.
	Latency time.Duration
	// Held is how long the attempt held its place at the provider.
	Held time.Duration
	// Local is the gateway's own wait for a CPU before it read the answer
	// that ends Latency (0: not measured): not the provider's, and the
	// measure of how busy the gateway is (see noise).
	Local  time.Duration
	Stream bool
	// OK: the provider answered; Censored: the caller left or the attempt
	// timed out before the answer (Latency is a lower bound); Drop: the
	// provider refused or failed (429, 5xx, timeout).
	OK, Censored, Drop bool
}

// Reading is what the gate counts, cumulatively; the controller takes
// differences between readings.
type Reading struct {
	At time.Time
	// Active is the in-flight cost now.
	Active int64
	// Integral is the in-flight cost integrated over time (cost × seconds).
	Integral float64
	// Pending is the number of leases still waiting for their first byte
	// and PendingAgeSum the sum of their ages at At (seconds).
	Pending       int64
	PendingAgeSum float64
	// Limited counts acquires that found no room under the limit.
	Limited uint64
	// Busy: the CPU the gateway runs on is used up (the machine's, or the
	// process's cgroup quota; internal/pressure's CPUSaturated). Every
	// answer then waits for a CPU, on the gateway's side and on a provider
	// on the same machine, in proportion to the load: latency and
	// delivery say nothing sure about the provider.
	Busy bool
}

// phaseMeasure is a judged phase kept for comparison.
type phaseMeasure struct {
	inflight float64
	m        measure
}

type measure struct {
	n         [numKinds]int
	latSum    [numKinds]float64 // seconds
	latSq     [numKinds]float64 // seconds²
	heldSum   float64
	completed int
	drops     int
	ok        int // answers delivered (not censored, not refused)
	censored  int // callers that left or attempts that timed out
	// localSum and localN add up the gateway's own waits to read the
	// answers (Sample.Local), where measured.
	localSum float64
	localN   int
}

// localMean is the gateway's mean wait to read an answer (seconds; 0 when
// not measured).
func (m *measure) localMean() float64 {
	if m.localN == 0 {
		return 0
	}
	return m.localSum / float64(m.localN)
}

// PhaseReport describes the last judged phase.
type PhaseReport struct {
	Phase       string  `json:"phase"`
	Rule        string  `json:"rule"`
	LimitBefore int64   `json:"limitBefore"`
	LimitAfter  int64   `json:"limitAfter"`
	Inflight    float64 `json:"inflight"`
	QueueRatio  float64 `json:"queueRatio"`
	Knee        float64 `json:"kneeEstimate"`
	Samples     int     `json:"samples"`
	Pending     int64   `json:"pending"`
	Drops       int     `json:"drops"`
	Limited     bool    `json:"limited"`
	// LocalMs is the gateway's own mean scheduling delay over the phase,
	// taken off its latencies.
	LocalMs float64 `json:"localDelayMs"`
}

// NewController starts at the clamped initial limit, in startup.
func NewController(cfg ControlConfig, now time.Time) *Controller {
	if cfg.MinSamples < 1 {
		cfg.MinSamples = 1
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	c := &Controller{cfg: cfg, kind: phaseStartup}
	initial := clamp(cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)
	c.base = float64(min(initial, max(cfg.MinLimit, calibrateLevel)))
	c.calibrating = c.base < float64(initial)
	c.limit = int64(c.base)
	c.begin(now)
	c.measureFrom = now // nothing to settle from: measure from the start
	return c
}

// Limit is the limit in effect now.
func (c *Controller) Limit() int64 { return c.limit }

// Knee is the current estimate of the provider's knee (cost units).
func (c *Controller) Knee() float64 { return c.base }

// Phase names the current phase.
func (c *Controller) Phase() string { return c.kind.String() }

// Last is the report of the last judged phase.
func (c *Controller) Last() PhaseReport { return c.last }

// Phases counts judged phases.
func (c *Controller) Phases() uint64 { return c.phases }

// Converged reports whether a knee has been seen: until then the limit
// is a lower bound of the capacity, and queue-delay estimates built on it
// would refuse work the provider can take.
func (c *Controller) Converged() bool { return c.queueSeen }

// Baseline is the no-queue latency of the slower kind of answer (0 when
// unknown).
func (c *Controller) Baseline() time.Duration {
	return seconds(max(c.baseline[kindStream], c.baseline[kindPlain]))
}

// BaselineOf is the no-queue latency of streams (time to first token) or
// of plain answers.
func (c *Controller) BaselineOf(stream bool) time.Duration {
	if stream {
		return seconds(c.baseline[kindStream])
	}
	return seconds(c.baseline[kindPlain])
}

// Held is the mean time an answer holds its place at the provider.
func (c *Controller) Held() time.Duration { return seconds(c.heldEWMA) }

// LocalDelay is the gateway's own mean wait to read an answer over the
// last judged phase.
func (c *Controller) LocalDelay() time.Duration { return seconds(c.local) }

// LatencyEWMAs are the short and long exponential averages of the
// answers' latencies (weights shortAlpha and longAlpha per answer).
func (c *Controller) LatencyEWMAs() (short, long time.Duration) {
	return seconds(c.shortEWMA), seconds(c.longEWMA)
}

// The weights of the latency averages operators read (OmniRoute's
// shortLatencyAlpha and longLatencyAlpha defaults).
const (
	shortAlpha = 0.5
	longAlpha  = 0.1
)

// DrainRate is how much queued cost the upstream takes per second at the
// current limit (Little's law: in flight ÷ time held); 0 when unknown.
// While the first phase calibrates below the initial limit, the rate is
// the initial limit's, where the limit goes once the phase is judged:
// the calibration is the gateway's own measurement, and a wait estimated
// at its level (a quarter of the default initial limit) would shed a
// closed loop that starts above it as an overload (eight agents starting
// at once had their last one refused).
func (c *Controller) DrainRate() float64 {
	if c.heldEWMA <= 0 {
		return 0
	}
	limit := c.limit
	if c.calibrating {
		limit = max(limit, clamp(c.cfg.InitialLimit, c.cfg.MinLimit, c.cfg.MaxLimit))
	}
	return float64(limit) / c.heldEWMA
}

// Pressure is the pressure seen since the last judged phase.
func (c *Controller) Pressure() Pressure { return c.pressure }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// phaseLen is how long a phase's transition and its measurement each
// last: about one answer's time at the provider, so the answers measured
// were admitted under the phase's own limit.
func (c *Controller) phaseLen() time.Duration {
	e := c.heldEWMA
	if e <= 0 {
		e = c.cfg.Window.Seconds() / 10
	}
	return min(max(seconds(e), 10*time.Millisecond), c.cfg.Window/2)
}

func (c *Controller) begin(now time.Time) {
	c.phaseStart = now
	c.measureFrom = now.Add(c.phaseLen())
	if c.kind == phaseProbe || c.kind == phaseGrow || c.kind == phaseStartup {
		// A step up builds its queue over about an answer's time: measure
		// it once it stands, or a probe past the knee reads as no queue.
		c.measureFrom = c.measureFrom.Add(c.phaseLen())
	}
	c.m = measure{}
	c.haveStart = false
}

// Observe records a finished attempt at now. Answers that finish before
// the phase's measurement begins were admitted under the previous limit
// and only update the time answers hold their slot.
func (c *Controller) Observe(now time.Time, s Sample) {
	if s.Held > 0 && s.OK {
		// Answers only: a timed-out or abandoned attempt's time says how
		// long it waited, not how long an answer holds its place, and
		// would slow every phase (and the drain rate) long after the
		// timeouts ended.
		h := s.Held.Seconds()
		if c.heldEWMA <= 0 {
			c.heldEWMA = h
		} else {
			c.heldEWMA += 0.05 * (h - c.heldEWMA)
		}
	}
	if s.OK && s.Latency > 0 {
		l := s.Latency.Seconds()
		if c.longEWMA <= 0 {
			c.shortEWMA, c.longEWMA = l, l
		} else {
			c.shortEWMA += shortAlpha * (l - c.shortEWMA)
			c.longEWMA += longAlpha * (l - c.longEWMA)
		}
	}
	if now.Before(c.measureFrom) {
		return
	}
	c.m.completed++
	if s.Drop {
		c.m.drops++
	}
	if s.OK {
		c.m.ok++
	}
	if s.Censored {
		c.m.censored++
	}
	if s.Local > 0 {
		c.m.localSum += s.Local.Seconds()
		c.m.localN++
	}
	if !s.OK && !s.Censored {
		return
	}
	k := kindPlain
	if s.Stream {
		k = kindStream
	}
	l := s.Latency.Seconds()
	if s.Censored {
		// A caller that left (or an attempt that timed out) waited at
		// least this long: evidence of a queue when that exceeds the
		// no-queue latency, and otherwise no evidence at all (it may have
		// waited in the gateway's own queue first): it counts as no less
		// than the no-queue latency.
		if c.baseline[k] <= 0 {
			return
		}
		l = max(l, c.baseline[k])
	}
	c.m.n[k]++
	c.m.latSum[k] += l
	c.m.latSq[k] += l * l
	c.m.heldSum += max(s.Held.Seconds(), l)
}

// ObservePressure raises the pressure for the current phase: high stops
// growth, critical halves the limit at once (once per window). It reports
// whether the limit changed.
func (c *Controller) ObservePressure(now time.Time, p Pressure) bool {
	if p > c.pressure {
		c.pressure = p
	}
	if p != PressureCritical || (!c.criticalAt.IsZero() && now.Sub(c.criticalAt) < c.cfg.Window) {
		return false
	}
	c.criticalAt = now
	c.base = max(float64(c.cfg.MinLimit), min(c.base, float64(c.limit))/2)
	c.kind = phaseCruise
	return c.setLimit(1)
}

// Tick advances the controller to now with the gate's counters: it starts
// the measurement, and judges the phase once it has lasted its length and
// gathered enough answers. It reports whether the limit changed.
func (c *Controller) Tick(r Reading) bool {
	now := r.At
	prev := c.lastReadings
	c.lastReadings = r
	if c.busyStep(prev, r) {
		return c.stepBusy(r)
	}
	if c.kind == phaseDrain && !c.haveStart && r.Active > c.limit && now.Sub(c.phaseStart) < 2*c.cfg.Window {
		// A drain measures only once the load is down to its level and
		// the provider had the time of an answer to work off its queue.
		c.measureFrom = now.Add(c.phaseLen())
		return false
	}
	if now.Before(c.measureFrom) {
		return false
	}
	if !c.haveStart {
		c.atMeasure, c.haveStart = r, true
		return false
	}
	span := now.Sub(c.atMeasure.At)
	if span < c.phaseLen() {
		return false
	}
	n := c.m.n[kindStream] + c.m.n[kindPlain]
	need := c.cfg.MinSamples
	if c.kind == phaseProbe {
		need *= 3 // a probe is judged against the phase before, on a small step: more answers, less noise
	}
	if n < need && now.Sub(c.phaseStart) < 2*c.cfg.Window && !c.hanging(r) {
		return false
	}
	return c.judge(r, span)
}

// busyStep reports whether the limit should double now, without waiting
// for the phase's answers: the CPU the gateway runs on is used up and the
// last judged phase's answers waited longer on the gateway than at the
// provider (selfBound), so the phase's answers would only say what the
// gateway's own waits are; callers waited at the limit since the last
// reading; and no refusal, hang or memory pressure came in the time a
// provider answer takes. On a machine the gateway saturates a phase lasts
// as long as its own waits (seconds under a flood), and doubling once a
// phase left the limit far below what the machine served while the excess
// was refused. At most maxBusySteps come between two judged phases, so a
// provider that does queue at the higher limit is seen within a phase.
func (c *Controller) busyStep(prev, r Reading) bool {
	if !r.Busy || !c.selfBound || c.busySteps >= maxBusySteps || c.cfg.Shadow || c.calibrating || c.kind == phaseDrain || c.testing || c.hangRestore > 0 ||
		c.pressure != PressureNormal || c.m.drops > 0 || c.limit >= c.cfg.MaxLimit || prev.At.IsZero() ||
		r.Limited <= prev.Limited || c.hanging(r) {
		return false
	}
	if _, room := c.busyRoom(); !room {
		return false
	}
	wait := max(10*time.Millisecond, seconds(2*max(c.baseline[kindStream], c.baseline[kindPlain])))
	return r.At.Sub(c.phaseStart) >= wait
}

// stepBusy doubles the limit from where it stands (busyStep) and starts a
// new phase.
func (c *Controller) stepBusy(r Reading) bool {
	before := c.limit
	c.base = max(c.base, float64(c.limit))
	c.testing, c.verify, c.suspect, c.gainSuspect = false, false, false, false
	top, _ := c.busyRoom()
	changed := c.setLevel(min(c.base*selfBoundGain, top))
	c.last = PhaseReport{Phase: c.kind.String(), Rule: "cpu_busy_step", LimitBefore: before, LimitAfter: c.limit,
		Limited: true, Pending: r.Pending, LocalMs: round3(c.local * 1e3)}
	c.lastFull = phaseMeasure{}
	c.lastRate, c.lastLevel = 0, 0
	c.phases++
	c.busySteps++
	c.begin(r.At)
	return changed
}

// maxBusySteps is how many busy steps may come between judged phases.
const maxBusySteps = 2

// judge evaluates the finished phase and starts the next.
func (c *Controller) judge(r Reading, span time.Duration) bool {
	now := r.At
	before := c.limit
	inflight := (r.Integral - c.atMeasure.Integral) / span.Seconds()
	limited := r.Limited > c.atMeasure.Limited
	m := &c.m
	c.local = m.localMean()
	// No-queue latencies start from the first answers seen. A kind first
	// seen after start-up (streams joining plain answers) may arrive at a
	// load with a queue: its latency is checked by a drain test.
	newKind := false
	for k := range c.baseline {
		if c.baseline[k] == 0 && m.n[k] > 0 {
			c.baseline[k], c.baseErr[k] = m.mean(k)
			newKind = newKind || c.queueSeen
		}
	}
	q, se, knee, samples := c.queue(inflight, r)
	rate := float64(m.ok) / span.Seconds()
	wasCalibrating := c.calibrating
	// blind: so many answers were cut short (callers that gave up,
	// timeouts) that latency hides a queue; delivery must show the gain of
	// a step up instead. Counts of short phases are too noisy to judge
	// every step by.
	blind := m.censored*blindShare >= max(m.completed, 1)
	rep := PhaseReport{Phase: c.kind.String(), LimitBefore: before, Inflight: round3(inflight), QueueRatio: round3(q),
		Knee: round3(knee), Samples: samples, Pending: r.Pending, Drops: m.drops, Limited: limited, LocalMs: round3(c.local * 1e3)}
	// A queue shows as a mean latency above the no-queue latency by more
	// than the tolerance and by more than three standard errors of the
	// comparison, so a noisy provider (or a phase of few answers) is not
	// read as queueing.
	bar := c.bar(se)
	// And by more than minQueueDelay in absolute terms: a provider that
	// answers in a millisecond shares the machine's CPU with the gateway
	// (or is a cache), and a fraction of a millisecond more is the
	// gateway's own work, not a queue that a lower limit would shorten;
	// holding such a provider below its connections only sends every
	// request through the slow path.
	queued := samples > 0 && q > 1+bar && (q-1)*max(c.baseline[kindStream], c.baseline[kindPlain]) > noiseOf(m)
	if !queued {
		c.suspect = false
	}
	full := inflight >= fillShare*float64(c.limit)
	// selfBound: the gateway's own wait to read an answer was longer than
	// the provider took to give it. The time a slot is held is then mostly
	// the gateway's (a CPU it cannot get), slots empty while freed ones
	// wait for a goroutine to take them, and the limit protects the
	// provider from nothing it was shown to suffer: callers that waited
	// prove the limit short, and start-up doubles it (TCP's slow start)
	// rather than adding a quarter a phase of a phase that lasts as long
	// as the gateway's own waits.
	selfBound := c.local > 0 && c.local > max(c.baseline[kindStream], c.baseline[kindPlain])
	c.selfBound, c.busySteps = selfBound, 0
	// credible: a queue deeper than busyWaits of the gateway's own waits
	// to read an answer. A used-up CPU delays a provider on the same
	// machine too, by up to several of the gateway's own waits (seven
	// times, measured on two shared cores under a load test), but a
	// provider's real queue (callers waiting for whole service times
	// behind its slots) goes far beyond that, and the controller must
	// still see it: a used-up CPU hides only queues it could explain.
	// Without the gateway's own waits measured (a platform without
	// receive timestamps) nothing tells them apart, and none is believed.
	credible := queued && c.local > 0 && (q-1)*max(c.baseline[kindStream], c.baseline[kindPlain]) > busyWaits*c.local
	busy := (r.Busy || selfBound) && !credible && !(c.testing && c.credibleTest)
	c.judgedBusy = r.Busy || selfBound
	next, rule := phaseCruise, "hold"
	minL := float64(c.cfg.MinLimit)
	c.fasterBaselines()
	switch {
	case c.hangRestore > 0 && !c.hanging(r) && m.ok > 0 && m.ok >= m.drops:
		// The provider answers again after a hang: back to the level the
		// incident started from at once (TCP's undo after a spurious
		// timeout), not ×1.5 a phase from the floor the hang left, which
		// at a low limit takes a phase of a dozen answers each. If the
		// provider came back smaller, the next phase's queue says so.
		c.base = max(c.base, c.hangRestore)
		c.hangRestore = 0
		c.testing, c.verify, c.suspect = false, false, false
		rule = "hang_restore"
	case full && m.drops > 0 && float64(m.drops) >= lossShare*float64(m.completed):
		// Loss: the provider refuses what it is sent at the limit. Keep
		// 90 % of what was in flight (a refusal holds its place for next to
		// no time). Refusals below the limit are a rate limit or a fluke,
		// which a lower concurrency would not cure; the breaker cools the
		// target for them.
		c.base = max(minL, 0.9*min(c.base, inflight))
		c.markKnee(now)
		c.testing = false
		next, rule = c.drain(c.base), "loss"
	case c.hangOver && !c.hanging(r):
		// The first phase after a hang: its answers are the hung requests
		// let go, whose latency is the hang's, not a queue's. Measure
		// again before judging.
		rule = "hang_over"
	case busy && !c.cfg.Shadow && (c.testing || queued || newKind || blind || c.kind == phaseDrain || c.hanging(r) || limited):
		// The CPU the gateway runs on is used up (a load test on the same
		// machine, a busy node): a latency rise, a drain test or delivery
		// that stopped growing would read the machine's saturation as the
		// provider's queue and cut the limit below what the provider
		// serves, which saves no CPU (the callers wait in the gateway
		// instead) and refuses work the provider can take; requests
		// that age past their time may be the machine's too (a provider
		// on it starved of CPU). Not sure, the controller admits: only
		// the provider's refusals and timeouts (loss, above) lower the
		// limit, and demand beyond it still raises it.
		c.testing, c.verify, c.suspect, c.gainSuspect = false, false, false, false
		switch {
		case limited && (full || selfBound) && c.pressure == PressureNormal && !blind:
			// Callers waited at the limit: the limit is the level shown.
			// What was in flight falls short of it by the gateway's own
			// hand-over of each freed slot, which a busy CPU slows.
			c.base = max(c.base, float64(c.limit))
			next, rule = c.growth(now), "cpu_busy_grow"
		case c.kind == phaseDrain:
			rule = "cpu_busy" // a test stopped: back to the knee
		case blind:
			// Callers wait, but one answer in five or more was cut short
			// (callers that gave up, timeouts): what is already in
			// flight outlasts their patience, and more of it would only
			// be abandoned. Latency cannot say whether the provider or
			// the machine is the slow part; either way growth helps no
			// caller. Measured with three busy loops beside a 16-slot
			// provider whose callers gave up after 300 ms: the limit
			// doubled to 1,648.
			next, rule = c.kind, "cpu_busy"
		default:
			next, rule = c.kind, "cpu_busy" // the limit stays where it is
		}
	case queued && c.hanging(r) && m.ok*4 < c.cfg.MinSamples && !c.cfg.Shadow:
		// The provider holds requests far past their time and hardly
		// answers: a hang, or an outage that does not refuse. One such
		// phase may also be a latency step whose first answers have not
		// come yet: it is only suspected. From the second, stop feeding
		// the provider (half the limit a phase, down to a quarter of the
		// knee it had); but this is no knee: the knee stays what it was,
		// so once answers flow again the limit grows back to it at ×1.5 a
		// phase. The breaker keeps the target out meanwhile.
		c.testing, c.verify, c.suspect = false, false, false
		if c.hangFrom == 0 {
			c.hangFrom = max(c.base, minL)
			next, rule = c.kind, "hang_suspect"
			break
		}
		c.base = max(minL, c.hangFrom/4, c.base/2)
		if c.knee <= 0 {
			c.knee = c.hangFrom
		}
		c.kneeAt, c.queueSeen = now, true
		c.hangRestore = max(c.hangRestore, c.hangFrom)
		rule = "hang"
	case c.kind == phaseDrain && c.testing:
		next, rule = c.judgeTest(now, inflight, samples, queued, knee)
	case c.kind == phaseDrain:
		// The drain after a knee: below it, so its answers are the
		// no-queue latency (BBR's ProbeRTT), and the probe's queue is gone.
		if !queued {
			c.learn()
		}
		rule = "drained"
	case newKind && !c.testing && !c.cfg.Shadow:
		c.testing, c.verify = true, true
		c.chain = append(c.chain[:0], phaseMeasure{inflight: inflight, m: *m})
		next, rule = c.testDrain(inflight, inflight), "verify_latency"
	case queued && c.cfg.Shadow:
		// Shadow traffic cannot be drained to test: the knee is what
		// Little's law says against the current no-queue latency.
		c.base = max(minL, knee)
		c.markKnee(now)
		rule = "knee"
	case c.kind == phaseProbe && limited && !busy && c.probeVerdict(inflight, knee) == probeUnsure:
		c.probeUnsure++
		next, rule = phaseProbe, "probe_unsure"
	case c.kind == phaseProbe && limited && !busy && c.probeVerdict(inflight, knee) == probeKnee:
		// A probe past the knee put more in flight, and its answers
		// did not come back faster than a knee where it was would let
		// them, nor Little's law put the knee well below: the extra load
		// only waited. Back to the knee, refined by this
		// estimate; the probe's excess drains as its answers finish
		// (nothing is admitted until the load is under the knee again),
		// so no drain test is needed. A knee found well above is more
		// capacity (grow, below); well below, lost capacity (queue).
		c.suspect = false
		c.base = max(minL, (c.base+knee)/2)
		c.markKnee(now)
		rule = "probe_knee"
	case queued && !c.suspect && q < 1+2*bar:
		// A queue that only just shows: the phase may be high by chance,
		// and a phase picked for being high reads lower when measured
		// again, which a test would take for a queue draining. Measure
		// the same level once more first.
		c.suspect = true
		next, rule = c.kind, "suspect"
	case queued:
		// Answers queue: was it the load's queue (a step up past the
		// knee, lost capacity) or is the provider slower? Test at three
		// quarters of the load: latency that falls with the load is a
		// queue, latency that stays is the provider's.
		c.suspect = false
		c.testing, c.credibleTest = true, credible
		c.chain = append(c.chain[:0], phaseMeasure{inflight: inflight, m: *m})
		next, rule = c.testDrain(inflight, knee), "queue"
	case limited && full && blind && c.stepped(inflight) && rate <= c.lastRate*(1+gainShare) && !c.gainSuspect:
		// The step up put more in flight and the provider delivered no
		// more. Phases are short and their counts noisy: measure the same
		// level again before concluding (the level below stays the
		// comparison).
		c.gainSuspect = true
		next, rule = c.kind, "no_gain_suspect"
	case limited && full && blind && c.gainSuspect && rate <= c.lastRate*(1+gainShare):
		// Twice no more delivered for more in flight: the provider is past
		// its knee, though callers that give up (or a queue the latency
		// does not show) hide it from the latency signal. Go back to the
		// level below (TCP BBR's end of start-up: delivery stopped
		// growing).
		c.gainSuspect = false
		c.base = max(minL, min(c.base, c.lastLevel))
		c.markKnee(now)
		next, rule = c.drain(c.base), "no_gain"
	case limited && (full || selfBound) && c.pressure == PressureNormal:
		// Demand exceeds the limit and the provider does not queue: the
		// level is proven; go higher. A step up that queued a little, too
		// little to tell from noise, proves only what Little's law says.
		switch {
		case !c.queueSeen:
			// Start-up, no queue ever seen: callers waited at the limit
			// and the provider did not queue, so the limit is the level
			// shown. Little's law would say less on a busy gateway, whose
			// own hand-over of each freed slot leaves it empty a while,
			// and growing from that crawls (a unit a phase) while callers
			// wait for a limit the provider never asked for.
			c.base = max(c.base, float64(c.limit))
		case c.kind != phaseCruise:
			// A step up that did not queue proves its level. A cruise at
			// the knee proves nothing new: its limit is the knee rounded,
			// and taking that for the knee would creep it up a unit at a
			// time until the queue cleared the bar. Probes move it.
			c.base = max(c.base, min(float64(c.limit), knee))
		}
		next, rule = c.growth(now), "grow"
	case c.kind == phaseStartup:
		next = phaseStartup
	}
	if c.kind == phaseStartup && !queued && !c.queueSeen {
		c.accumulate()
	}
	if rule != "probe_unsure" {
		c.probeUnsure = 0
	}
	c.hangOver = rule == "hang"
	if rule != "hang" && rule != "hang_suspect" {
		c.hangFrom = 0
	}
	switch {
	case rule == "no_gain_suspect":
		// keep the level below as the comparison
	case limited && full && !wasCalibrating:
		c.lastRate, c.lastLevel = rate, inflight
		c.gainSuspect = false
	default:
		c.lastRate, c.lastLevel = 0, 0
		c.gainSuspect = false
	}
	var changed bool
	switch {
	case (rule == "hold" || rule == "suspect" || rule == "no_gain_suspect" || rule == "hang_suspect" || rule == "hang_over" || rule == "probe_unsure" ||
		rule == "cpu_busy") && c.kind != phaseDrain:
		// Demand stayed below the limit and nothing queued: nothing was
		// learnt, so the limit stays where it is (a probe that found no
		// demand keeps its level until demand tests it).
	case rule == "cpu_busy_grow" && !c.calibrating && c.busyCapped():
		// A knee found on a calm CPU bounds growth on a busy one.
	case rule == "cpu_busy_grow" && !c.calibrating && (selfBound || !c.queueSeen):
		// Callers wait and the only evidence is the gateway's own
		// saturation (no knee seen yet, or answers that waited longer on
		// the gateway than at the provider): double, as TCP's slow start
		// does, so that a limit
		// far below the demand the machine serves reaches it in a few
		// phases (each as long as the gateway's own waits). Loss still
		// cuts; a provider that queues shows it once the CPU is free.
		// Not past a knee found on a calm CPU by more than calmHeadroom.
		if top, room := c.busyRoom(); room {
			changed = c.setLevel(min(c.base*selfBoundGain, top))
		}
	case next == phaseDrain:
		changed = c.setLevel(c.drainLevel)
	case next == phaseGrow:
		top := max(c.knee, c.prevKnee, c.base)
		if c.base > c.knee*regrowShare && c.belowHigh(now) {
			top = max(top, c.highKnee) // capacity coming back (growth)
		}
		changed = c.setLevel(min(c.base*growGain, top))
	case c.calibrating:
		// Calibrated: go to the configured initial limit.
		c.calibrating = false
		c.base = max(c.base, float64(clamp(c.cfg.InitialLimit, c.cfg.MinLimit, c.cfg.MaxLimit)))
		changed = c.setLimit(1)
	default:
		changed = c.setLimit(next.gain())
	}
	if top, _ := c.busyRoom(); rule == "cpu_busy_grow" && float64(c.limit) > top && c.limit > before {
		// Growth on the CPU alone stops at the calm knee's headroom,
		// whichever step it took.
		changed = c.setLevel(max(top, float64(before)))
	}
	if rule == "probe_unsure" {
		// compared with the same phase before it again
	} else if limited && full && (c.kind == phaseCruise || c.kind == phaseProbe) && samples > 0 {
		c.lastFull = phaseMeasure{inflight: inflight, m: *m}
	} else {
		c.lastFull = phaseMeasure{}
	}
	c.kind = next
	rep.Rule, rep.LimitAfter = rule, c.limit
	c.last = rep
	c.phases++
	c.pressure = PressureNormal
	c.begin(now)
	return changed
}

// testDrain prepares the next drain of a test from a phase at load
// inflight that queued: to just under the knee Little's law gives for it
// (against the current no-queue latency; the drain must be below the knee
// for its answers to be the no-queue latency), but no lower than half the
// load and no
// higher than three quarters of it, so a provider far past its knee is
// tested near the knee at once and a slower one (whose "knee" reads
// low) only down by halves.
func (c *Controller) testDrain(inflight, knee float64) phaseKind {
	c.drainLevel = max(float64(c.cfg.MinLimit), max(0.5*inflight, min(drainGain*inflight, 0.9*knee)))
	return phaseDrain
}

// drain prepares a drain phase at three quarters of level.
func (c *Controller) drain(level float64) phaseKind {
	c.drainLevel = max(float64(c.cfg.MinLimit), level*drainGain)
	return phaseDrain
}

// judgeTest judges one drain of a test. While a drain still queues
// against the no-queue latency, the knee may lie lower still: drain
// further, until either a drain shows no queue, or two drains in a row
// show the same latency at different loads (neither falling with the load
// as a queue's would, nor rising). Then this level has no queue: its answers give the
// no-queue latency, and the knee is, by Little's law, the load of each
// phase of the test that queued times the share of its answers' time
// that was service; the lowest of these, since a phase caught while a
// queue was still building shows less of it. When no phase queued against
// the re-learnt latency, the provider got slower (or its answers longer):
// not congestion, and the limit stays.
func (c *Controller) judgeTest(now time.Time, inflight float64, samples int, queued bool, knee float64) (phaseKind, string) {
	minL := float64(c.cfg.MinLimit)
	if samples == 0 {
		c.testing = false
		return phaseCruise, "test_no_samples"
	}
	prev := &c.chain[len(c.chain)-1]
	rI := inflight / max(prev.inflight, 1e-9)
	rQ := c.m.meanLatency() / max(prev.m.meanLatency(), 1e-12)
	// Flatness is judged between two drains only: the phase that queued
	// may have caught a queue still building, and a drain that holds its
	// latency against it would read as a slower provider. Latency that
	// rose beyond noise while the load fell is a queue still building.
	noise := math.Hypot(c.m.relErr(), prev.m.relErr())
	flat := len(c.chain) > 1 && rQ >= 1-elastic*(1-rI)-2*noise && rQ <= 1+max(c.cfg.Tolerance/3, 2*noise)
	// A slower provider is concluded only from latency that held over
	// at least half the load: two levels both above a lowered knee can
	// also read alike while the queue settles.
	flat = flat && inflight <= slowSpan*c.chain[0].inflight
	if queued && !flat && inflight > minL*1.01 && c.drainLevel > minL && len(c.chain) < maxTestDrains {
		// Latency fell with the load and still queues, or rose while the
		// load fell (the phase before did not yet show what happened):
		// lower still.
		c.chain = append(c.chain, phaseMeasure{inflight: inflight, m: c.m})
		return c.testDrain(inflight, knee), "queue_deeper"
	}
	if inflight >= blockedShare*c.chain[0].inflight {
		// The drains could not lower the load (the limit is at its floor):
		// their latency is the load's as much as the provider's, and
		// re-learning it would hide the queue for good. The knee lies at
		// or below the floor, where the limit already is.
		c.testing, c.verify = false, false
		if queued {
			c.base = minL
			c.markKnee(now)
		}
		return phaseCruise, "test_blocked"
	}
	if queued || c.verify {
		c.relearn() // this is the provider's latency now
	} else {
		c.learn()
	}
	c.testing, c.verify = false, false
	k := -1.0
	for i := range c.chain {
		ph := &c.chain[i]
		// Against the re-learnt latency, did this phase queue beyond
		// noise? Then Little's law gives the knee from it.
		if q, se, share, n := c.judgeMeasure(&ph.m); n > 0 && q > 1+c.bar(se) && (q-1)*c.Baseline().Seconds() > noiseOf(&ph.m) {
			if e := ph.inflight * share; k < 0 || e < k {
				k = e
			}
		}
	}
	if k < 0 {
		// No phase queued against the provider's own latency.
		c.knee = 0
		return phaseCruise, "slower_not_congested"
	}
	c.base = max(minL, k)
	c.markKnee(now)
	return phaseCruise, "queue_confirmed"
}

// slowSpan: the drains must have brought the load to at most this share
// of the load that queued before flat latency counts as a slower provider.
const slowSpan = 0.5

// probeVerdict judges a probe phase at load inflight with Little's-law
// knee knee against the known knee (c.base). Lost capacity (a knee well
// below) is left to the queue rules; a probe that put too little more in
// flight to tell proves nothing.
func (c *Controller) probeVerdict(inflight, knee float64) probeResult {
	prev := &c.lastFull
	if prev.inflight <= 0 || inflight <= prev.inflight*(1+probeSpan/2) || knee < c.base*(1-kneeAgree) {
		return probeNone
	}
	// Two views of one question. Against the full phase just before, at
	// the knee: a knee where it was makes latency grow with the load (by
	// rI), more capacity leaves it where it was (1); this comparison is
	// paired (same provider, moments apart), so a no-queue latency learnt
	// a little low or high does not tip it. And Little's law against the
	// no-queue latency: a knee within the probe's half step above the
	// known one. A step this small is a few standard errors of a phase:
	// when the two disagree the probe is measured again.
	rI := inflight / prev.inflight
	rQ := c.m.meanLatency() / max(prev.m.meanLatency(), 1e-12)
	pairedKnee := rQ >= 1+(rI-1)/2
	littleKnee := knee <= c.base*(1+probeSpan)
	switch {
	case pairedKnee && littleKnee:
		return probeKnee
	case !pairedKnee && !littleKnee:
		return probeMore
	case c.probeUnsure < maxProbeRepeats:
		return probeUnsure
	case littleKnee:
		// Measured again and still split: the phase before may have been
		// the odd one; the probe's own answers decide.
		return probeKnee
	}
	return probeMore
}

// probeResult is a probe phase's verdict.
type probeResult uint8

const (
	probeNone   probeResult = iota // not a probe that can be judged
	probeKnee                      // the knee is where it was
	probeMore                      // more capacity
	probeUnsure                    // measure again
)

// maxProbeRepeats bounds how often an unsure probe is measured again
// before its own answers decide.
const maxProbeRepeats = 2

// kneeAgree: a probe's knee estimate down to this share below the known
// knee confirms it; probeSpan: a probe must have put this share more in
// flight than the knee to be judged, and a knee estimate this share
// above the known one is more capacity (the probe's half step).
const (
	kneeAgree = 0.15
	probeSpan = (probeGain - 1) / 2
)

// blockedShare: a test whose drains kept at least this share of the load
// that queued did not drain and proves nothing about the provider.
const blockedShare = 0.9

// maxTestDrains bounds the drains of one test (each ×0.75: the sixth is
// at a fifth of the load that queued).
const maxTestDrains = 6

// relErr is the relative standard error of meanLatency.
func (m *measure) relErr() float64 {
	n, sum, sq := 0, 0.0, 0.0
	for k := range m.n {
		n += m.n[k]
		sum += m.latSum[k]
		sq += m.latSq[k]
	}
	if n == 0 || sum <= 0 {
		return 0
	}
	mean := sum / float64(n)
	return math.Sqrt(max(0, sq/float64(n)-mean*mean)/float64(n)) / mean
}

// meanLatency is the mean latency of the measured answers, seconds.
func (m *measure) meanLatency() float64 {
	n, sum := 0, 0.0
	for k := range m.n {
		n += m.n[k]
		sum += m.latSum[k]
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// judgeMeasure compares m's answers with the current no-queue
// latencies: their mean ratio q, its standard error, the share of their
// time that was service rather than waiting, and the number of answers
// behind it.
func (c *Controller) judgeMeasure(m *measure) (q, se, share float64, samples int) {
	var ratio, wait, varSum float64
	local := localWaits * m.localMean()
	for k := range m.n {
		n := float64(m.n[k])
		if n == 0 || c.baseline[k] <= 0 {
			continue
		}
		samples += m.n[k]
		b := c.baseline[k]
		ratio += m.latSum[k] / b
		// Waiting that the gateway's own waits to read answers explain
		// (see noiseOf) is no queue at the provider: counting it would
		// put the knee under what the provider serves.
		wait += max(0, m.latSum[k]-n*(b+local))
		mean := m.latSum[k] / n
		v := max(0, m.latSq[k]/n-mean*mean) / (b * b)
		// Each answer's ratio varies with the answers and with the
		// baseline's own error (shared by all of the kind's answers).
		varSum += n*v + n*n*(mean/b)*(mean/b)*c.baseErr[k]*c.baseErr[k]
	}
	if samples == 0 {
		return 0, 0, 1, 0
	}
	q = ratio / float64(samples)
	se = math.Sqrt(varSum) / float64(samples)
	share = 1
	if m.heldSum > 0 {
		share = max(0, 1-wait/m.heldSum)
	}
	return q, se, share, samples
}

// bar is how far above 1 a latency ratio with standard error se must be
// to count as a queue.
func (c *Controller) bar(se float64) float64 { return max(c.cfg.Tolerance, 3*se) }

// stepped reports whether this phase held clearly more in flight than
// the last full one (a step up whose delivery can be compared).
func (c *Controller) stepped(inflight float64) bool {
	return c.lastLevel > 0 && inflight >= c.lastLevel*(1+stepShare) && (c.kind == phaseStartup || c.kind == phaseProbe || c.kind == phaseGrow)
}

// A step up must raise the mean in flight by stepShare to be compared,
// and is past the knee when delivery rose by less than gainShare: half of
// a ×1.25 step, well clear of the noise of a phase's count of answers.
const (
	stepShare = 0.1
	gainShare = 0.05
	// blindShare: one answer in five cut short makes a phase blind.
	blindShare = 5
)

// growth picks the next phase after a full phase without a queue.
func (c *Controller) growth(now time.Time) phaseKind {
	switch {
	case !c.queueSeen:
		return phaseStartup
	case (c.kind == phaseProbe || c.kind == phaseGrow) && !c.judgedBusy && c.knee > 0 && c.base > c.knee*regrowShare && c.belowHigh(now):
		// Probed past the knee twice without a queue, below where the
		// knee was lately: the capacity that fell is coming back; grow
		// toward it. One probe is not enough: a probe's verdict is a
		// few standard errors of a phase, and ×1.5 on a false one
		// overshot the knee by half. Nor is a phase on a used-up CPU,
		// whose latency shows no queue either way.
		return phaseGrow
	case c.knee <= 0 || now.Sub(c.kneeAt) > kneeMemory || c.base > c.knee*1.05:
		// No knee known, or passed without a queue: capacity grew. Step up
		// a quarter a phase until a queue shows.
		return phaseProbe
	case c.base < 0.9*c.knee:
		return phaseGrow // well below the known knee: back to it quickly
	case c.prevKnee > 0 && c.base < 0.9*c.prevKnee && now.Sub(c.kneeAt) <= kneeMemory:
		return phaseGrow // once back toward the knee before a fall
	case c.cruiseLeft > 0:
		c.cruiseLeft--
		return phaseCruise
	}
	c.cruiseLeft = c.cruiseEvery
	return phaseProbe
}

// markKnee records base as the knee. A knee found where the last one
// was makes probes rarer; one that moved resets them, and one that fell
// is probed again after a single phase: a cut rests on few phases, and a
// stall of the gateway's own machine reads like a queue at the provider,
// so a wrong cut is undone within a second while a right one costs one
// probe's phase.
func (c *Controller) markKnee(now time.Time) {
	c.cruiseLeft = 0
	switch {
	case c.knee > 0 && c.base >= 0.9*c.knee && c.base <= 1.1*c.knee:
		c.cruiseEvery = min(max(c.cruiseEvery, cruisePhases)*2, maxCruisePhases)
		if c.belowHigh(now) {
			c.cruiseEvery = cruisePhases
		}
		c.cruiseLeft = c.cruiseEvery
		if c.prevKnee > 0 && c.base < 0.9*c.prevKnee {
			c.prevKnee = 0 // the fall is confirmed
		}
	case c.knee > 0 && c.base < 0.9*c.knee:
		// The knee fell: go back once toward where it was (×1.5 a
		// phase), which undoes a cut that rested on a stall at the cost
		// of one overshoot when the capacity really went. A second fall
		// in a row is believed.
		c.cruiseEvery = cruisePhases
		c.cruiseLeft = 1
		if c.prevKnee == 0 {
			c.prevKnee = c.knee
		} else {
			c.prevKnee = 0
		}
	default:
		c.cruiseEvery = cruisePhases
		c.cruiseLeft = c.cruiseEvery
	}
	c.knee, c.kneeAt, c.queueSeen = c.base, now, true
	if c.knee >= c.highKnee || now.Sub(c.highAt) > highMemory {
		c.highKnee, c.highAt = c.knee, now
	}
	if !c.judgedBusy {
		c.calmKnee = c.knee
	}
}

// regrowShare: an estimate this far past the knee (two probe steps
// without a queue) is capacity coming back (see highKnee).
const regrowShare = 1.2

// belowHigh reports whether the knee estimate is well below a knee found
// within highMemory (see highKnee).
func (c *Controller) belowHigh(now time.Time) bool {
	return c.highKnee > 0 && c.base < 0.9*c.highKnee && now.Sub(c.highAt) <= highMemory
}

// highMemory is how long a higher knee is remembered once the knee fell
// below it: longer than a knee is trusted (kneeMemory), since it is no
// limit, only a reason to probe more often and to grow back faster, and
// incidents that halve a provider often last longer than half a minute.
const highMemory = 2 * time.Minute

// calmHeadroom is how far past a calm knee the gateway's own saturation
// may grow the limit: a probe's step and a half.
const calmHeadroom = 1.5

// busyCapped reports whether the limit is at or past where growth on
// the gateway's own saturation stops.
func (c *Controller) busyCapped() bool { _, room := c.busyRoom(); return !room }

// busyRoom reports whether growth on the gateway's own saturation may
// still raise the limit, and to at most which level.
func (c *Controller) busyRoom() (float64, bool) {
	if c.calmKnee <= 0 {
		return float64(c.cfg.MaxLimit), true
	}
	top := math.Ceil(c.calmKnee * calmHeadroom)
	return top, float64(c.limit) < top
}

// learn folds a clean phase's mean latencies (a drain below the knee)
// into the no-queue latencies: an exponential average, so the estimate is
// not biased low the way the minimum of noisy means is (the lowest of
// sixty means of sixteen answers varying ±30 % sits about 12 % under the
// true mean, which read every phase at the knee as a queue). Phases at
// the limit are not clean: one may hold a small queue, and averaging it in
// would let the baseline creep up and hide a growing one.
func (c *Controller) learn() {
	for k := range c.baseline {
		n := c.m.n[k]
		if n < max(c.cfg.MinSamples/2, 1) {
			continue
		}
		mean, rel := c.m.mean(k)
		if c.baseline[k] <= 0 {
			c.baseline[k], c.baseErr[k] = mean, rel
		} else {
			c.baseline[k] += baselineAlpha * (mean - c.baseline[k])
			// The average of the last phases weighs about 1/alpha of them.
			a := baselineAlpha
			c.baseErr[k] = math.Sqrt(a*a*rel*rel + (1-a)*(1-a)*c.baseErr[k]*c.baseErr[k])
		}
	}
}

// fasterBaselines takes a phase mean well below the no-queue latency at
// once, from any phase: no queue makes answers faster, so the provider
// got faster. 20 % is five standard deviations of a mean of sixteen
// answers that vary ±30 %.
func (c *Controller) fasterBaselines() {
	for k := range c.baseline {
		n := c.m.n[k]
		if n < c.cfg.MinSamples || c.baseline[k] <= 0 {
			continue
		}
		if mean, rel := c.m.mean(k); mean < 0.8*c.baseline[k] {
			c.baseline[k], c.baseErr[k] = mean, rel
		}
	}
}

// accumulate folds a start-up phase without a queue into the first
// no-queue latency.
func (c *Controller) accumulate() {
	for k := range c.baseline {
		if c.m.n[k] == 0 {
			continue
		}
		c.startN[k] += c.m.n[k]
		c.startSum[k] += c.m.latSum[k]
		c.startSq[k] += c.m.latSq[k]
		m := measure{}
		m.n[k], m.latSum[k], m.latSq[k] = c.startN[k], c.startSum[k], c.startSq[k]
		c.baseline[k], c.baseErr[k] = m.mean(k)
	}
}

// relearn takes the phase's mean latencies as the no-queue latencies (a
// drain test showed them to be).
func (c *Controller) relearn() {
	for k := range c.baseline {
		if n := c.m.n[k]; n > 0 {
			c.baseline[k], c.baseErr[k] = c.m.mean(k)
		}
	}
}

// mean returns the mean latency of kind k and its relative standard
// error.
func (m *measure) mean(k int) (mean, relErr float64) {
	n := float64(m.n[k])
	if n == 0 {
		return 0, 0
	}
	mean = m.latSum[k] / n
	if mean <= 0 {
		return mean, 0
	}
	v := max(0, m.latSq[k]/n-mean*mean)
	return mean, math.Sqrt(v/n) / mean
}

// pendingEvidence: requests still waiting count once twice their mean
// age exceeds the no-queue latency by this factor. It is large because a
// handful of requests in flight can all be old by chance; a hang grows
// past any factor, and callers that give up are answers of their own.
const pendingEvidence = 3

// baselineAlpha is the weight of a drain phase in the no-queue latency.
const baselineAlpha = 0.5

// hanging reports whether the requests waiting for their first byte are
// evidence on their own (see queue): then a phase is judged without
// waiting for answers that may never come.
func (c *Controller) hanging(r Reading) bool {
	if r.Pending == 0 {
		return false
	}
	// Against the recent time answers hold their place too, not only the
	// no-queue latency: after the provider got slower, ordinary answers
	// in progress are old by the old standard.
	// And against the gateway's own scheduling delay: a busy gateway is
	// late to read answers that came, which ages its pending requests
	// without any hang at the provider.
	ref := max(c.baseline[kindStream], c.baseline[kindPlain], c.heldEWMA)
	return ref > 0 && 2*r.PendingAgeSum/float64(r.Pending) > pendingEvidence*max(ref, noiseOf(&c.m))
}

// queue returns the phase's mean latency ratio to the no-queue latency
// and the ratio's standard error, the knee Little's law gives for the mean
// in flight, and the number of samples behind them (answers, plus the
// requests still waiting when they hang).
func (c *Controller) queue(inflight float64, r Reading) (q, se, knee float64, samples int) {
	q, se, share, samples := c.judgeMeasure(&c.m)
	knee = inflight * share
	if r.Pending > 0 && c.hanging(r) {
		// Requests still waiting for their first byte count, with twice
		// their mean age, once that is far beyond the recent latency (a
		// hang). Below that they are ordinary answers in progress and
		// would only add noise.
		age := r.PendingAgeSum / float64(r.Pending)
		// Before any no-queue latency is known (the first answers are
		// still out), the held time is the reference hanging used; it is
		// positive whenever hanging holds, so the ratio stays finite.
		b := max(c.baseline[kindStream], c.baseline[kindPlain])
		if b <= 0 {
			b = c.heldEWMA
		}
		p := float64(r.Pending)
		n := float64(samples)
		held := c.m.heldSum + p*2*age
		wait := (1-share)*c.m.heldSum + p*(2*age-b)
		q = (q*n + p*2*age/b) / (n + p)
		samples += int(r.Pending)
		if held > 0 {
			knee = inflight * max(0, 1-wait/held)
		}
	}
	return q, se, knee, samples
}

// setLevel publishes level as the limit; it reports a change.
func (c *Controller) setLevel(level float64) bool {
	l := clamp(roundLimit(level), c.cfg.MinLimit, c.cfg.MaxLimit)
	changed := l != c.limit
	c.limit = l
	return changed
}

// setLimit publishes base × gain as the limit; it reports a change.
func (c *Controller) setLimit(gain float64) bool {
	c.base = min(max(c.base, float64(c.cfg.MinLimit)), float64(c.cfg.MaxLimit))
	l := roundLimit(c.base * gain)
	if gain == probeGain {
		// Rounded down, to stay within the step; but at least two units
		// over the knee's limit, or a probe of a small knee changes the
		// load too little to be told from noise.
		l = max(int64(math.Floor(c.base*gain)), roundLimit(c.base)+2)
	}
	if gain > 1 && l <= roundLimit(c.base) {
		l = roundLimit(c.base) + 1 // a step up is at least one unit
	}
	l = clamp(l, c.cfg.MinLimit, c.cfg.MaxLimit)
	changed := l != c.limit
	c.limit = l
	return changed
}

// roundLimit rounds an estimate to whole cost units, up from a quarter:
// with a knee of four, a unit is a quarter of the capacity, and one too
// few wastes it where one too many queues a single request.
func roundLimit(v float64) int64 { return int64(math.Ceil(v - 0.25 - 1e-9)) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// Pressure is a resource-pressure severity of the gateway's own process:
// the pressure sampler's own scale, so that a sample's severity is the
// controller's as it stands, with one list of the levels and their names.
type Pressure = pressure.Severity

// Pressure severities.
const (
	PressureNormal   = pressure.Normal
	PressureHigh     = pressure.High
	PressureCritical = pressure.Critical
)
