package admission

import (
	"sync"
	"time"
)

// Verdict is the gate's answer to an acquire.
type Verdict uint8

// Verdicts.
const (
	// Admitted: the cost is now held; release it with Release.
	Admitted Verdict = iota
	// Queue: no room now, or work of the class is already waiting. The
	// caller was registered as a waiter and must now be queued (and later
	// resolved with Unwait exactly once).
	Queue
	// Busy: no room now; nothing was registered (register was false).
	Busy
	// Oversized: the cost exceeds the limit and solo progress does not apply.
	Oversized
	// Closed: the gate is shut down.
	Closed
)

var verdictNames = [...]string{"admitted", "queue", "busy", "oversized", "closed"}

func (v Verdict) String() string { return verdictNames[v] }

// ProbeResult is the answer to a per-target probe.
type ProbeResult uint8

// Probe results.
const (
	// ProbeOK: the target may be dispatched; its concurrency slot (if it
	// has a cap) is now held and must be returned with ReleaseTarget.
	ProbeOK ProbeResult = iota
	// ProbeLanes: the admission lanes refused (no room for the target's
	// cost, or work of the class is waiting). Nothing is held.
	ProbeLanes
	// ProbeTarget: the target is at its concurrency cap. Nothing is held.
	ProbeTarget
)

// GateStats is a consistent view of the gate's counters.
type GateStats struct {
	Limit   int64
	Floor   [NumClasses]int64
	Active  [NumClasses]int64
	Count   [NumClasses]int64
	Waiting [NumClasses]int64
	Closed  bool
}

// ActiveCost is the total in-flight cost.
func (s GateStats) ActiveCost() int64 { return s.Active[Interactive] + s.Active[Batch] }

// ActiveCount is the number of held leases.
func (s GateStats) ActiveCount() int64 { return s.Count[Interactive] + s.Count[Batch] }

// Gate is the admission ledger every request touches: in-flight cost and
// lease count per class, waiters per class, the limit and class floors the
// controller publishes, and per-target concurrency slots. Every decision is
// one locked check over all of them, so no decision ever sees a limit from
// one moment and a count from another, and a probe that checks the class
// floors and a target cap takes both or neither.
//
// A single compare-and-swap word cannot hold two class costs, the waiter
// state, the limit generation and a target slot; the lock is held for a few
// dozen nanoseconds and never across a call out.
//
// Class floors: a class may use the limit minus what the other class
// reserves. A class with waiters reserves its whole floor: when interactive
// demand returns and cannot be met, batch admissions stop until interactive
// has its floor; nothing already admitted is preempted. A class without
// waiters that was active in the last ClassIdle reserves, within its floor,
// the most it held recently (its demand), and lends the rest. A class idle
// for longer reserves only what it holds. So batch borrows whatever
// interactive leaves idle, and a steady interactive load keeps the room it
// uses.
type Gate struct {
	mu       sync.Mutex
	limit    int64
	maxLimit int64
	shares   [NumClasses]int64
	floor    [NumClasses]int64
	horizon  int64
	solo     bool
	closed   bool
	active   [NumClasses]int64
	count    [NumClasses]int64
	waiting  [NumClasses]int64
	seen     [NumClasses]int64
	everSeen [NumClasses]bool
	rpeak    [NumClasses]int64 // recent peak in-flight cost by class
	rpeakAt  [NumClasses]int64
	peak     int64
	tActive  []int32
	tCap     []int32
}

// NewGate returns an open gate. targetCaps[i] is target i's concurrency
// cap (0 = none).
func NewGate(limit, maxLimit int64, shares [NumClasses]int64, classIdle time.Duration, targetCaps []int) *Gate {
	g := &Gate{maxLimit: maxLimit, shares: shares, horizon: int64(classIdle), solo: true}
	g.tActive = make([]int32, len(targetCaps))
	g.tCap = make([]int32, len(targetCaps))
	for i, c := range targetCaps {
		g.tCap[i] = int32(c)
	}
	g.setLimit(limit)
	return g
}

func (g *Gate) setLimit(limit int64) {
	g.limit = limit
	for c := range g.floor {
		g.floor[c] = limit * g.shares[c] / 100
	}
}

// SetLimit publishes a new limit. solo says whether solo progress is
// allowed (the window's pressure is normal).
func (g *Gate) SetLimit(limit int64, solo bool) {
	g.mu.Lock()
	g.setLimit(limit)
	g.solo = solo
	g.mu.Unlock()
}

// Limit returns the published limit.
func (g *Gate) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// Close refuses every later acquire with Closed.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// reserve is what class c keeps from the other class at now.
func (g *Gate) reserve(c Class, now int64) int64 {
	r := g.active[c]
	switch {
	case g.waiting[c] > 0:
		r = max(r, g.floor[c])
	case g.everSeen[c] && now-g.seen[c] < g.horizon:
		r = max(r, min(g.floor[c], g.recentPeak(c, now)))
	}
	return r
}

func (g *Gate) recentPeak(c Class, now int64) int64 {
	if now-g.rpeakAt[c] > g.horizon {
		return g.active[c]
	}
	return g.rpeak[c]
}

// fits reports whether cost more of class c stays within the limit and
// leaves the other class its reserve.
func (g *Gate) fits(c Class, cost, now int64) bool {
	return g.active[c]+cost+g.reserve(1-c, now) <= g.limit
}

