package credit

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/tenantlimit"
)

// TestPeriodWindows: every period's windows tile time: a window holds
// the instants from its predecessor's end up to its own end, indexes only
// grow, and day and month windows are the node-local limiter's, so the
// cluster's budget and each node's reset at the same instant.
func TestPeriodWindows(t *testing.T) {
	at := []time.Time{
		time.Date(2026, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), // a leap day
		time.Date(2026, 3, 1, 12, 0, 20, 0, time.FixedZone("UTC+14", 14*3600)),
		time.Unix(0, 0),
	}
	for _, per := range []Period{PerMinute, PerDay, PerMonth} {
		for _, tm := range at {
			idx := per.Index(tm)
			end := per.End(idx)
			if !end.After(tm) {
				t.Fatalf("%s: window %d of %v ends at %v, not after it", per, idx, tm, end)
			}
			if per.Index(end) != idx+1 || per.Index(end.Add(-time.Nanosecond)) != idx {
				t.Fatalf("%s: window %d ends at %v, but %v is in window %d and the instant before in %d", per, idx, end, end, per.Index(end), per.Index(end.Add(-time.Nanosecond)))
			}
			if idx > 0 && per.End(idx-1).After(tm) {
				t.Fatalf("%s: the window before %d ends after %v", per, idx, tm)
			}
			switch per {
			case PerDay:
				if int64(idx) != tenantlimit.DayIndex(tm) || !end.Equal(tenantlimit.DayEnd(tenantlimit.DayIndex(tm))) {
					t.Fatalf("day window of %v is %d ending %v; the limiter's is %d", tm, idx, end, tenantlimit.DayIndex(tm))
				}
			case PerMonth:
				if int64(idx) != tenantlimit.MonthIndex(tm) || !end.Equal(tenantlimit.MonthEnd(tenantlimit.MonthIndex(tm))) {
					t.Fatalf("month window of %v is %d ending %v; the limiter's is %d", tm, idx, end, tenantlimit.MonthIndex(tm))
				}
			}
		}
	}
}

// TestSpendBudgetUnits: a spend budget counts micro-dollars, rounding a
// request's cost up, and the largest budget the policy allows still
// leaves a pool room for many chunks.
func TestSpendBudgetUnits(t *testing.T) {
	p := spend(0, uniq("test/spend"), 5_000_000_000, PerDay, SpendUnit) // $5 a day
	if p.Limit() != 5_000_000 {
		t.Fatalf("a $5 budget is %d units, want 5,000,000 micro-dollars", p.Limit())
	}
	for _, c := range []struct{ nano, units int64 }{{0, 0}, {-5, 0}, {1, 1}, {1000, 1}, {1001, 2}, {2_500_000, 2500}} {
		if got := p.Units(c.nano); got != c.units {
			t.Fatalf("%d nano-dollars are %d units, want %d", c.nano, got, c.units)
		}
	}
	huge := spend(0, uniq("test/spend-huge"), 1e18, PerMonth, SpendUnit) // the policy's $1e9
	if huge.Chunk() > availMask/8 {
		t.Fatalf("a $1e9 budget's chunk is %d units, more than a pool's word holds eight times", huge.Chunk())
	}
	waitFor(t, "a chunk of the $1e9 budget", func() bool {
		_, ok, _ := huge.Take(clk.Now(), huge.Chunk()/2)
		return ok
	})
}

// TestSpentPoolAsksAgain: a node told that a day's budget is spent asks
// the grain again (at most once per dryRetry while it refuses requests),
// so credit another node gives back reaches it within the day rather
// than being lost to it until midnight.
func TestSpentPoolAsksAgain(t *testing.T) {
	const limit = 3200 // chunk 100
	key := uniq("test/spend-back")
	a := spend(0, key, limit, PerDay, 1)
	var took int64
	waitFor(t, "node 0 to spend the whole day's budget", func() bool {
		if _, ok, _ := a.Take(clk.Now(), 50); ok {
			took += 50
		}
		return took == limit
	})
	b := spend(1, key, limit, PerDay, 1)
	b.WaitFirst(30 * time.Second)
	dayEnd := PerDay.End(PerDay.Index(clk.Now()))
	if _, ok, retry := b.Take(clk.Now(), 10); ok || !retry.Equal(dayEnd) || !b.Spent(clk.Now()) {
		t.Fatalf("node 1 took credit of a spent budget (ok %v, retry %v, spent %v)", ok, retry, b.Spent(clk.Now()))
	}
	// Node 0's requests used less than they took: it gives 1000 back to
	// its pool, and its renewal tick returns what is idle beyond a chunk.
	a.Give(PerDay.Index(clk.Now()), 1000)
	waitFor(t, "node 0 to return its idle credit", func() bool { return a.returned.Load() > 0 })
	clk.Advance(dryRetry + time.Millisecond)
	waitFor(t, "node 1 to get the returned credit", func() bool {
		_, ok, _ := b.Take(clk.Now(), 10)
		return ok
	})
	if b.Spent(clk.Now()) {
		t.Fatal("node 1 still reports the budget spent after it was granted credit")
	}
}

// spend is member i's pool of a calendar budget of limit (in the caller's
// amounts, unit each) per window of per.
func spend(i int, key string, limit int64, per Period, unit int64) *Pool {
	setBudget(key, Budget{Limit: limit / unit, Period: per})
	return members[i].leases.Budget(key, limit, per, unit)
}
