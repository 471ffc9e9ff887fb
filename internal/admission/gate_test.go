package admission

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestGate(limit int64, caps ...int) *Gate {
	return NewGate(limit, 1000, [NumClasses]int64{75, 25}, time.Second, caps)
}

func TestGateAdmitsUntilTheLimitThenQueuesWithoutBypass(t *testing.T) {
	g := newTestGate(10)
	for i := 0; i < 2; i++ {
		if v := g.Acquire(Interactive, 4, 0, true); v != Admitted {
			t.Fatalf("acquire %d: %v", i, v)
		}
	}
	if v := g.Acquire(Interactive, 4, 0, true); v != Queue {
		t.Fatalf("over the limit: %v, want queue", v)
	}
	// A small request would fit (8+2 ≤ 10), but work is waiting: no bypass.
	if v := g.Acquire(Interactive, 2, 0, true); v != Queue {
		t.Fatalf("bypassed queued work: %v", v)
	}
	if v := g.Acquire(Interactive, 2, 0, false); v != Busy {
		t.Fatalf("unregistered: %v", v)
	}
	g.Release(Interactive, 4)
	if r := g.Grant(Interactive, 4, 0); r != Granted {
		t.Fatalf("grant for the waiter: %v", r)
	}
	g.Unwait(Interactive)
	g.Unwait(Interactive)
	if st := g.Stats(); st.ActiveCost() != 8 || st.Waiting[Interactive] != 0 || st.ActiveCount() != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestGateSoloProgress(t *testing.T) {
	g := newTestGate(10)
	if v := g.Acquire(Interactive, 50, 0, true); v != Admitted {
		t.Fatalf("oversized on an idle system: %v, want solo progress", v)
	}
	if v := g.Acquire(Interactive, 50, 0, true); v != Oversized {
		t.Fatalf("second oversized while one runs: %v", v)
	}
	g.Release(Interactive, 50)
	g.SetLimit(10, false) // high pressure: no solo
	if v := g.Acquire(Interactive, 50, 0, true); v != Oversized {
		t.Fatalf("solo under pressure: %v", v)
	}
	g.SetLimit(10, true)
	if v := g.Acquire(Interactive, 5000, 0, true); v != Oversized {
		t.Fatalf("above maxLimit: %v", v)
	}
}

func TestGateClassFloorsBorrowingWithoutPreemption(t *testing.T) {
	sec := int64(time.Second)
	g := newTestGate(100) // floors: interactive 75, batch 25
	now := int64(0)
	// Interactive idle: batch borrows everything.
	for i := 0; i < 10; i++ {
		if v := g.Acquire(Batch, 10, now, true); v != Admitted {
			t.Fatalf("batch %d: %v", i, v)
		}
	}
	// Interactive returns: nothing is preempted, it queues.
	if v := g.Acquire(Interactive, 10, now, true); v != Queue {
		t.Fatalf("interactive with batch holding everything: %v", v)
	}
	// As batch leases end, batch admissions stop until interactive has its floor.
	for i := 0; i < 7; i++ {
		g.Release(Batch, 10)
		if v := g.Acquire(Batch, 10, now, false); v != Busy {
			t.Fatalf("batch admitted while interactive waits below its floor (round %d): %v", i, v)
		}
		if r := g.Grant(Interactive, 10, now); r != Granted {
			t.Fatalf("interactive grant %d: %v", i, r)
		}
	}
	// Interactive 70, batch 20: now batch is below its own floor (25) and
	// keeps it, even though interactive still waits.
	g.Release(Batch, 10)
	if r := g.Grant(Interactive, 10, now); r != Reserved {
		t.Fatalf("interactive took batch's floor: %v, want Reserved (room under the limit kept for batch)", r)
	}
	if v := g.Acquire(Batch, 5, now, true); v != Admitted {
		t.Fatalf("batch below its floor: %v", v)
	}
	g.Unwait(Interactive)
	// Interactive goes idle: after the idle horizon batch may take it all.
	for i := 0; i < 7; i++ {
		g.Release(Interactive, 10)
	}
	if v := g.Acquire(Batch, 10, now+sec/2, false); v != Busy {
		t.Fatalf("interactive's floor released before its idle horizon: %v", v)
	}
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

func TestGateProbeIsAtomicAcrossLanesAndTargetCap(t *testing.T) {
	g := newTestGate(10, 1, 0)
	if r := g.Probe(Interactive, 4, 0, 0, true); r != ProbeOK {
		t.Fatalf("probe: %v", r)
	}
	if st := g.Stats(); st.ActiveCost() != 0 {
		t.Fatalf("a probe must not hold lane capacity: %+v", st)
	}
	if r := g.Probe(Interactive, 4, 0, 0, true); r != ProbeTarget {
		t.Fatalf("capped target: %v", r)
	}
	if r := g.Probe(Interactive, 4, 0, 1, true); r != ProbeOK {
		t.Fatalf("uncapped target: %v", r)
	}
	g.ReleaseTarget(0)
	g.Acquire(Interactive, 8, 0, true)
	if r := g.Probe(Interactive, 4, 0, 0, true); r != ProbeLanes {
		t.Fatalf("no room: %v", r)
	}
	if g.TargetInflight(0) != 0 {
		t.Fatal("a refused probe took the target slot")
	}
	if r := g.Probe(Interactive, 4, 0, 0, false); r != ProbeOK {
		t.Fatalf("lanes off checks only the cap: %v", r)
	}
}

// TestGateNeverExceedsTheLimitUnderRace hammers acquire, grant, probe and
// release from many goroutines and checks, from the outside, that the cost
// callers believe they hold never exceeds the limit and that no target ever
// has more holders than its cap.
func TestGateNeverExceedsTheLimitUnderRace(t *testing.T) {
	const limit = 50
	g := newTestGate(limit, 3, 5)
	var held atomic.Int64
	var tHeld [2]atomic.Int32
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
				switch rng.Intn(3) {
				case 0:
					if g.Acquire(c, cost, now, false) == Admitted {
						if held.Add(cost) > limit {
							violations.Add(1)
						}
						held.Add(-cost)
						g.Release(c, cost)
					}
				case 1:
					if g.Grant(c, cost, now) == Granted {
						if held.Add(cost) > limit {
							violations.Add(1)
						}
						held.Add(-cost)
						g.Release(c, cost)
					}
				case 2:
					tg := rng.Intn(2)
					if g.Probe(c, cost, now, tg, true) == ProbeOK {
						if int(tHeld[tg].Add(1)) > []int{3, 5}[tg] {
							violations.Add(1)
						}
						tHeld[tg].Add(-1)
						g.ReleaseTarget(tg)
					}
				}
			}
		}(int64(w))
	}
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d times the held cost or a target's holders exceeded the limit", v)
	}
	if st := g.Stats(); st.ActiveCost() != 0 || st.ActiveCount() != 0 {
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
	if v := g.Acquire(Batch, 5, 10*ms, false); v != Busy {
		t.Fatalf("batch took interactive's recent demand: %v", v)
	}
	// Interactive leases end and start again (same demand): its room stays.
	g.Release(Interactive, 5)
	if v := g.Acquire(Batch, 5, 20*ms, false); v != Busy {
		t.Fatalf("batch took room interactive used 10 ms ago: %v", v)
	}
	if v := g.Acquire(Interactive, 5, 30*ms, true); v != Admitted {
		t.Fatalf("interactive within its recent demand: %v", v)
	}
	// Interactive demand grows beyond: it waits (no preemption), and batch
	// admissions stop until interactive has its floor.
	if v := g.Acquire(Interactive, 5, 40*ms, true); v != Queue {
		t.Fatalf("interactive above its recent demand with batch holding the rest: %v", v)
	}
	g.Release(Batch, 5)
	if v := g.Acquire(Batch, 5, 50*ms, false); v != Busy {
		t.Fatalf("batch admitted while interactive waits below its floor: %v", v)
	}
	if r := g.Grant(Interactive, 5, 50*ms); r != Granted {
		t.Fatalf("interactive grant: %v", r)
	}
	g.Unwait(Interactive)
}

// TestGrantTellsTheLimitFromReservedRoom: a queued grant refused because
// the limit itself is full (NoRoom) is demand at the limit, which slow
// start may answer; one refused only for room kept for other lanes
// (Reserved) is not: a higher limit would hand that queue the room past
// the provider's knee.
func TestGrantTellsTheLimitFromReservedRoom(t *testing.T) {
	g := newTestGate(100)
	now := time.Now().UnixNano()
	for i := 0; i < 8; i++ {
		if v := g.Acquire(Interactive, 10, now, false); v != Admitted {
			t.Fatalf("acquire %d: %v", i, v)
		}
	}
	if r := g.GrantReserving(Interactive, 10, now, 15); r != Reserved {
		t.Fatalf("80 of 100 held, 15 kept for another lane: %v, want Reserved", r)
	}
	if r := g.GrantReserving(Interactive, 25, now, 0); r != NoRoom {
		t.Fatalf("80 of 100 held, cost 25: %v, want NoRoom", r)
	}
	if r := g.GrantReserving(Interactive, 10, now, 10); r != Granted {
		t.Fatalf("80 of 100 held, cost 10 beside 10 kept: %v, want Granted", r)
	}
}
