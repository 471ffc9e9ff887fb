package credit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/internal/tenantlimit"
)

// Window is the width of a PerMinute calendar window: one minute,
// epoch-aligned. Rate limits are rolling budgets (Leases.Rolling), not
// calendar minutes; PerMinute remains for tests of the calendar grain.
const Window = time.Minute

// WindowIndex is the epoch-aligned index of the minute window holding t.
func WindowIndex(t time.Time) uint64 { return uint64(t.UnixNano() / int64(Window)) }

// Period is what a window budget's windows are: epoch-aligned minutes
// (rates), or UTC calendar days and months (spend budgets, the same
// days and months as the node-local limiter, internal/tenantlimit, so
// both reset at the same instant).
type Period uint8

// The periods.
const (
	PerMinute Period = iota
	PerDay
	PerMonth
)

// Index is the index of the window holding t. Indexes only grow with
// time, which is all the grain relies on.
func (p Period) Index(t time.Time) uint64 {
	switch p {
	case PerDay:
		return uint64(max(tenantlimit.DayIndex(t), 0))
	case PerMonth:
		return uint64(max(tenantlimit.MonthIndex(t), 0))
	}
	return WindowIndex(t)
}

// End is when window idx ends.
func (p Period) End(idx uint64) time.Time {
	switch p {
	case PerDay:
		return tenantlimit.DayEnd(int64(idx))
	case PerMonth:
		return tenantlimit.MonthEnd(int64(idx))
	}
	return time.Unix(0, int64(idx+1)*int64(Window))
}

// String names the period for the snapshot.
func (p Period) String() string {
	switch p {
	case PerDay:
		return "day"
	case PerMonth:
		return "month"
	}
	return "minute"
}

// refillWait is what a request refused for want of local credit (not
// because the budget is spent) is told to wait when the grain has not said
// when there is room (transport's take asks it first): about one refill
// round trip, so routing tries again instead of giving up until the
// window ends.
const refillWait = 100 * time.Millisecond

// A window credit word holds the window it belongs to (its index modulo
// 2^20, plus one, in the high 20 bits) and the credit left in it (low 44
// bits), so taking credit and noticing that the window has moved on are
// one compare-and-swap.
const (
	availBits = 44
	availMask = 1<<availBits - 1
	tagMod    = 1<<(64-availBits) - 1
)

func packWord(idx uint64, avail int64) uint64 {
	return (idx%tagMod+1)<<availBits | uint64(min(max(avail, 0), availMask))
}

func unpackWord(w uint64) (tag uint64, avail int64) { return w >> availBits, int64(w & availMask) }

func tagOf(idx uint64) uint64 { return idx%tagMod + 1 }

// Pool is this node's share of one shared budget: the credit its lease
// actor obtained from the budget's grain, spent by the request path with
// atomics and never a cross-node call. When the credit runs low the
// request that noticed kicks one asynchronous refill; if the grain cannot
// be reached the pool runs dry and refuses (fail closed), and a slot pool
// also refuses once its lease has expired.
type Pool struct {
	l     *Leases
	id    string // grain identity
	slots bool
	// rolling is set for a rolling budget (rate windows): its credit is
	// in leases that end CreditTTL after the call that brought them.
	rolling bool
	// per is a window budget's period.
	per Period
	// unit is what one unit of credit is worth (Budget; 1 otherwise).
	unit  atomic.Int64
	limit atomic.Int64
	chunk atomic.Int64

	// Window mode: the credit of two windows (the current one and the
	// next, prefetched near the end of the current), by index parity.
	win [2]atomic.Uint64
	// dry is the index+1 of a window the grain said was spent.
	dry atomic.Uint64
	// dryAt is when the call that found the window spent was sent (Unix
	// ns, the lease actor's clock).
	dryAt atomic.Int64

	// Slot mode: slots held and not in use (negative after the grain
	// took back slots that are still in use), and when the lease ends on
	// this node's clock (Unix ns).
	avail   atomic.Int64
	expires atomic.Int64

	// want is the largest request refused for want of window credit
	// since the last refill: a refill asks for at least that much, so a
	// request larger than a chunk is not refused for ever.
	want atomic.Int64
	// pending is set while a grain call for this pool is queued or in
	// flight: one at a time per pool.
	pending atomic.Bool
	// retry is a rolling call that failed without a refusal, to be sent
	// again as it was at the next tick (retryDue); only the lease actor
	// reads and writes them (a restarted actor takes them over with the
	// pool).
	retry    *result
	retryDue bool
	// held is the slots the grain last said this node holds; only the
	// lease actor writes it.
	held atomic.Int64
	// contended is the slots grain's last word on whether it refused
	// some node slots lately; wantSlot is set when a request was refused
	// a slot since the last acquire.
	contended, wantSlot atomic.Bool
	// granted and returned count window and rolling credit over the
	// pool's life, for the snapshot.
	granted, returned, refused atomic.Int64
	refills, renewals          atomic.Int64

	// answered is closed by the pool's first grain answer (or failed
	// call): until then an empty pool is cold, not spent, and a request
	// may wait for it (WaitFirst).
	answered   chan struct{}
	answerOnce sync.Once
	// sig is closed by each grain answer (and each refill the lease actor
	// declined) and replaced; answers counts the answers (Ask).
	sig     atomic.Pointer[chan struct{}]
	answers atomic.Int64

	rollingState
}

