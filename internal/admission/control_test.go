package admission

import (
	"container/heap"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ctlSim is a deterministic model of the gateway's gate in front of one
// provider, on a fake clock stepped by 1 ms: a provider with slots and a
// service time (each may change at any moment), FIFO beyond its slots
// (a sharp knee), optionally refusing instead (429); callers that are
// either always waiting (saturating demand) or arrive open-loop, and may
// give up after a timeout. The controller sees only what the gateway
// sees: its own leases, their latencies, and the gate's counters.
type ctlSim struct {
	t    *testing.T
	c    *Controller
	now  time.Time
	rng  *rand.Rand
	step time.Duration

	slots   int
	service time.Duration
	jitter  float64 // ± share of the service time
	hang    bool
	reject  bool // 429 beyond the slots instead of queueing
	// stream is the share of requests that stream; a stream's latency
	// sample is its time to first token (ttft of its service time after
	// it starts), while it holds its slot for the whole service time.
	stream float64
	ttft   float64

	simDemand

	waiting  []time.Time // callers queued at the gate (arrival times)
	flight   []*ctlReq   // admitted, at the provider
	integral float64
	active   int64
	limited  uint64
	// admitSum is the sum of the admission times of the requests in
	// flight (seconds since start); next the earliest moment something at
	// the provider changes; seen the provider settings it was computed for.
	admitSum float64
	start    time.Time
	next     time.Time
	busy     int         // requests in service
	service_ serviceHeap // in service, by when they are done
	queued   []*ctlReq   // at the provider, waiting for a slot

	simMachine

	// ground truth
	served     int
	servedCost float64 // slot-seconds used
}

// simDemand is who sends: saturate is a closed loop of that many callers
// (waiting or in flight); rate an open-loop arrival rate per second;
// giveUp a caller timeout (0: none).
type simDemand struct {
	saturate int
	rate     float64
	// unbounded: the gate admits everything (shadow mode).
	unbounded bool
	giveUp    time.Duration
	arrivals  float64
}

// simMachine is the machine the gateway runs on. localPer models one whose
// CPU is the bottleneck (the gateway itself, a load generator beside it):
// each request admitted with n in flight waits n × localPer for a CPU on
// the gateway's side (what the gateway measures, Sample.Local) and
// localShare times that on a provider on the same machine (in the latency
// the gateway sees), with no queue at the provider at all.
type simMachine struct {
	localPer   time.Duration
	localShare float64
	// unmeasured: the gateway does not see its share of the wait
	// (Sample.Local stays 0: no receive times, or the machine's other
	// processes are what is slow); cpuBusy: the reading says the CPU is
	// used up (Reading.Busy).
	unmeasured, cpuBusy bool
}

type ctlReq struct {
	admitted, arrived time.Time
	start, done       time.Time // at the provider; zero while queued
	local             time.Duration
	gone              bool
	started, freed    bool
	stream            bool
}

func newCtlSim(t *testing.T, cfg ControlConfig, slots int, service time.Duration) *ctlSim {
	return newCtlSimSeed(t, cfg, slots, service, 1)
}

func newCtlSimSeed(t *testing.T, cfg ControlConfig, slots int, service time.Duration, seed uint64) *ctlSim {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return &ctlSim{t: t, c: NewController(cfg, now), now: now, start: now, rng: rand.New(rand.NewPCG(seed, 2)), step: time.Millisecond,
		slots: slots, service: service, jitter: 0.3}
}

// seeds are the arrival and service-time seeds every step response must
// hold for: a gate on one seed could be luck.
var seeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

// lowest runs the simulation for d and reports the lowest limit and the
// most callers waiting at the gate meanwhile.
func (s *ctlSim) lowest(d time.Duration) (low int64, waited int) {
	low = int64(1 << 62)
	s.run(d, func() {
		low = min(low, s.c.Limit())
		waited = max(waited, len(s.waiting))
	})
	return low, waited
}

// steady16 is a 16-slot provider answering in 100 ms, run for 10 s under
// a closed loop of callers: the set-up of the tests that then change
// something. It fails unless the knee found is about 16 (0.8 to hi × 16).
func steady16(t *testing.T, seed uint64, callers int, hi float64) *ctlSim {
	t.Helper()
	s := newCtlSimSeed(t, cfgFor(), 16, 100*time.Millisecond, seed)
	s.saturate = callers
	s.run(10*time.Second, nil)
	if k := s.c.Knee(); k < 0.8*16 || k > hi*16 {
		t.Fatalf("seed %d: set-up: knee %.1f after 10 s of %d callers, want about 16 (%.1f to %.1f)", seed, k, callers, 0.8*16, hi*16)
	}
	return s
}

func (s *ctlSim) reading() Reading {
	r := Reading{At: s.now, Active: s.active, Integral: s.integral, Limited: s.limited, Pending: s.active, Busy: s.cpuBusy}
	r.PendingAgeSum = max(0, float64(s.active)*s.now.Sub(s.start).Seconds()-s.admitSum)
	return r
}

func (s *ctlSim) since(t time.Time) float64 { return t.Sub(s.start).Seconds() }

func (s *ctlSim) serviceTime() time.Duration {
	f := 1 + s.jitter*(2*s.rng.Float64()-1)
	return time.Duration(float64(s.service) * f)
}

// run advances the simulation by d, calling each after every step.
func (s *ctlSim) run(d time.Duration, each func()) {
	end := s.now.Add(d)
	for s.now.Before(end) {
		s.now = s.now.Add(s.step)
		s.integral += float64(s.active) * s.step.Seconds()
		s.tick()
		if each != nil {
			each()
		}
	}
}

func (s *ctlSim) tick() {
	now := s.now
	// Arrivals.
	if s.rate > 0 {
		s.arrivals += s.rate * s.step.Seconds()
		for ; s.arrivals >= 1; s.arrivals-- {
			s.waiting = append(s.waiting, now)
		}
	}
	for len(s.waiting)+int(s.active) < s.saturate {
		s.waiting = append(s.waiting, now)
	}
	// Callers that gave up while queued at the gate leave quietly.
	if s.giveUp > 0 {
		keep := s.waiting[:0]
		for _, w := range s.waiting {
			if now.Sub(w) < s.giveUp {
				keep = append(keep, w)
			}
		}
		s.waiting = keep
	}
	// Provider: finish what is done, cancel what its callers left, start
	// queued work in freed slots.
	for len(s.service_) > 0 && !s.service_[0].done.After(now) {
		q := heap.Pop(&s.service_).(*ctlReq)
		if q.gone {
			continue // cancelled earlier
		}
		s.finish(q)
		s.served++
		s.servedCost += q.done.Sub(q.start).Seconds()
		held := q.done.Sub(q.admitted)
		lat := held
		if q.stream {
			lat = q.start.Sub(q.admitted) + time.Duration(s.ttft*float64(q.done.Sub(q.start)))
		}
		local := q.local
		if s.unmeasured {
			local = 0
		}
		s.c.Observe(now, Sample{Latency: lat, Held: held, OK: true, Stream: q.stream, Local: local})
	}
	if s.giveUp > 0 && !now.Before(s.next) {
		s.next = now.Add(time.Hour)
		for _, q := range s.flight {
			if q.gone {
				continue
			}
			if now.Sub(q.arrived) >= s.giveUp {
				// The caller left: the gateway cancels the upstream request.
				q.gone = true
				s.finish(q)
				if !q.start.IsZero() {
					s.servedCost += now.Sub(q.start).Seconds()
				}
				lat := now.Sub(q.admitted)
				s.c.Observe(now, Sample{Latency: lat, Held: lat, Censored: true})
				continue
			}
			if t := q.arrived.Add(s.giveUp); t.Before(s.next) {
				s.next = t
			}
		}
		keep := s.flight[:0]
		for _, q := range s.flight {
			if !q.gone && (q.start.IsZero() || q.done.After(now)) {
				keep = append(keep, q)
			}
		}
		s.flight = keep
	}
	for len(s.queued) > 0 && s.busy < s.slots && !s.hang {
		q := s.queued[0]
		s.queued = s.queued[1:]
		if !q.gone {
			s.begin(q)
		}
	}
	busy := s.busy
	// Gate: admit while there is room.
	limit := s.c.Limit()
	for len(s.waiting) > 0 {
		if s.active+1 > limit && !s.unbounded {
			s.limited++
			break
		}
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		if s.reject && busy >= s.slots {
			// Refused at once by the provider.
			s.c.Observe(now, Sample{Latency: 0, Held: 0, Drop: true})
			continue
		}
		q := &ctlReq{admitted: now, arrived: w, stream: s.rng.Float64() < s.stream}
		s.active++
		s.admitSum += s.since(now)
		if len(s.queued) == 0 && s.busy < s.slots && !s.hang {
			s.begin(q)
		} else {
			s.queued = append(s.queued, q)
		}
		busy = s.busy
		if s.giveUp > 0 {
			s.flight = append(s.flight, q)
			if t := q.arrived.Add(s.giveUp); t.Before(s.next) {
				s.next = t
			}
		}
	}
	if s.now.UnixMilli()%5 == 0 {
		s.c.Tick(s.reading())
	}
}

// begin starts q in a free slot.
func (s *ctlSim) begin(q *ctlReq) {
	q.local = time.Duration(s.active) * s.localPer
	q.start, q.done = s.now, s.now.Add(s.serviceTime()+time.Duration(s.localShare*float64(q.local)))
	q.started = true
	s.busy++
	heap.Push(&s.service_, q)
}

// finish takes q off the provider and the gate.
func (s *ctlSim) finish(q *ctlReq) {
	s.active--
	s.admitSum -= s.since(q.admitted)
	if q.started && !q.freed {
		q.freed = true
		s.busy--
	}
}

// serviceHeap orders requests in service by when they are done.
type serviceHeap []*ctlReq

func (h serviceHeap) Len() int           { return len(h) }
func (h serviceHeap) Less(i, j int) bool { return h[i].done.Before(h[j].done) }
func (h serviceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *serviceHeap) Push(x any)        { *h = append(*h, x.(*ctlReq)) }
func (h *serviceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// within runs d and returns the first time (since the start of the run)
// at which cond held, or -1.
func (s *ctlSim) within(d time.Duration, cond func() bool) time.Duration {
	start, at := s.now, time.Duration(-1)
	s.run(d, func() {
		if at < 0 && cond() {
			at = s.now.Sub(start)
		}
	})
	return at
}

// kneeRange returns the lowest and highest knee estimate over d, and
// raises *top to the highest limit.
func (s *ctlSim) kneeRange(d time.Duration, top *int64) (lo, hi float64) {
	lo = 1e18
	s.run(d, func() {
		k := s.c.Knee()
		lo, hi = min(lo, k), max(hi, k)
		*top = max(*top, s.c.Limit())
	})
	return lo, hi
}

func (s *ctlSim) throughput(d time.Duration) float64 {
	before := s.served
	s.run(d, nil)
	return float64(s.served-before) / d.Seconds()
}

// busyShare is the mean share of the provider's slots in use over d.
func (s *ctlSim) busyShare(d time.Duration) float64 {
	before := s.servedCost
	s.run(d, nil)
	return (s.servedCost - before) / d.Seconds() / float64(s.slots)
}

func cfgFor() ControlConfig { return DefaultControlConfig() }

func TestControlColdStartReachesCapacityInTwoWindows(t *testing.T) {
	for _, seed := range seeds {
		for _, tc := range []struct {
			slots   int
			service time.Duration
		}{{16, 100 * time.Millisecond}, {256, 20 * time.Millisecond}, {4, 300 * time.Millisecond}} {
			s := newCtlSimSeed(t, cfgFor(), tc.slots, tc.service, seed)
			s.saturate = 4 * tc.slots
			at := s.within(2*time.Second, func() bool { return s.c.Limit() >= int64(tc.slots) })
			if at < 0 {
				t.Errorf("seed %d: "+"%d slots × %v: limit %d after 2 s, want ≥ %d (%+v)", seed, tc.slots, tc.service, s.c.Limit(), tc.slots, s.c.Last())
				continue
			}
			// And it settles at the knee rather than above it: after a
			// settling period, the estimate stays within [0.8, 1.2] × the
			// knee, or within one unit where a unit is a large share of it.
			s.run(10*time.Second, nil)
			lo, hi := s.kneeRange(10*time.Second, new(int64))
			slack := max(0.2*float64(tc.slots), 1)
			if lo < float64(tc.slots)-slack || hi > float64(tc.slots)+slack {
				t.Errorf("seed %d: %d slots × %v: knee estimate in [%.1f, %.1f], want within %d ± %.1f", seed, tc.slots, tc.service, lo, hi, tc.slots, slack)
			}
			if u := s.busyShare(5 * time.Second); u < 0.85 {
				t.Errorf("seed %d: %d slots × %v: provider %.0f%% busy, want ≥ 85%%", seed, tc.slots, tc.service, 100*u)
			}
		}
	}
}

func TestControlCapacityHalvesAndReturns(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 32, 100*time.Millisecond, seed)
		s.saturate = 200
		s.run(10*time.Second, nil)
		if k := s.c.Knee(); k < 0.8*32 || k > 1.2*32 {
			t.Fatalf("seed %d: "+"steady knee %.1f, want about 32", seed, k)
		}
		s.slots = 16
		at := s.within(5*time.Second, func() bool { return s.c.Knee() <= 1.2*16 })
		if at < 0 {
			t.Fatalf("seed %d: "+"capacity halved: knee %.1f after 5 s, want ≤ 19.2 (%+v)", seed, s.c.Knee(), s.c.Last())
		}
		t.Logf("seed %d: "+"capacity halved: within 1.2x after %v", seed, at)
		var top int64
		if lo, hi := s.kneeRange(20*time.Second, &top); hi > 1.2*16 || lo < 0.7*16 || float64(top) > 1.2*16 {
			t.Fatalf("seed %d: "+"after halving the knee moved in [%.1f, %.1f] and the limit reached %d, want both within [0.7, 1.2] × 16", seed, lo, hi, top)
		}
		s.slots = 32
		at = s.within(10*time.Second, func() bool { return s.c.Knee() >= 0.9*32 })
		if at < 0 {
			t.Fatalf("seed %d: "+"capacity restored: knee %.1f after 10 s, want ≥ 28.8", seed, s.c.Knee())
		}
		t.Logf("seed %d: "+"capacity restored: ≥ 0.9x after %v", seed, at)
	}
}

