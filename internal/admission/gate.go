package admission

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/internal/enum"
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
	// GlobalFull: the process-wide bound on in-flight cost is reached.
	GlobalFull
	// Closed: the gate is shut down.
	Closed
)

var verdictNames = [...]string{"admitted", "queue", "busy", "global_full", "closed"}

func (v Verdict) String() string { return enum.Name(verdictNames[:], v, "unknown") }

// GateStats is a consistent view of the gate's counters.
type GateStats struct {
	Limit   int64
	Cap     int64
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

// Global is the process-wide safety bound on in-flight cost, shared by
// every upstream's gate: a net for the gateway's own resources, not a
// capacity estimate (each upstream's controller does that).
type Global struct {
	max    int64
	active atomic.Int64
}

// NewGlobal returns a bound of max cost units (≤ 0: none).
func NewGlobal(max int64) *Global { return &Global{max: max} }

func (g *Global) take(cost int64) bool {
	if g == nil || g.max <= 0 {
		return true
	}
	if g.active.Add(cost) > g.max {
		g.active.Add(-cost)
		return false
	}
	return true
}

func (g *Global) give(cost int64) {
	if g != nil && g.max > 0 {
		g.active.Add(-cost)
	}
}

// Active is the cost held under the bound.
func (g *Global) Active() int64 {
	if g == nil {
		return 0
	}
	return g.active.Load()
}

// Max is the bound (0: none).
func (g *Global) Max() int64 {
	if g == nil {
		return 0
	}
	return g.max
}

// Gate is one upstream's admission ledger: in-flight cost and lease
// count per class, waiters per class, the limit its controller publishes
// and the class floors derived from it, the upstream's own concurrency
// cap (max_concurrent), and the figures the controller measures the
// upstream by: in-flight cost integrated over time, the leases still
// waiting for their first byte, and how often demand found no room.
// Every decision is one locked check over all of them, so no decision
// ever sees a limit from one moment and a count from another.
//
// Class floors: a class may use the limit minus what the other class
// reserves. A class with waiters reserves its whole floor: when
// interactive demand returns and cannot be met, batch admissions stop
// until interactive has its floor; nothing already admitted is preempted.
// A class without waiters that was active in the last ClassIdle reserves,
// within its floor, the most it held recently (its demand), and lends the
// rest. A class idle for longer reserves only what it holds.
type Gate struct {
	mu       sync.Mutex
	limit    int64
	shares   [NumClasses]int64
	floor    [NumClasses]int64
	horizon  int64
	closed   bool
	active   [NumClasses]int64
	count    [NumClasses]int64
	waiting  [NumClasses]int64
	seen     [NumClasses]int64
	everSeen [NumClasses]bool
	rpeak    [NumClasses]int64 // recent peak in-flight cost by class
	rpeakAt  [NumClasses]int64
	cap      int64 // concurrency cap (0 = none)
	global   *Global

	origin     int64   // ns; times below are relative to it
	lastChange int64   // ns since origin of the last change of active cost
	integral   float64 // in-flight cost × seconds
	pending    int64
	pendingSum float64 // Σ admission times of pending leases, s since origin
	limited    uint64
}

// NewGate returns an open gate at limit. capCount is the upstream's
// concurrency cap (0 = none); global the process-wide bound (may be nil);
// origin the time measurement starts from.
func NewGate(limit int64, shares [NumClasses]int64, classIdle time.Duration, capCount int, global *Global, origin time.Time) *Gate {
	g := &Gate{shares: shares, horizon: int64(classIdle), cap: int64(capCount), global: global, origin: origin.UnixNano()}
	g.setLimit(limit)
	return g
}

func (g *Gate) setLimit(limit int64) {
	g.limit = limit
	for c := range g.floor {
		g.floor[c] = limit * g.shares[c] / 100
	}
}

// SetLimit publishes a new limit.
func (g *Gate) SetLimit(limit int64) {
	g.mu.Lock()
	g.setLimit(limit)
	g.mu.Unlock()
}

// SetCap changes the concurrency cap (0 = none). Leases already held
// above a lowered cap finish; new ones wait until the count is under it.
func (g *Gate) SetCap(capCount int) {
	g.mu.Lock()
	g.cap = int64(capCount)
	g.mu.Unlock()
}

// Limit returns the published limit.
func (g *Gate) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// BigShare is the largest share of the limit one request is charged: a
// request priced above it (a long context) holds that much, so it is
// admitted once that much is free, in its fair turn, instead of waiting
// for an idle upstream that a steady stream of small requests never
// leaves.
const BigShare = 4

// Charge is what a request of the given cost holds under the current
// limit: its cost, but no more than a quarter of the limit, and at least 1.
func (g *Gate) Charge(cost int64) int64 {
	g.mu.Lock()
	limit := g.limit
	g.mu.Unlock()
	return ChargeFor(cost, limit)
}

// ChargeFor is Charge against a given limit.
func ChargeFor(cost, limit int64) int64 {
	return max(1, min(cost, max(1, limit/BigShare)))
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

// room reports whether cost more of class c stays within the limit and
// the cap, leaving the other class its reserve (plus extra). atLimit
// tells whether the limit (or the cap) itself is what refuses, as opposed
// to the other class's reserve.
func (g *Gate) room(c Class, cost, extra, now int64) (fits, atLimit bool) {
	total := g.active[Interactive] + g.active[Batch]
	if total+cost > g.limit || (g.cap > 0 && g.count[Interactive]+g.count[Batch] >= g.cap) {
		return false, true
	}
	return g.active[c]+cost+g.reserve(1-c, now)+max(extra, 0) <= g.limit, false
}

func (g *Gate) advance(now int64) {
	t := now - g.origin
	if dt := t - g.lastChange; dt > 0 {
		g.integral += float64(g.active[Interactive]+g.active[Batch]) * float64(dt) / 1e9
		g.lastChange = t
	}
}

func (g *Gate) take(c Class, cost, now int64) {
	g.advance(now)
	g.active[c] += cost
	g.count[c]++
	g.pending++
	g.pendingSum += float64(now-g.origin) / 1e9
	if g.active[c] >= g.recentPeak(c, now) {
		g.rpeak[c], g.rpeakAt[c] = g.active[c], now
	}
}

// Acquire is the fast path of a new request of class c at now (Unix
// nanoseconds, the gate's clock). It admits when the cost fits and
// nothing of the class is waiting (queued work is never bypassed).
// Otherwise, with register, the caller becomes a waiter (Queue); without,
// Busy. cost is what the lease holds (see Charge).
func (g *Gate) Acquire(c Class, cost, now int64, register bool) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return Closed
	}
	g.seen[c], g.everSeen[c] = now, true
	if g.waiting[c] == 0 {
		fits, atLimit := g.room(c, cost, 0, now)
		if fits {
			if !g.global.take(cost) {
				return GlobalFull
			}
			g.take(c, cost, now)
			return Admitted
		}
		if atLimit {
			g.limited++
		}
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

// NoteLimited counts demand that found no room under the limit outside
// Acquire (shadow mode's would-be queue).
func (g *Gate) NoteLimited() {
	g.mu.Lock()
	g.limited++
	g.mu.Unlock()
}

// GrantResult is the answer to a grant for queued work.
type GrantResult uint8

// Grant results.
const (
	Granted GrantResult = iota
	// NoRoom: the cost does not fit under the limit (or the cap) itself.
	NoRoom
	// Reserved: the cost fits under the limit, but not beside what is kept
	// for the other class's floor or for other lanes' recent demand.
	Reserved
	// Full: the process-wide bound is reached.
	Full
)

// Grant holds cost for a waiter of class c that the scheduler picked,
// leaving extra free as well: the room other lanes of the class recently
// used and may need again at once. The waiter's own registration does not
// block it; the class floors do.
func (g *Gate) Grant(c Class, cost, now, extra int64) GrantResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return NoRoom
	}
	fits, atLimit := g.room(c, cost, extra, now)
	switch {
	case fits:
		if !g.global.take(cost) {
			return Full
		}
		g.take(c, cost, now)
		return Granted
	case atLimit:
		g.limited++
		return NoRoom
	}
	return Reserved
}

