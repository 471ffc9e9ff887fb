// Package rolling counts rate limits the way providers count them: a
// limit of L per minute (hour, day) admits at most L in any window of that
// length, wherever the window starts, and refills continuously as what was
// used ages out. There is no boundary at which a fresh window opens, so
// there is no burst at a boundary: calendar windows let L through before
// a minute boundary and L more right after it, and a token bucket of
// capacity L refilling at L a minute lets up to 2L into one minute, and
// either draws the provider's 429s.
//
// # How it counts
//
// A window of width W is cut into SlotsPerWindow slots (a second for a
// minute, a minute for an hour, 24 minutes for a day) kept in a ring. A
// unit used at time t is counted in t's slot and stays counted until that
// slot is older than W plus one slot: a request fits when what the ring
// holds plus its cost is within the limit. Every interval of length W + one
// slot lies inside the span the ring counted when its last unit was
// admitted, so no such interval (and no shorter one) ever holds more than
// the limit. The extra slot is a margin for the trip to the provider: two
// requests a little more than W apart at the gateway cannot land in one of
// the provider's windows because the first one travelled slower. The cost
// is throughput: a steady stream gets the limit per W plus one and a half
// slots on average, 97.5 % of it.
//
// Refunds go back to the slot that was charged (a request that never
// reached a provider, or used fewer tokens than reserved), so the bound
// holds on what was really used; usage above a reservation is charged when
// it is known, to the slot of that moment. A request larger than a whole
// limit is admitted only when that window holds nothing, so it is sent
// once per window rather than never.
//
// A Retry-After is exact under the counting: the moment enough of the
// oldest slots have left the span for the request to fit in every window.
//
// Windows is not safe for concurrent use: its owner holds a lock around
// each call (internal/tenantlimit, actors/ledger) or owns it from one actor
// (actors/credit's grains). Checking and charging several windows as one
// step needs a consistent view of all of their rings, which one small
// critical section gives at the cost of an uncontended lock; a lock-free
// multi-word update would copy every ring on each request.
package rolling

import (
	"time"

	"github.com/omniroute/gateway/internal/enum"
)

// Dim is what a limit counts.
type Dim uint8

// The dimensions.
const (
	Requests Dim = iota
	Tokens
	NumDims
)

var dimNames = [NumDims]string{"requests", "tokens"}

func (d Dim) String() string { return enum.Name(dimNames[:], d, "unknown") }

// Period is a window's length.
type Period uint8

// The periods.
const (
	Minute Period = iota
	Hour
	Day
	NumPeriods
)