// TestControlCapacityRestoredAfterALongHalving is the gate scenario's
// shape (32 slots × 200 ms, halved for 20 s, then restored): the knee
// comes back within 10 s. Probing every 12 phases of 0.4 s and climbing
// ×1.15 a phase, three of these seeds took 10.3 to 17.4 s; a knee that
// fell keeps probes frequent and grows back toward the knee it had.
func TestControlCapacityRestoredAfterALongHalving(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 32, 200*time.Millisecond, seed)
		s.saturate = 200
		s.run(15*time.Second, nil)
		s.slots = 16
		s.run(20*time.Second, nil)
		if k := s.c.Knee(); k > 1.2*16 {
			t.Fatalf("seed %d: knee %.1f after 20 s at 16 slots, want ≤ 19.2", seed, k)
		}
		s.slots = 32
		at := s.within(10*time.Second, func() bool { return s.c.Knee() >= 0.9*32 })
		if at < 0 {
			t.Fatalf("seed %d: capacity restored: knee %.1f after 10 s, want ≥ 28.8 (%+v)", seed, s.c.Knee(), s.c.Last())
		}
		t.Logf("seed %d: capacity restored: ≥ 0.9x after %v", seed, at)
	}
}

func TestControlLatencyDoublesIsNotCongestion(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 16, 200*time.Millisecond, seed)
		s.saturate = 100
		s.run(10*time.Second, nil)
		s.service = 400 * time.Millisecond
		s.run(10*time.Second, nil)
		capacity := 16 / 0.4
		if tp := s.throughput(10 * time.Second); tp < 0.9*capacity {
			t.Fatalf("seed %d: "+"after the latency step: %.1f answers/s, want ≥ 90%% of %.0f (knee %.1f, %+v)", seed, tp, capacity, s.c.Knee(), s.c.Last())
		}
		if u := s.busyShare(5 * time.Second); u < 0.9 {
			t.Fatalf("seed %d: "+"provider %.0f%% busy after the latency step, want ≥ 90%%", seed, 100*u)
		}
	}
}

