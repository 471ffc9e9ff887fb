package admission

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var gateOrigin = time.Unix(0, 0)

func newTestGate(limit int64) *Gate {
	return NewGate(limit, [NumClasses]int64{75, 25}, time.Second, 0, nil, gateOrigin)
}

// rel releases a lease admitted at 0 that had its first byte.
func rel(g *Gate, c Class, cost int64) { g.Release(c, cost, 0, true, 0) }

// expect fails the test, naming the step (what), when the gate answered v
// instead of want.
func expect(t *testing.T, what string, v, want Verdict) {
	t.Helper()
	if v != want {
		t.Fatalf("%s: %v, want %v", what, v, want)
	}
}

func TestGateAdmitsUntilTheLimitThenQueuesWithoutBypass(t *testing.T) {
	g := newTestGate(10)
	for i := 0; i < 2; i++ {
		expect(t, fmt.Sprintf("acquire %d", i), g.Acquire(Interactive, 4, 0, true), Admitted)
	}
	expect(t, "over the limit", g.Acquire(Interactive, 4, 0, true), Queue)
	// A small request would fit (8+2 ≤ 10), but work is waiting: no bypass.
	expect(t, "bypassed queued work", g.Acquire(Interactive, 2, 0, true), Queue)
	expect(t, "unregistered", g.Acquire(Interactive, 2, 0, false), Busy)
	rel(g, Interactive, 4)
	if r := g.Grant(Interactive, 4, 0, 0); r != Granted {
		t.Fatalf("grant for the waiter: %v", r)
	}
	g.Unwait(Interactive)
	g.Unwait(Interactive)
	if st := g.Stats(); st.ActiveCost() != 8 || st.Waiting[Interactive] != 0 || st.ActiveCount() != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestGateClassFloorsBorrowingWithoutPreemption(t *testing.T) {
	sec := int64(time.Second)
	g := newTestGate(100) // floors: interactive 75, batch 25
	now := int64(0)
	// Interactive idle: batch borrows everything.
	for i := 0; i < 10; i++ {
		expect(t, fmt.Sprintf("batch %d", i), g.Acquire(Batch, 10, now, true), Admitted)
	}
	// Interactive returns: nothing is preempted, it queues.
	expect(t, "interactive with batch holding everything", g.Acquire(Interactive, 10, now, true), Queue)
	// As batch leases end, batch admissions stop until interactive has its floor.
	for i := 0; i < 7; i++ {
		rel(g, Batch, 10)
		expect(t, fmt.Sprintf("batch admitted while interactive waits below its floor (round %d)", i), g.Acquire(Batch, 10, now, false), Busy)
		if r := g.Grant(Interactive, 10, now, 0); r != Granted {
			t.Fatalf("interactive grant %d: %v", i, r)
		}
	}
	// Interactive 70, batch 20: now batch is below its own floor (25) and
	// keeps it, even though interactive still waits.
	rel(g, Batch, 10)
	if r := g.Grant(Interactive, 10, now, 0); r != Reserved {
		t.Fatalf("interactive took batch's floor: %v, want Reserved (room under the limit kept for batch)", r)
	}
	expect(t, "batch below its floor", g.Acquire(Batch, 5, now, true), Admitted)
	g.Unwait(Interactive)
	// Interactive goes idle: after the idle horizon batch may take it all.
	for i := 0; i < 7; i++ {
		rel(g, Interactive, 10)
	}
	expect(t, "interactive's floor released before its idle horizon", g.Acquire(Batch, 10, now+sec/2, false), Busy)
	later := now + 2*sec
	for i := 0; i < 7; i++ {
		if v := g.Acquire(Batch, 10, later, true); v != Admitted {
			t.Fatalf("batch after interactive went idle (%d): %v, stats %+v", i, v, g.Stats())
		}
	}
	if st := g.Stats(); st.ActiveCost() > 100 {
		t.Fatalf("over the limit: %+v", st)
	}
}

func TestGateCapAndGlobalBound(t *testing.T) {
	global := NewGlobal(10)
	g := NewGate(100, [NumClasses]int64{75, 25}, time.Second, 2, global, gateOrigin)
	other := NewGate(100, [NumClasses]int64{75, 25}, time.Second, 0, global, gateOrigin)
	for i := 0; i < 2; i++ {
		expect(t, "under the cap", g.Acquire(Interactive, 1, 0, false), Admitted)
	}
	// The cap of 2 refuses a third however much room the limit has.
	expect(t, "over the cap", g.Acquire(Interactive, 1, 0, false), Busy)
	// The global bound of 10 is shared: 2 held there, 8 fit here, not 9.
	expect(t, "within the global bound", other.Acquire(Interactive, 8, 0, false), Admitted)
	expect(t, "past the global bound", other.Acquire(Interactive, 1, 0, false), GlobalFull)
	rel(other, Interactive, 8)
	if global.Active() != 2 {
		t.Fatalf("global holds %d, want 2", global.Active())
	}
	rel(g, Interactive, 1)
	rel(g, Interactive, 1)
	if global.Active() != 0 || g.Stats().ActiveCount() != 0 {
		t.Fatalf("unbalanced: global %d, %+v", global.Active(), g.Stats())
	}
}

// TestGateReadingMeasuresTheUpstream: the in-flight integral, the leases
// still waiting for their first byte with their ages, and demand that
// found no room, which the controller judges the upstream by.
func TestGateReadingMeasuresTheUpstream(t *testing.T) {
	g := newTestGate(4)
	sec := int64(time.Second)
	g.Acquire(Interactive, 2, 0, false)
	g.Acquire(Interactive, 2, sec, false)
	expect(t, "at the limit", g.Acquire(Interactive, 1, sec, false), Busy)
	r := g.Reading(gateOrigin.Add(2 * time.Second))
	// 2 for 1 s, then 4 for 1 s: 6 cost-seconds; pending ages 2 s and 1 s.
	if r.Integral != 6 || r.Active != 4 || r.Pending != 2 || r.PendingAgeSum != 3 || r.Limited != 1 {
		t.Fatalf("reading %+v", r)
	}
	g.FirstByte(0)
	g.Release(Interactive, 2, 3*sec, true, sec)
	r = g.Reading(gateOrigin.Add(3 * time.Second))
	if r.Integral != 10 || r.Active != 2 || r.Pending != 0 || r.PendingAgeSum != 0 {
		t.Fatalf("after a first byte and a release: %+v", r)
	}
}

// TestGateNeverExceedsTheLimitUnderRace hammers acquire, grant and
// release from many goroutines and checks, from the outside, that the cost
// callers believe they hold never exceeds the limit and that the upstream
// never has more holders than its cap.
func TestGateNeverExceedsTheLimitUnderRace(t *testing.T) {
	const limit, capCount = 50, 6
	g := NewGate(limit, [NumClasses]int64{75, 25}, time.Second, capCount, NewGlobal(1000), gateOrigin)
	var held atomic.Int64
	var holders atomic.Int32
	var violations atomic.Int32
	var wg sync.WaitGroup
	var start = time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 3000; i++ {
				c := Class(rng.Intn(2))
				cost := int64(1 + rng.Intn(12))
				now := int64(time.Since(start))
				ok := false
				if rng.Intn(2) == 0 {
					ok = g.Acquire(c, cost, now, false) == Admitted
				} else {
					ok = g.Grant(c, cost, now, 0) == Granted
				}
				if ok {
					if held.Add(cost) > limit || holders.Add(1) > capCount {
						violations.Add(1)
					}
					held.Add(-cost)
					holders.Add(-1)
					g.Release(c, cost, int64(time.Since(start)), true, now)
				}
			}
		}(int64(w))
	}
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d times the held cost or the holders exceeded the limit or the cap", v)
	}
	if st := g.Stats(); st.ActiveCost() != 0 || st.ActiveCount() != 0 || g.Reading(time.Now()).Pending != 0 {
		t.Fatalf("unbalanced: %+v", st)
	}
}