// Release returns a held cost at now. pending says the lease never saw
// its first byte; admittedAt is when it was admitted (Unix ns).
func (g *Gate) Release(c Class, cost, now int64, pending bool, admittedAt int64) {
	g.mu.Lock()
	g.advance(now)
	g.active[c] -= cost
	g.count[c]--
	if pending {
		g.unpend(admittedAt)
	}
	g.mu.Unlock()
	g.global.give(cost)
}

// FirstByte moves a lease admitted at admittedAt out of the pending ones:
// its answer has begun.
func (g *Gate) FirstByte(admittedAt int64) {
	g.mu.Lock()
	g.unpend(admittedAt)
	g.mu.Unlock()
}

func (g *Gate) unpend(admittedAt int64) {
	g.pending--
	g.pendingSum -= float64(admittedAt-g.origin) / 1e9
	if g.pending == 0 {
		g.pendingSum = 0 // no drift from rounding
	}
}

// Unwait resolves one waiter of class c (admitted, rejected or gone).
func (g *Gate) Unwait(c Class) {
	g.mu.Lock()
	g.waiting[c]--
	g.mu.Unlock()
}

// Reading returns the gate's cumulative figures at now for the
// controller.
func (g *Gate) Reading(now time.Time) Reading {
	ns := now.UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(ns)
	r := Reading{At: now, Active: g.active[Interactive] + g.active[Batch], Integral: g.integral, Pending: g.pending, Limited: g.limited}
	if g.pending > 0 {
		r.PendingAgeSum = max(0, float64(g.pending)*float64(ns-g.origin)/1e9-g.pendingSum)
	}
	return r
}

// Stats returns the counters.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GateStats{Limit: g.limit, Cap: g.cap, Floor: g.floor, Active: g.active, Count: g.count, Waiting: g.waiting, Closed: g.closed}
}