func TestControlCallersWhoGiveUpAreEvidence(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 16, 100*time.Millisecond, seed)
		s.rate = 3 * 160 // three times the capacity
		s.giveUp = 300 * time.Millisecond
		var peak float64
		s.run(15*time.Second, func() { peak = max(peak, float64(s.c.Limit())) })
		if peak > 1.3*16*probeGain {
			t.Fatalf("seed %d: "+"limit peaked at %.0f with callers giving up, want ≤ 1.3 × the knee (16) even while probing", seed, peak)
		}
		if k := s.c.Knee(); k > 1.3*16 {
			t.Fatalf("seed %d: "+"knee estimate %.1f, want ≤ 1.3 × 16", seed, k)
		}
	}
}

// hungSim saturates a provider of 16 slots × 100 ms for 5 s and then
// hangs it for 10 s (it stays hung); before is the limit before the hang.
func hungSim(t *testing.T, seed uint64) (s *ctlSim, before int64) {
	s = newCtlSimSeed(t, cfgFor(), 16, 100*time.Millisecond, seed)
	s.saturate = 64
	s.run(5*time.Second, nil)
	before = s.c.Limit()
	s.hang = true
	s.run(10*time.Second, nil)
	return s, before
}

func TestControlHangThenRecovery(t *testing.T) {
	for _, seed := range seeds {
		s, before := hungSim(t, seed)
		if l := s.c.Limit(); l > before {
			t.Fatalf("seed %d: "+"the limit grew from %d to %d while the provider hung", seed, before, l)
		}
		s.hang = false
		at := s.within(10*time.Second, func() bool { return s.c.Knee() >= 0.9*16 })
		if at < 0 {
			t.Fatalf("seed %d: "+"after the hang: knee %.1f after 10 s", seed, s.c.Knee())
		}
	}
}