var periods = [NumPeriods]struct {
	name  string
	width time.Duration
}{{"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}}

func (p Period) String() string {
	if p < NumPeriods {
		return periods[p].name
	}
	return "unknown"
}

// Width is the window's length.
func (p Period) Width() time.Duration { return periods[p].width }

// Slot is the width of one slot of the period's ring (its resolution).
func (p Period) Slot() time.Duration { return periods[p].width / SlotsPerWindow }

// SlotsPerWindow is how many slots a window is cut into.
const SlotsPerWindow = 60

// Limits are the limits per dimension and period; 0 is none.
type Limits [NumDims][NumPeriods]int64

// Any reports whether some window is limited.
func (l *Limits) Any() bool { return l.Dim(Requests) || l.Dim(Tokens) }

// Dim reports whether some window of dimension d is limited.
func (l *Limits) Dim(d Dim) bool {
	for _, v := range l[d] {
		if v > 0 {
			return true
		}
	}
	return false
}

// Min is the smaller of two limits per window, 0 counting as none.
func (l Limits) Min(o Limits) Limits {
	for d := range l {
		for p := range l[d] {
			if a, b := l[d][p], o[d][p]; a == 0 || (b > 0 && b < a) {
				l[d][p] = b
			}
		}
	}
	return l
}

// Cost is what one request takes from each dimension.
type Cost [NumDims]int64

// ring counts one window. Slot k covers [k·slot, (k+1)·slot) ns since
// the epoch; the ring holds slots head-len(c)+1 … head.
type ring struct {
	slot  int64 // ns
	head  int64 // newest slot counted; -1: none yet
	total int64 // sum of c
	c     []int64
}

func newRing(p Period, extra time.Duration) *ring {
	slot := int64(p.Slot())
	n := SlotsPerWindow + 2 + int((int64(extra)+slot-1)/slot)
	return &ring{slot: slot, head: -1, c: make([]int64, n)}
}

func (r *ring) index(ns int64) int64 { return max(ns, 0) / r.slot }

// advance moves the ring to slot k, dropping what left the span.
func (r *ring) advance(k int64) {
	n := int64(len(r.c))
	switch {
	case k <= r.head:
		return
	case r.head < 0 || k-r.head >= n:
		clear(r.c)
		r.total = 0
	default:
		for j := r.head + 1; j <= k; j++ {
			r.total -= r.c[j%n]
			r.c[j%n] = 0
		}
	}
	r.head = k
}

// oldest is the oldest slot in the span.
func (r *ring) oldest() int64 { return r.head - int64(len(r.c)) + 1 }

// leaves is when slot j leaves the span (ns since the epoch).
func (r *ring) leaves(j int64) int64 { return (j + int64(len(r.c))) * r.slot }

// fits reports whether cost fits under limit now.
func (r *ring) fits(cost, limit int64) bool {
	return r.total+cost <= limit || (r.total == 0 && cost > limit)
}

// freeAt is when cost would fit under limit if nothing else were charged
// (ns since the epoch); ring must have been advanced to now.
func (r *ring) freeAt(cost, limit int64) int64 {
	need := r.total + cost - limit // units that must leave
	if cost > limit {
		need = r.total // an oversized request needs an empty window
	}
	n := int64(len(r.c))
	var freed int64
	for j := r.oldest(); j <= r.head; j++ {
		if freed += r.c[(j%n+n)%n]; freed >= need && need > 0 {
			return r.leaves(j)
		}
	}
	return r.leaves(r.head)
}

// emptyAt is when everything counted has left (0 when nothing is).
func (r *ring) emptyAt() int64 {
	if r.total == 0 {
		return 0
	}
	n := int64(len(r.c))
	for j := r.head; j >= r.oldest(); j-- {
		if r.c[(j%n+n)%n] != 0 {
			return r.leaves(j)
		}
	}
	return 0
}

// add charges n to slot k, or to the head when k is behind it.
func (r *ring) add(k, n int64) {
	r.advance(k)
	j := max(k, r.head)
	r.c[j%int64(len(r.c))] += n
	r.total += n
}

// refund takes up to n back from slot k if it is still in the span.
func (r *ring) refund(k, n int64) {
	if n <= 0 || k < r.oldest() || k > r.head {
		return
	}
	i := k % int64(len(r.c))
	n = min(n, r.c[i])
	r.c[i] -= n
	r.total -= n
}

// Windows is a set of rolling limits and what they have counted. The
// zero value limits nothing; Set gives it limits.
type Windows struct {
	lim Limits
	// extra holds every unit this much longer than its window (a credit
	// grain's lease time: credit granted now may be spent until then).
	extra time.Duration
	r     [NumDims][NumPeriods]*ring
}

// NewWindows returns windows with limits l that count each unit extra
// longer than its window.
func NewWindows(l Limits, extra time.Duration) *Windows {
	w := &Windows{extra: extra}
	w.Set(l)
	return w
}

// Set changes the limits. A window that stays limited keeps what it
// counted (what was used stays used, under the new limit); a window no
// longer limited forgets it; a new one starts empty.
func (w *Windows) Set(l Limits) {
	w.lim = l
	for d := range l {
		for p := range l[d] {
			switch {
			case l[d][p] <= 0:
				w.r[d][p] = nil
			case w.r[d][p] == nil:
				w.r[d][p] = newRing(Period(p), w.extra)
			}
		}
	}
}

// Limits are the limits in force.
func (w *Windows) Limits() Limits { return w.lim }

// Refusal names the window that refused a request and when the request
// would fit in every window.
type Refusal struct {
	Dim    Dim
	Period Period
	// RetryAt is when the request fits every window, if nothing else is
	// charged meanwhile (ns since the epoch).
	RetryAt int64
}

// Fits reports whether cost fits every window at now (ns since the
// epoch), without charging anything. When it does not, the refusal names
// the window that frees last and when all of them have room. A dimension
// the cost does not use cannot refuse it, even when a window of it is
// over its limit (usage above a reservation): charging nothing keeps
// every bound, and a request that costs no tokens (a token count) is
// not held back by the token windows.
func (w *Windows) Fits(now int64, cost Cost) (Refusal, bool) {
	var ref Refusal
	ok := true
	for d := range w.r {
		if cost[d] <= 0 {
			continue
		}
		for p, r := range w.r[d] {
			if r == nil {
				continue
			}
			r.advance(r.index(now))
			if lim := w.lim[d][p]; !r.fits(cost[d], lim) {
				if at := r.freeAt(cost[d], lim); ok || at > ref.RetryAt {
					ref = Refusal{Dim: Dim(d), Period: Period(p), RetryAt: at}
				}
				ok = false
			}
		}
	}
	return ref, ok
}

// Reservation is what Reserve charged; Settle it once.
type Reservation struct {
	at     int64
	cost   Cost
	active bool
}

// Active reports whether the reservation holds anything.
func (r *Reservation) Active() bool { return r.active }

// Cost is what the reservation charged.
func (r *Reservation) Cost() Cost { return r.cost }

// Reserve charges cost to every window at now if it fits all of them, in
// one step: on a refusal nothing is charged.
func (w *Windows) Reserve(now int64, cost Cost) (Reservation, Refusal, bool) {
	if ref, ok := w.Fits(now, cost); !ok {
		return Reservation{}, ref, false
	}
	w.Charge(now, cost)
	return Reservation{at: now, cost: cost, active: true}, Refusal{}, true
}

// Charge adds cost to every window at now without checking (usage above a
// reservation, credit a grain granted).
func (w *Windows) Charge(now int64, cost Cost) {
	for d := range w.r {
		if cost[d] == 0 {
			continue
		}
		for _, r := range w.r[d] {
			if r != nil {
				r.add(r.index(now), cost[d])
			}
		}
	}
}

// Refund gives back up to n units of dimension d charged at at (ns since
// the epoch): the slots that were charged hold less from now on. What
// has left a window's span is gone from it already.
func (w *Windows) Refund(now, at int64, d Dim, n int64) {
	if n <= 0 {
		return
	}
	for _, r := range w.r[d] {
		if r != nil {
			r.advance(r.index(now))
			r.refund(r.index(at), n)
		}
	}
}

// Settle replaces r's reservation of tokens by actual tokens; refund
// gives back the request and all its tokens (it never reached a
// provider). Tokens below the reservation go back to the slot charged,
// tokens above it are charged at now. It does nothing for an inactive
// reservation and clears r.
func (w *Windows) Settle(now int64, r *Reservation, actual int64, refund bool) {
	if !r.active {
		return
	}
	r.active = false
	if refund {
		w.Refund(now, r.at, Requests, r.cost[Requests])
		actual = 0
	}
	switch d := r.cost[Tokens] - max(actual, 0); {
	case d > 0:
		w.Refund(now, r.at, Tokens, d)
	case d < 0:
		var c Cost
		c[Tokens] = -d
		w.Charge(now, c)
	}
}

// Room is how much of dimension d fits every window at now (0 when one is
// full; -1 when d is not limited).
func (w *Windows) Room(now int64, d Dim) int64 {
	room := int64(-1)
	for p, r := range w.r[d] {
		if r == nil {
			continue
		}
		r.advance(r.index(now))
		if left := max(w.lim[d][p]-r.total, 0); room < 0 || left < room {
			room = left
		}
	}
	return room
}

// Bucket is one window as a caller sees it.
type Bucket struct {
	Period    Period
	Limit     int64
	Used      int64
	Remaining int64
	// Reset is how long until everything counted has left the window
	// (the bucket is full again).
	Reset time.Duration
}

// Bucket reads window (d, p) at now; ok is false when it is not limited.
func (w *Windows) Bucket(now int64, d Dim, p Period) (Bucket, bool) {
	r := w.r[d][p]
	if r == nil {
		return Bucket{}, false
	}
	r.advance(r.index(now))
	lim := w.lim[d][p]
	b := Bucket{Period: p, Limit: lim, Used: r.total, Remaining: max(lim-r.total, 0)}
	if at := r.emptyAt(); at > now {
		b.Reset = time.Duration(at - now)
	}
	return b, true
}

// Tightest is the window of dimension d with the least remaining (of two
// alike, the one that takes longer to refill): what rate-limit headers
// report. ok is false when d is not limited.
func (w *Windows) Tightest(now int64, d Dim) (b Bucket, ok bool) {
	for p := range NumPeriods {
		c, limited := w.Bucket(now, d, p)
		if !limited {
			continue
		}
		if !ok || c.Remaining < b.Remaining || (c.Remaining == b.Remaining && c.Reset > b.Reset) {
			b, ok = c, true
		}
	}
	return b, ok
}

// RingState is one window's counts, for a credit grain's durable record.
type RingState struct {
	Dim    Dim
	Period Period
	// Head is the newest slot; Counts are the slots Head-len+1 … Head.
	Head   int64
	Counts []int64
}

// State returns what every limited window holds.
func (w *Windows) State() []RingState {
	var out []RingState
	for d := range w.r {
		for p, r := range w.r[d] {
			if r == nil || r.head < 0 {
				continue
			}
			n := int64(len(r.c))
			s := RingState{Dim: Dim(d), Period: Period(p), Head: r.head, Counts: make([]int64, n)}
			for i := range n {
				j := r.oldest() + i
				s.Counts[i] = r.c[(j%n+n)%n]
			}
			out = append(out, s)
		}
	}
	return out
}

// Restore loads states State returned into the windows that are limited
// (a credit grain re-activated on another member); counts of windows not
// limited now, or older than a ring holds, are dropped.
func (w *Windows) Restore(states []RingState) {
	for _, s := range states {
		if s.Dim >= NumDims || s.Period >= NumPeriods {
			continue
		}
		r := w.r[s.Dim][s.Period]
		if r == nil || s.Head < 0 {
			continue
		}
		r.advance(s.Head)
		start := s.Head - int64(len(s.Counts)) + 1
		for i, c := range s.Counts {
			if j := start + int64(i); c > 0 && j >= r.oldest() && j <= r.head {
				r.c[j%int64(len(r.c))] += c
				r.total += c
			}
		}
	}
}