func TestGateLendsWhatAnActiveClassDoesNotUse(t *testing.T) {
	ms := int64(time.Millisecond)
	g := newTestGate(100) // interactive floor 75
	// A steady interactive load of 20 in flight.
	for i := 0; i < 4; i++ {
		if v := g.Acquire(Interactive, 5, 0, true); v != Admitted {
			t.Fatal(v)
		}
	}
	// Batch may borrow the 55 of the floor interactive does not use: 80 in all.
	for i := 0; i < 16; i++ {
		if v := g.Acquire(Batch, 5, 10*ms, true); v != Admitted {
			t.Fatalf("batch %d: %v (stats %+v)", i, v, g.Stats())
		}
	}
	expect(t, "batch took interactive's recent demand", g.Acquire(Batch, 5, 10*ms, false), Busy)
	// Interactive leases end and start again (same demand): its room stays.
	rel(g, Interactive, 5)
	expect(t, "batch took room interactive used 10 ms ago", g.Acquire(Batch, 5, 20*ms, false), Busy)
	expect(t, "interactive within its recent demand", g.Acquire(Interactive, 5, 30*ms, true), Admitted)
	// Interactive demand grows beyond: it waits (no preemption), and batch
	// admissions stop until interactive has its floor.
	expect(t, "interactive above its recent demand with batch holding the rest", g.Acquire(Interactive, 5, 40*ms, true), Queue)
	rel(g, Batch, 5)
	expect(t, "batch admitted while interactive waits below its floor", g.Acquire(Batch, 5, 50*ms, false), Busy)
	if r := g.Grant(Interactive, 5, 50*ms, 0); r != Granted {
		t.Fatalf("interactive grant: %v", r)
	}
	g.Unwait(Interactive)
}

// TestGrantTellsTheLimitFromReservedRoom: a queued grant refused because
// the limit itself is full (NoRoom) is demand at the limit, which the
// controller may answer by growing; one refused only for room kept for
// other lanes (Reserved) is not: a higher limit would hand that queue the
// room past the provider's knee.
func TestGrantTellsTheLimitFromReservedRoom(t *testing.T) {
	g := newTestGate(100)
	now := time.Now().UnixNano()
	for i := 0; i < 8; i++ {
		expect(t, fmt.Sprintf("acquire %d", i), g.Acquire(Interactive, 10, now, false), Admitted)
	}
	if r := g.Grant(Interactive, 10, now, 15); r != Reserved {
		t.Fatalf("80 of 100 held, 15 kept for another lane: %v, want Reserved", r)
	}
	if r := g.Grant(Interactive, 25, now, 0); r != NoRoom {
		t.Fatalf("80 of 100 held, cost 25: %v, want NoRoom", r)
	}
	if r := g.Grant(Interactive, 10, now, 10); r != Granted {
		t.Fatalf("80 of 100 held, cost 10 beside 10 kept: %v, want Granted", r)
	}
}

// TestNamesOfUnknownValues: a value past a name table (a new constant
// without its name, a corrupt byte) is named, never a panic in a log line.
func TestNamesOfUnknownValues(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Admitted.String(), "admitted"}, {Closed.String(), "closed"}, {Verdict(200).String(), "unknown"},
		{phaseStartup.String(), "startup"}, {phaseDrain.String(), "drain"}, {phaseKind(200).String(), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("name %q, want %q", c.got, c.want)
		}
	}
}