// TestControlHangUndoneWhenAnswersReturn: half the capacity offered as an
// open loop whose attempts time out after 2 s; a 10 s hang drives the
// limit down phase by phase (timeouts, losses). Once the provider answers
// again, the limit is back at the level it had before the hang within two
// of the provider's answer times plus a phase, not ×1.5 a phase from the
// floor (which at a limit of one needs a dozen answers a phase).
func TestControlHangUndoneWhenAnswersReturn(t *testing.T) {
	for _, seed := range seeds {
		s, before := hungSim(t, seed)
		low := s.c.Limit()
		if float64(low) >= 0.5*float64(before) {
			t.Fatalf("seed %d: the hang left the limit at %d (before %d): the test tests nothing", seed, low, before)
		}
		s.hang = false
		at := s.within(10*time.Second, func() bool { return float64(s.c.Limit()) >= 0.9*float64(before) })
		t.Logf("seed %d: back from %d to %d in %v", seed, low, s.c.Limit(), at)
		if at < 0 || at > time.Second {
			t.Fatalf("seed %d: after the hang the limit took %v to return from %d to 0.9 × %d (now %d)", seed, at, low, before, s.c.Limit())
		}
	}
}

// TestControlMixOfStreamsIsNotCongestion: a stream's latency sample is
// its time to first token, much shorter than a plain answer's; the share
// of streams moving from none to all must not read as a latency change.
func TestControlMixOfStreamsIsNotCongestion(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 16, 100*time.Millisecond, seed)
		s.saturate = 64
		s.ttft = 0.2
		s.run(10*time.Second, nil)
		s.stream = 1
		s.run(5*time.Second, nil)
		if lo, hi := s.kneeRange(10*time.Second, new(int64)); lo < 0.8*16 || hi > 1.2*16 {
			t.Errorf("seed %d: after the switch to streams the knee moved in [%.1f, %.1f], want within [0.8, 1.2] × 16", seed, lo, hi)
		}
		s.stream = 0.5
		if u := s.busyShare(10 * time.Second); u < 0.85 {
			t.Errorf("seed %d: half streams: provider %.0f%% busy, want ≥ 85%%", seed, 100*u)
		}
	}
}

