// Package tenantlimit holds the pure part of the per-tenant limiter: one
// tenant's counters (requests and tokens in rolling windows of a minute,
// an hour and a day, requests in flight, spend per UTC day and month) and
// the one-step reservation of all of them.
//
// # One step or none
//
// A request's counters are reserved together or not at all. Reserving them
// one by one (LiteLLM's way) lets a request hold the concurrency slot while
// it is refused for tokens, so a neighbour is refused for a slot nobody
// ends up using (a false 429), and lets two requests each pass one check
// before either charges it (slipping past a budget). Here a tenant's
// counters sit behind one small lock: a request checks every limit and
// charges every counter while holding it, and a refused request leaves
// nothing behind. The critical section is a few dozen instructions (no
// allocation, no I/O, no message), so the lock is uncontended in practice;
// it replaced a lock-free record swap when the rate windows became rings
// of slots (internal/rolling) too large to copy on every request.
package tenantlimit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/internal/rolling"
)

// counters are a tenant's limits state, guarded by State.mu.
type counters struct {
	rates    rolling.Windows
	inflight int64
	day      int64 // UTC day index of daySpent/dayHeld
	daySpent int64 // nano-dollars settled in the day
	dayHeld  int64 // nano-dollars reserved by requests in flight
	month    int64 // UTC month index (year*12 + month-1)
	monSpent int64
	monHeld  int64
}

// State is one tenant's counters and statistics. The zero value is an
// empty state (nothing used, nothing spent). It must not be copied.
type State struct {
	mu sync.Mutex
	c  counters

	// Statistics, updated with single atomic adds.
	admitted      atomic.Uint64
	refused       [NumKinds]atomic.Uint64
	settled       atomic.Uint64
	settledTokens atomic.Int64
	settledCost   atomic.Int64
}

// rates returns the rate windows with lim's limits in force (a changed
// policy takes effect here, keeping what the windows counted). mu is
// held.
func (c *counters) ratesFor(lim *Limits) *rolling.Windows {
	if c.rates.Limits() != lim.Rates {
		c.rates.Set(lim.Rates)
	}
	return &c.rates
}

// roll starts a new day or month empty. A caller whose clock still reads
// the previous period is charged to the counter's current one. mu is
// held.
func (c *counters) roll(now time.Time) {
	if day := DayIndex(now); c.day < day {
		c.day, c.daySpent, c.dayHeld = day, 0, 0
		if month := MonthIndex(now); c.month < month {
			c.month, c.monSpent, c.monHeld = month, 0, 0
		}
	}
}

// seed sets the spend already settled today and this month (read from the
// request log at start-up) on a state nobody else uses yet.
func (st *State) seed(now time.Time, daySpent, monthSpent int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.c.day, st.c.month = DayIndex(now), MonthIndex(now)
	st.c.daySpent, st.c.monSpent = max(daySpent, 0), max(monthSpent, 0)
}

// addSpent adds spend settled before the state was in use (read from the
// request log at at) to a state that may already be counting: it is added
// to the day and month of at; a period the counters have already moved
// past is left alone (the read's figure is for a period that is over).
// With raise, the figure replaces what the state counted when it is
// larger instead of being added to it (the figure already holds it).
func (st *State) addSpent(at time.Time, daySpent, monthSpent int64, raise bool) {
	day, month := DayIndex(at), MonthIndex(at)
	st.mu.Lock()
	defer st.mu.Unlock()
	c := &st.c
	if c.day < day { // as Reserve: a new period starts empty
		c.day, c.daySpent, c.dayHeld = day, 0, 0
	}
	if c.day == day {
		c.daySpent = combineSpent(c.daySpent, daySpent, raise)
	}
	if c.month < month {
		c.month, c.monSpent, c.monHeld = month, 0, 0
	}
	if c.month == month {
		c.monSpent = combineSpent(c.monSpent, monthSpent, raise)
	}
}

func combineSpent(counted, read int64, raise bool) int64 {
	read = max(read, 0)
	if raise {
		return max(counted, read)
	}
	return counted + read
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