func (g *Gate) take(c Class, cost, now int64) {
	g.active[c] += cost
	g.count[c]++
	if g.active[c] >= g.recentPeak(c, now) {
		g.rpeak[c], g.rpeakAt[c] = g.active[c], now
	}
	if t := g.active[Interactive] + g.active[Batch]; t > g.peak {
		g.peak = t
	}
}

// Acquire is the fast path of a new request of class c at now (any
// monotonic nanosecond clock). It admits when the cost fits and nothing of
// the class is waiting (queued work is never bypassed). A cost above the
// limit is admitted only as solo progress: nothing in flight, nothing
// waiting, normal pressure, and cost within the maximum limit. Otherwise,
// with register, the caller becomes a waiter (Queue); without, Busy.
func (g *Gate) Acquire(c Class, cost, now int64, register bool) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return Closed
	}
	g.seen[c], g.everSeen[c] = now, true
	if cost > g.limit {
		total := g.active[Interactive] + g.active[Batch]
		if g.solo && cost <= g.maxLimit && total == 0 && g.waiting[Interactive]+g.waiting[Batch] == 0 {
			g.take(c, cost, now)
			return Admitted
		}
		return Oversized
	}
	if g.waiting[c] == 0 && g.fits(c, cost, now) {
		g.take(c, cost, now)
		return Admitted
	}
	if !register {
		return Busy
	}
	g.waiting[c]++
	return Queue
}

// Force holds cost without any check (shadow mode tracks real in-flight
// cost this way while admitting everything).
func (g *Gate) Force(c Class, cost, now int64) {
	g.mu.Lock()
	g.take(c, cost, now)
	g.mu.Unlock()
}

// GrantResult is the answer to a grant for queued work.
type GrantResult uint8

// Grant results.
const (
	Granted GrantResult = iota
	// NoRoom: the cost does not fit under the limit itself.
	NoRoom
	// Reserved: the cost fits under the limit, but not beside what is kept
	// for the other class's floor or for other lanes' recent demand.
	Reserved
	// TooBig: the cost exceeds the (possibly lowered) limit and the system
	// is not idle enough for solo progress; the waiter should be rejected.
	TooBig
)

// Grant holds cost for a waiter of class c that the scheduler picked. The
// waiter's own registration does not block it; the class floors do.
func (g *Gate) Grant(c Class, cost, now int64) GrantResult { return g.GrantReserving(c, cost, now, 0) }

// GrantReserving is Grant that also leaves extra free: the room other lanes
// of the class recently used and may need again at once.
func (g *Gate) GrantReserving(c Class, cost, now, extra int64) GrantResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return NoRoom
	}
	if cost > g.limit {
		if g.solo && cost <= g.maxLimit && g.active[Interactive]+g.active[Batch] == 0 {
			g.take(c, cost, now)
			return Granted
		}
		return TooBig
	}
	if g.fits(c, cost+max(extra, 0), now) {
		g.take(c, cost, now)
		return Granted
	}
	if g.active[Interactive]+g.active[Batch]+cost <= g.limit {
		return Reserved
	}
	return NoRoom
}

// Release returns a held cost.
func (g *Gate) Release(c Class, cost int64) {
	g.mu.Lock()
	g.active[c] -= cost
	g.count[c]--
	g.mu.Unlock()
}

// Unwait resolves one waiter of class c (admitted, rejected or gone).
func (g *Gate) Unwait(c Class) {
	g.mu.Lock()
	g.waiting[c]--
	g.mu.Unlock()
}

// Probe is the per-target check of a fan-out: with lanes, the target's cost
// must fit now for class c with nothing of the class waiting (the same
// rule as Acquire, never registering and never holding the cost: a capacity
// gate, not a lease); and the target, if capped, must have a free slot,
// which is then held. Both levels are checked under one lock. target < 0
// means no target slot.
func (g *Gate) Probe(c Class, cost, now int64, target int, lanes bool) ProbeResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if lanes && (g.closed || cost > g.limit || g.waiting[c] > 0 || !g.fits(c, cost, now)) {
		return ProbeLanes
	}
	if target >= 0 && target < len(g.tCap) && g.tCap[target] > 0 {
		if g.tActive[target] >= g.tCap[target] {
			return ProbeTarget
		}
		g.tActive[target]++
	}
	return ProbeOK
}

// ReleaseTarget returns a target slot taken by Probe.
func (g *Gate) ReleaseTarget(target int) {
	if target < 0 || target >= len(g.tCap) || g.tCap[target] == 0 {
		return
	}
	g.mu.Lock()
	g.tActive[target]--
	g.mu.Unlock()
}

// TargetInflight returns how many slots of target are held.
func (g *Gate) TargetInflight(target int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if target < 0 || target >= len(g.tActive) {
		return 0
	}
	return int(g.tActive[target])
}

// Stats returns the counters.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GateStats{Limit: g.limit, Floor: g.floor, Active: g.active, Count: g.count, Waiting: g.waiting, Closed: g.closed}
}

// TakePeak returns the largest total in-flight cost since the last call
// and restarts the tracking from the current total.
func (g *Gate) TakePeak() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.peak
	g.peak = g.active[Interactive] + g.active[Batch]
	return p
}