func TestControlRefusalsAreLoss(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 16, 100*time.Millisecond, seed)
		s.reject = true
		s.saturate = 64
		s.run(5*time.Second, nil)
		if lo, hi := s.kneeRange(10*time.Second, new(int64)); lo < 0.7*16 || hi > 1.3*16 {
			t.Fatalf("seed %d: "+"a provider that refuses beyond 16 slots: knee in [%.1f, %.1f]", seed, lo, hi)
		}
	}
}

func TestControlAppLimitedHoldsItsLimit(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 64, 50*time.Millisecond, seed)
		s.rate = 100 // 5 in flight on average, far below the knee
		s.run(10*time.Second, nil)
		l := s.c.Limit()
		s.run(20*time.Second, nil)
		if s.c.Limit() != l || s.c.Converged() {
			t.Fatalf("seed %d: "+"app-limited: limit moved %d → %d (converged %v)", seed, l, s.c.Limit(), s.c.Converged())
		}
		// Demand then arrives: the limit follows it to the knee.
		s.rate = 0
		s.saturate = 256
		if at := s.within(3*time.Second, func() bool { return s.c.Limit() >= 64 }); at < 0 {
			t.Fatalf("seed %d: "+"demand arrived: limit %d after 3 s", seed, s.c.Limit())
		}
	}
}

func TestControlPressure(t *testing.T) {
	s := newCtlSim(t, cfgFor(), 32, 100*time.Millisecond)
	s.saturate = 128
	s.run(10*time.Second, nil)
	before := s.c.Limit()
	if !s.c.ObservePressure(s.now, PressureCritical) || s.c.Limit() > (before+1)/2 {
		t.Fatalf("critical pressure: limit %d → %d, want halved", before, s.c.Limit())
	}
	halved := s.c.Limit()
	if s.c.ObservePressure(s.now, PressureCritical) {
		t.Fatal("critical pressure halved twice within a window")
	}
	// High pressure stops growth for as long as it is reported.
	s.run(3*time.Second, func() { s.c.ObservePressure(s.now, PressureHigh) })
	if s.c.Limit() > halved {
		t.Fatalf("grew from %d to %d under high pressure", halved, s.c.Limit())
	}
	if at := s.within(5*time.Second, func() bool { return s.c.Knee() >= 0.9*32 }); at < 0 {
		t.Fatalf("after the pressure: knee %.1f", s.c.Knee())
	}
}

// TestControlShadowFindsTheKnee: in shadow mode everything is admitted,
// so the limit cannot shape the load; a queue sets the knee estimate by
// Little's law directly.
func TestControlShadowFindsTheKnee(t *testing.T) {
	cfg := cfgFor()
	cfg.Shadow = true
	s := newCtlSim(t, cfg, 16, 100*time.Millisecond)
	s.unbounded = true
	s.saturate = 8 // below the knee: the no-queue latency
	s.run(3*time.Second, nil)
	s.saturate = 24 // 1.5 × the knee in flight, whatever the limit says
	drained := false
	s.run(10*time.Second, func() { drained = drained || s.c.Phase() == "drain" })
	if drained {
		t.Fatal("shadow mode ran a drain phase: it cannot lower the load")
	}
	if k := s.c.Knee(); k < 0.8*16 || k > 1.2*16 {
		t.Fatalf("shadow knee %.1f, want about 16", k)
	}
}

