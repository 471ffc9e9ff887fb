// Package tenantlimit holds the pure part of the per-tenant limiter: one
// tenant's counters (requests and tokens per minute, requests in flight,
// spend per UTC day and month) and the one-step reservation of all of them.
//
// # One step or none
//
// A request's counters are reserved together or not at all. Reserving them
// one by one (LiteLLM's way) lets a request hold the concurrency slot while
// it is refused for tokens, so a neighbour is refused for a slot nobody
// ends up using (a false 429), and lets two requests each pass one check
// before either charges it (slipping past a budget). Here a tenant's
// counters are a small immutable record in one of a few slots; a writer
// reads the current record, computes the next one, writes it into a free
// slot it has claimed and publishes it with one compare-and-swap on the
// tenant's current-slot word. Either the whole new record becomes current
// or nothing changed and the writer retries on fresh numbers.
//
// The fast path takes no lock and sends no message: a writer that is
// descheduled mid-update holds only a slot that is not current, so other
// writers carry on with the other slots. Readers (headers, snapshots) copy a
// record and check the current-slot word did not move.
package tenantlimit

import (
	"runtime"
	"sync/atomic"
	"time"
)

// counters is the record committed as one unit.
type counters struct {
	reqTAT   int64 // requests: GCRA theoretical arrival time, Unix ns
	tokTAT   int64 // tokens: same
	inflight int64
	day      int64 // UTC day index of daySpent/dayHeld
	daySpent int64 // nano-dollars settled in the day
	dayHeld  int64 // nano-dollars reserved by requests in flight
	month    int64 // UTC month index (year*12 + month-1)
	monSpent int64
	monHeld  int64
}

const nFields = 9

// nSlots is how many records a tenant has. One is current; a writer
// claims another. Four leave room for three writers descheduled at once
// before a fourth has to yield.
const nSlots = 4

type slot struct {
	claimed atomic.Uint32
	v       [nFields]atomic.Int64
}

// State is one tenant's counters and statistics. The zero value is an
// empty state (every bucket full, nothing spent). It must not be copied.
type State struct {
	// cur is version<<8 | slot index. The version only grows, so a
	// compare-and-swap on cur cannot succeed against a record that was
	// replaced and later reused (no ABA).
	cur   atomic.Uint64
	slots [nSlots]slot

	// Statistics, updated on the request path with single atomic adds.
	admitted      atomic.Uint64
	refused       [NumKinds]atomic.Uint64
	settled       atomic.Uint64
	settledTokens atomic.Int64
	settledCost   atomic.Int64
}

func (s *slot) load(c *counters) {
	c.reqTAT = s.v[0].Load()
	c.tokTAT = s.v[1].Load()
	c.inflight = s.v[2].Load()
	c.day = s.v[3].Load()
	c.daySpent = s.v[4].Load()
	c.dayHeld = s.v[5].Load()
	c.month = s.v[6].Load()
	c.monSpent = s.v[7].Load()
	c.monHeld = s.v[8].Load()
}

func (s *slot) store(c *counters) {
	s.v[0].Store(c.reqTAT)
	s.v[1].Store(c.tokTAT)
	s.v[2].Store(c.inflight)
	s.v[3].Store(c.day)
	s.v[4].Store(c.daySpent)
	s.v[5].Store(c.dayHeld)
	s.v[6].Store(c.month)
	s.v[7].Store(c.monSpent)
	s.v[8].Store(c.monHeld)
}

// read returns the current word and a copy of its record. The copy is
// consistent only if cur still equals the word afterwards (see stable).
func (st *State) read(c *counters) uint64 {
	w := st.cur.Load()
	st.slots[w&0xff].load(c)
	return w
}

// stable reports whether the record read under w was current throughout:
// a slot is only rewritten after cur has moved away from it, and cur never
// returns to an old word.
func (st *State) stable(w uint64) bool { return st.cur.Load() == w }

// snapshot reads a consistent copy of the current record.
func (st *State) snapshot(c *counters) {
	for {
		if st.stable(st.read(c)) {
			return
		}
	}
}

// commit publishes next as the successor of the record read under w. It
// reports false when another writer committed first; the caller retries.
func (st *State) commit(w uint64, next *counters) bool {
	cur := int(w & 0xff)
	for {
		for k := 1; k < nSlots; k++ {
			j := (cur + k) % nSlots
			s := &st.slots[j]
			if !s.claimed.CompareAndSwap(0, 1) {
				continue
			}
			// The slot may have become current since w was read (by a
			// writer that has since released it); never write over the
			// current record.
			if st.cur.Load()&0xff == uint64(j) {
				s.claimed.Store(0)
				continue
			}
			s.store(next)
			ok := st.cur.CompareAndSwap(w, (w>>8+1)<<8|uint64(j))
			s.claimed.Store(0)
			return ok
		}
		if !st.stable(w) {
			return false
		}
		// Every other slot is claimed by a writer that is not running
		// right now; let one of them finish.
		runtime.Gosched()
	}
}

// seed sets the spend already settled today and this month (read from the
// request log at start-up) on a state nobody else uses yet.
func (st *State) seed(now time.Time, daySpent, monthSpent int64) {
	var c counters
	for {
		w := st.read(&c)
		c.day, c.month = DayIndex(now), MonthIndex(now)
		c.daySpent, c.monSpent = max(daySpent, 0), max(monthSpent, 0)
		if st.commit(w, &c) {
			return
		}
	}
}

// addSpent adds spend settled before the state was in use (read from the
// request log at at) to a state that may already be counting: it is added
// to the day and month of at; a period the counters have already moved
// past is left alone (the read's figure is for a period that is over).
func (st *State) addSpent(at time.Time, daySpent, monthSpent int64) {
	day, month := DayIndex(at), MonthIndex(at)
	var c counters
	for {
		w := st.read(&c)
		if c.day < day { // as Reserve: a new period starts empty
			c.day, c.daySpent, c.dayHeld = day, 0, 0
		}
		if c.day == day {
			c.daySpent += max(daySpent, 0)
		}
		if c.month < month {
			c.month, c.monSpent, c.monHeld = month, 0, 0
		}
		if c.month == month {
			c.monSpent += max(monthSpent, 0)
		}
		if st.commit(w, &c) {
			return
		}
	}
}

// DayIndex is the UTC calendar day holding t (days since the Unix epoch).
func DayIndex(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 86399) / 86400
	}
	return s / 86400
}

// MonthIndex is the UTC calendar month holding t (year*12 + month-1).
func MonthIndex(t time.Time) int64 {
	u := t.UTC()
	return int64(u.Year())*12 + int64(u.Month()) - 1
}

// DayEnd is when the UTC day idx ends (the next midnight).
func DayEnd(idx int64) time.Time { return time.Unix((idx+1)*86400, 0).UTC() }

// MonthEnd is when the UTC month idx ends (the first of the next month).
func MonthEnd(idx int64) time.Time {
	return time.Date(int(idx/12), time.Month(idx%12)+2, 1, 0, 0, 0, 0, time.UTC)
}