// rollingState is a rolling pool's credit (rolling.go).
type rollingState struct {
	lease [2]rollLease
	// gen counts the leases handed out (only the lease actor adds).
	gen atomic.Uint64
	// demand is set when a request took credit since the lease actor last
	// looked: credit is renewed and topped up only while it is used.
	demand atomic.Bool
	// dryUntil is when the amount last asked for fits the grain's windows
	// (this node's clock, Unix ns; 0: it was granted).
	dryUntil atomic.Int64
	// view is the grain's last word on its tightest window.
	view atomic.Pointer[rollView]
	mu   sync.Mutex // guards backs and stamps
	// backs are credit to give back to the grain, by grant stamp: what a
	// request did not use after its lease ended, what a lease held when
	// it ended. The next call carries them.
	backs map[int64]int64
	// stamps are recent leases' grant stamps, by generation.
	stamps [64]struct {
		gen uint64
		at  int64
	}
}

// markAnswered records an answer (the first one closes answered).
func (p *Pool) markAnswered() {
	p.answers.Add(1)
	p.answerOnce.Do(func() { close(p.answered) })
}

// WaitFirst waits, when the pool has had no answer from its grain yet,
// for the first one, at most max; it reports whether it waited and the
// answer came, so taking again may succeed. A pool that has been answered
// never waits: an empty answered pool is spent or unreachable, and
// refuses at once (fail closed). So only the first requests of a pool on
// a node (a tenant's first after start or after its limits changed) wait
// for a grain round trip.
func (p *Pool) WaitFirst(max time.Duration) bool {
	select {
	case <-p.answered:
		return false
	default:
	}
	p.kick()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-p.answered:
		return true
	case <-t.C:
		return false
	}
}

// Units converts an amount to the pool's units, rounding up: take and
// settle both convert, so rounding never lets a request spend more than
// it was charged.
func (p *Pool) Units(n int64) int64 {
	u := p.unit.Load()
	if u <= 1 || n <= 0 {
		return max(n, 0)
	}
	return (n + u - 1) / u
}

// Spent reports whether the grain said the window holding now has no
// credit left for anyone: a refusal is then the budget's, not a refill
// still on its way.
func (p *Pool) Spent(now time.Time) bool { return p.dry.Load() == p.per.Index(now)+1 }

// ID is the grain identity the pool leases from.
func (p *Pool) ID() string { return p.id }

// Limit is the cluster-wide limit.
func (p *Pool) Limit() int64 { return p.limit.Load() }

// Chunk is the credit one refill asks for.
func (p *Pool) Chunk() int64 { return p.chunk.Load() }

// available is the window credit of window idx.
func (p *Pool) available(idx uint64) int64 {
	tag, avail := unpackWord(p.win[idx%2].Load())
	if tag != tagOf(idx) {
		return 0
	}
	return avail
}

// Take spends n of the budget's credit at now. It reports a ticket (give
// unused credit back naming it) or, refused, when to try again: when the
// grain said the budget has room again (a calendar window's end, or when
// a rolling budget's windows have room for what was asked), else about
// one refill round trip.
func (p *Pool) Take(now time.Time, n int64) (idx uint64, ok bool, retryAt time.Time) {
	n = max(n, 0)
	if idx, ok = p.TryTake(now, n); ok {
		return idx, true, time.Time{}
	}
	p.refused.Add(1)
	if p.rolling {
		p.demand.Store(true)
	}
	for w := p.want.Load(); n > w && !p.want.CompareAndSwap(w, n); w = p.want.Load() {
	}
	p.kick()
	return idx, false, p.RetryAt(now)
}