// TestControlPinnedLimitKeepsItsBaseline: with the limit pinned (min =
// max) above the provider's knee, drains cannot lower the load, so their
// queued latency must not become the no-queue latency: the queue stays
// visible (to the lanes' shedding and to the knee) rather than being
// re-learnt away.
func TestControlPinnedLimitKeepsItsBaseline(t *testing.T) {
	for _, seed := range seeds {
		cfg := cfgFor()
		cfg.MinLimit, cfg.InitialLimit, cfg.MaxLimit = 24, 24, 24
		s := newCtlSimSeed(t, cfg, 16, 100*time.Millisecond, seed)
		s.saturate = 100
		s.run(20*time.Second, nil)
		if b := s.c.Baseline(); b > 125*time.Millisecond {
			t.Fatalf("seed %d: baseline %v after 20 s at 24 in flight on 16 slots of 100 ms, want the no-queue ~100 ms (%+v)", seed, b, s.c.Last())
		}
		if s.c.Limit() != 24 {
			t.Fatalf("seed %d: limit %d, pinned at 24", seed, s.c.Limit())
		}
	}
}

// TestControlStallIsUndoneQuickly: a fifth of a second in which every
// answer takes twice as long (the gateway's own machine stalled, or a
// provider hiccup) may cut the limit, but the cut rests on one phase and
// is probed again at once: the knee is back within 3 s of the stall.
func TestControlStallIsUndoneQuickly(t *testing.T) {
	for _, seed := range seeds {
		s := steady16(t, seed, 100, 1.2)
		s.service = 200 * time.Millisecond
		s.run(200*time.Millisecond, nil)
		s.service = 100 * time.Millisecond
		low := s.c.Knee()
		s.run(time.Second, func() { low = min(low, s.c.Knee()) })
		at := s.within(2*time.Second, func() bool { return s.c.Knee() >= 0.9*16 })
		if at < 0 {
			t.Fatalf("seed %d: the knee is %.1f 3 s after the stall (lowest %.1f), want ≥ 14.4 (%+v)", seed, s.c.Knee(), low, s.c.Last())
		}
		t.Logf("seed %d: lowest knee %.1f after the stall, back ≥ 0.9x %v after the first second", seed, low, at)
	}
}

// TestControlLocalDelayIsNotAQueue: the gateway's own CPU is the
// bottleneck (a load test on the same two cores): every answer waits for
// a CPU in proportion to the load, on the gateway's side (measured) and
// on a provider beside it, which itself has room for every request. The
// latencies grow with the load and would fall with the limit exactly as a
// queue's would; the limit must not fall below what the provider serves,
// so every caller is in flight and none waits at the gate.
func TestControlLocalDelayIsNotAQueue(t *testing.T) {
	for _, tc := range []struct {
		service  time.Duration
		localPer time.Duration
	}{
		{20 * time.Millisecond, 100 * time.Microsecond}, // 25 ms of CPU wait at 256 in flight
		{5 * time.Millisecond, 40 * time.Microsecond},
		{50 * time.Millisecond, 400 * time.Microsecond}, // waits twice the service time
	} {
		for _, seed := range seeds {
			s := newCtlSimSeed(t, cfgFor(), 4096, tc.service, seed)
			s.saturate, s.localPer, s.localShare = 256, tc.localPer, 1.5
			s.run(10*time.Second, nil)
			low, waited := s.lowest(5 * time.Second)
			if low < 256 || waited > 0 {
				t.Errorf("seed %d, %v + %v per request in flight: the limit fell to %d (want ≥ 256, the callers) and up to %d callers waited at the gate; last phase %+v",
					seed, tc.service, tc.localPer, low, waited, s.c.Last())
			}
		}
	}
}

// TestControlLocalDelayKeepsARealKnee: the same busy machine in front of a
// provider that really has a knee (64 slots, 100 ms): its queue is far
// beyond what the gateway's own waits explain, and the limit still finds
// it.
func TestControlLocalDelayKeepsARealKnee(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 64, 100*time.Millisecond, seed)
		s.saturate, s.localPer, s.localShare = 200, 20*time.Microsecond, 1.5
		s.run(10*time.Second, nil)
		lo, hi := s.kneeRange(10*time.Second, new(int64))
		if lo < 0.8*64 || hi > 1.2*64 {
			t.Errorf("seed %d: knee estimate in [%.1f, %.1f], want within [%.1f, %.1f]", seed, lo, hi, 0.8*64, 1.2*64)
		}
	}
}

// TestControlUsedUpCPUIsNotAQueue: the machine's CPU is used up and the
// gateway cannot tell its own share of the waits (no receive times; the
// slow part is a provider on the same machine): the latency grows with
// the load, and the controller, told the CPU is used up, does not take
// it for a queue. The same load without that signal does cut the limit:
// the signal is what keeps it.
func TestControlUsedUpCPUIsNotAQueue(t *testing.T) {
	for _, busy := range []bool{true, false} {
		cut := 0
		for _, seed := range seeds {
			s := newCtlSimSeed(t, cfgFor(), 4096, 20*time.Millisecond, seed)
			s.saturate, s.localPer, s.localShare, s.unmeasured, s.cpuBusy = 256, 100*time.Microsecond, 2, true, busy
			s.run(10*time.Second, nil)
			low, waited := s.lowest(5 * time.Second)
			if low < 256 || waited > 0 {
				cut++
				if busy {
					t.Errorf("seed %d, CPU used up: the limit fell to %d and %d callers waited; last phase %+v", seed, low, waited, s.c.Last())
				}
			}
		}
		if !busy && cut == 0 {
			t.Error("without the used-up CPU signal the latency never read as a queue: the test does not test the signal")
		}
	}
}

// TestControlUsedUpCPUStillSeesLoss: a provider that refuses beyond its
// slots (429) is cut to them while the CPU is used up: distress is
// evidence whatever the machine.
func TestControlUsedUpCPUStillSeesLoss(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 32, 100*time.Millisecond, seed)
		s.saturate, s.reject, s.cpuBusy = 200, true, true
		s.run(10*time.Second, nil)
		lo, hi := s.kneeRange(5*time.Second, new(int64))
		if hi > 1.3*32 || lo < 0.5*32 {
			t.Errorf("seed %d: knee estimate in [%.1f, %.1f] against a provider refusing beyond 32", seed, lo, hi)
		}
	}
}

// TestControlUsedUpCPUReachesTheDemandFast: on a machine the gateway's
// own work uses up, every answer waits for a CPU in proportion to the load
// (here 2048 callers, a provider with no cap answering in 20 ms and a
// local wait of 100 µs per request in flight, so an answer takes about
// ten times the provider's time at the demand). A phase lasts as long as
// those waits, so a step a phase keeps callers waiting while the limit
// climbs; with the CPU signal the limit doubles whenever callers waited
// for a provider answer's time, and reaches the demand from a cold start
// in well under the time the phases take (simulated time: no timing of
// this machine is measured).
func TestControlUsedUpCPUReachesTheDemandFast(t *testing.T) {
	const demand = 2048
	var took [2][]time.Duration
	for i, busy := range []bool{true, false} {
		for _, seed := range seeds {
			s := newCtlSimSeed(t, cfgFor(), 8192, 20*time.Millisecond, seed)
			s.saturate, s.localPer, s.localShare, s.cpuBusy = demand, 100*time.Microsecond, 1, busy
			at := s.within(20*time.Second, func() bool { return s.c.Limit() >= demand })
			if at < 0 {
				t.Errorf("seed %d, busy %v: the limit is %d after 20 s against a demand of %d; last phase %+v", seed, busy, s.c.Limit(), demand, s.c.Last())
				at = 20 * time.Second
			}
			took[i] = append(took[i], at)
		}
	}
	slices.Sort(took[0])
	slices.Sort(took[1])
	if worst, median := took[0][len(took[0])-1], took[1][len(took[1])/2]; worst > 2*time.Second || 2*worst > median {
		t.Errorf("reaching the demand took %v with the CPU signal and %v (median) without: want at most 2 s, and half the time or less", took[0], took[1])
	}
}

// TestControlUsedUpCPUStillSeesADeepQueue: a provider with 16 slots of
// 200 ms under five times its capacity, on a machine whose CPU is used up
// but whose own waits (measured per answer) are milliseconds: its queue,
// whole service times deep, is far beyond what the CPU could explain, so
// the limit still finds the knee rather than doubling while callers wait.
func TestControlUsedUpCPUStillSeesADeepQueue(t *testing.T) {
	for _, seed := range seeds {
		s := newCtlSimSeed(t, cfgFor(), 16, 200*time.Millisecond, seed)
		s.saturate, s.localPer, s.localShare, s.cpuBusy = 80, 50*time.Microsecond, 1, true
		s.run(10*time.Second, nil)
		var top int64
		lo, hi := s.kneeRange(10*time.Second, &top)
		if top > 2*16 || hi > 1.3*16 || lo < 0.5*16 {
			t.Errorf("seed %d: limit up to %d, knee estimate in [%.1f, %.1f] against 16 slots; last phase %+v", seed, top, lo, hi, s.c.Last())
		}
	}
}