// TryTake is Take without a refusal's bookkeeping (no count, no kick):
// for taking again after waiting for a refill.
func (p *Pool) TryTake(now time.Time, n int64) (uint64, bool) {
	if p.rolling {
		return p.tryTakeRolling(now.UnixNano(), max(n, 0))
	}
	idx := p.per.Index(now)
	n = max(n, 0)
	w := &p.win[idx%2]
	for {
		old := w.Load()
		tag, avail := unpackWord(old)
		if tag != tagOf(idx) {
			avail = 0
		}
		if avail < n {
			return idx, false
		}
		if w.CompareAndSwap(old, packWord(idx, avail-n)) {
			if avail-n < p.chunk.Load()/2+1 {
				p.kick()
			}
			return idx, true
		}
	}
}

// Give returns n of the credit Take gave under ticket idx (a request used
// less than it took, or none). A calendar window's credit is gone once
// the window has ended; a rolling lease's goes back to the grain.
func (p *Pool) Give(idx uint64, n int64) {
	switch {
	case n <= 0:
	case p.rolling:
		p.giveRolling(idx, n)
	default:
		p.adjust(idx, n)
	}
}

// Charge takes up to n more credit without refusing (a request that used
// more than it took); what the pool does not have is spent beyond the
// lease, the overrun docs/cluster.md bounds.
func (p *Pool) Charge(idx uint64, n int64) {
	switch {
	case n <= 0:
	case p.rolling:
		p.chargeRolling(n)
	case p.adjust(idx, -n) < p.chunk.Load()/2+1:
		p.kick()
	}
}

// adjust adds delta to window idx's credit (never below zero) and returns
// the credit left; nothing changes once the window has ended.
func (p *Pool) adjust(idx uint64, delta int64) int64 {
	w := &p.win[idx%2]
	for {
		old := w.Load()
		tag, avail := unpackWord(old)
		if tag != tagOf(idx) {
			return 0
		}
		next := max(avail+delta, 0)
		if w.CompareAndSwap(old, packWord(idx, next)) {
			return next
		}
	}
}

// addWindow adds credit the grain granted for window idx (the lease
// actor's side).
func (p *Pool) addWindow(idx uint64, n int64) {
	w := &p.win[idx%2]
	for {
		old := w.Load()
		tag, avail := unpackWord(old)
		if tag != tagOf(idx) {
			if tag != 0 && ahead(tag, tagOf(idx)) {
				return // a later window already lives here (0: never used)
			}
			avail = 0
		}
		if w.CompareAndSwap(old, packWord(idx, avail+n)) {
			return
		}
	}
}

// takeExcess removes everything above keep from window idx's credit and
// returns what it removed (to give back to the grain).
func (p *Pool) takeExcess(idx uint64, keep int64) int64 {
	w := &p.win[idx%2]
	for {
		old := w.Load()
		tag, avail := unpackWord(old)
		if tag != tagOf(idx) || avail <= keep {
			return 0
		}
		if w.CompareAndSwap(old, packWord(idx, keep)) {
			return avail - keep
		}
	}
}

func ahead(a, b uint64) bool {
	d := (a + tagMod - b) % tagMod
	return d != 0 && d < tagMod/2
}

// TakeSlot takes one concurrency slot at now; it refuses when this node
// holds no free slot or its lease has expired (the grain may have given
// its slots to others).
func (p *Pool) TakeSlot(now time.Time) bool {
	if now.UnixNano() >= p.expires.Load() {
		p.refused.Add(1)
		p.kick()
		return false
	}
	for {
		a := p.avail.Load()
		if a <= 0 {
			p.refused.Add(1)
			p.wantSlot.Store(true)
			p.kick()
			return false
		}
		if p.avail.CompareAndSwap(a, a-1) {
			if a-1 < p.chunk.Load() {
				p.kick()
			}
			return true
		}
	}
}

// GiveSlot returns a slot taken by TakeSlot.
func (p *Pool) GiveSlot() { p.avail.Add(1) }

// kick asks the lease actor to refill, once until it has answered.
func (p *Pool) kick() {
	if p.pending.CompareAndSwap(false, true) {
		p.l.root.Send(p.l.pid, &refill{p: p})
	}
}