// TestControlHangBeforeAnyBaselineStaysFinite: a first phase passes with
// no answer, the first answers come back before the next phase starts
// measuring (so they set the time an answer holds its slot but no
// no-queue latency), then the provider hangs. The phase judged on the
// hang alone publishes finite figures (health encodes them as JSON, which
// has no NaN or infinity).
func TestControlHangBeforeAnyBaselineStaysFinite(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := NewController(cfgFor(), t0)
	now := t0
	for c.Phases() == 0 && now.Sub(t0) < time.Minute {
		now = now.Add(10 * time.Millisecond)
		c.Tick(Reading{At: now})
	}
	c.Observe(now.Add(time.Millisecond), Sample{Latency: 10 * time.Millisecond, Held: 10 * time.Millisecond, OK: true})
	if c.Phases() != 1 || c.Baseline() != 0 || c.Held() <= 0 {
		t.Fatalf("set-up: %d phases, baseline %v, held %v; want one, none and some", c.Phases(), c.Baseline(), c.Held())
	}
	const pending = 16
	from := now
	for c.Phases() == 1 && now.Sub(from) < time.Minute {
		now = now.Add(10 * time.Millisecond)
		age := now.Sub(from).Seconds()
		c.Tick(Reading{At: now, Active: pending, Integral: pending * age, Pending: pending, PendingAgeSum: pending * age})
	}
	if c.Phases() != 2 {
		t.Fatal("no phase was judged on the hang in a minute: the test tests nothing")
	}
	r := c.Last()
	for name, v := range map[string]float64{"queueRatio": r.QueueRatio, "knee": r.Knee, "inflight": r.Inflight,
		"kneeEstimate": c.Knee(), "drainRate": c.DrainRate()} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Errorf("%s is %v after the phase judged on the hang (%+v)", name, v, r)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("the phase report cannot be encoded: %v", err)
	}
}

// TestControlBusyCPUStopsNearACalmKnee: a provider with 16 slots, its knee
// found while the CPU was calm; then the gateway's own work uses the CPU
// up (each request in flight makes every answer wait 2 ms on the
// gateway, longer than the provider's answer at 64 in flight). Growth on
// the gateway's saturation alone stops at one and a half times the calm
// knee instead of doubling past it into the provider's queue.
func TestControlBusyCPUStopsNearACalmKnee(t *testing.T) {
	for _, seed := range seeds {
		s := steady16(t, seed, 64, 1.3)
		s.cpuBusy, s.localPer, s.localShare = true, 2*time.Millisecond, 0
		var top int64
		s.run(10*time.Second, func() { top = max(top, s.c.Limit()) })
		if float64(top) > math.Ceil(calmHeadroom*s.c.calmKnee) || top > 2*16 {
			t.Errorf("seed %d: on a used-up CPU the limit reached %d against a calm knee of %.1f (16 slots); last phase %+v", seed, top, s.c.calmKnee, s.c.Last())
		}
	}
}

// TestControlCalibrationDrainsAtTheInitialLimit: the first phase measures
// at calibrateLevel, below the initial limit, and the drain rate that
// waits are estimated with is the initial limit's until the phase is
// judged (then the limit's own): a closed loop starting above the
// calibration level is not told a wait four times too long.
func TestControlCalibrationDrainsAtTheInitialLimit(t *testing.T) {
	cfg := cfgFor()
	if cfg.InitialLimit <= calibrateLevel {
		t.Fatalf("test setup: initial limit %d does not exceed the calibration level %d", cfg.InitialLimit, calibrateLevel)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := NewController(cfg, now)
	if c.Limit() != calibrateLevel || c.DrainRate() != 0 {
		t.Fatalf("a new controller: limit %d, drain %.1f/s; want %d and unknown (0)", c.Limit(), c.DrainRate(), calibrateLevel)
	}
	held := 800 * time.Millisecond
	c.Observe(now.Add(held), Sample{Held: held, Latency: held, OK: true})
	want := float64(cfg.InitialLimit) / held.Seconds()
	if got := c.DrainRate(); c.Limit() != calibrateLevel || math.Abs(got-want) > 1e-9 {
		t.Fatalf("calibrating at limit %d: drain %.2f/s, want the initial limit's %.2f/s", c.Limit(), got, want)
	}
	// Judged: the limit is the initial one or more, and the drain is its own.
	s := &ctlSim{t: t, c: c, now: now, start: now, rng: rand.New(rand.NewPCG(1, 2)), step: time.Millisecond, slots: 64, service: held, jitter: 0.3}
	s.saturate = 64
	if s.within(10*time.Second, func() bool { return !s.c.calibrating }) < 0 {
		t.Fatalf("the calibration phase never ended (%+v)", s.c.Last())
	}
	if got, own := s.c.DrainRate(), float64(s.c.Limit())/s.c.Held().Seconds(); math.Abs(got-own) > 1e-6*own || s.c.Limit() < cfg.InitialLimit {
		t.Fatalf("after calibration: limit %d, drain %.2f/s, want the limit's own %.2f/s at ≥ %d", s.c.Limit(), got, own, cfg.InitialLimit)
	}
}
