package credit

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestGrainWire: the grain protocol travels on the cluster's one codec,
// and a grain answers a call it cannot read (the format of the release
// before, a reply sent as a call) Refused, changing nothing, and counts
// it in its node's Budgets.
func TestGrainWire(t *testing.T) {
	req := &messages.CreditRequest{Op: messages.CreditRelease, Node: "n1", Window: 1<<63 + 5, Amount: -3, Backs: []messages.CreditBack{{At: 1 << 62, N: 5}}}
	v, err := encodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeRequest(v); err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("request %+v came back as %+v (%v)", req, got, err)
	}
	rep := messages.CreditReply{Granted: 40, Left: 20, At: 1_772_366_420_000_000_000, WaitMs: 61_000, ResetMs: 62_000, Limit: 60, Period: 2, Refused: true}
	if got, err := decodeReply(encodeReply(&rep)); err != nil || got != rep {
		t.Fatalf("reply %+v came back as %+v (%v)", rep, got, err)
	}
	if _, err := decodeReply(v); err == nil {
		t.Fatal("a request was read as a reply")
	}
	if _, err := encodeRequest(&messages.CreditRequest{Op: messages.CreditAcquire}); err == nil {
		t.Fatal("a request naming no node was encoded")
	}

	key := uniq("test/wire")
	setBudget(key, Budget{Limit: 100, Period: PerDay})
	before := budgets.Refused()
	oldFormat := &wrapperspb.BytesValue{Value: []byte{1, 2, 'n', '1', 0, 2, 0, 0}} // an acquire of 1 from "n1", as the release before sent it
	for _, m := range []any{oldFormat, encodeReply(&rep)} {
		a, err := host.Request(windowPrefix+key, KindName, m)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeReply(a); err != nil || got != (messages.CreditReply{Refused: true}) {
			t.Fatalf("the grain answered %T %+v with %+v (%v); want Refused and nothing else", m, m, got, err)
		}
	}
	if n := budgets.Refused() - before; n != 2 {
		t.Fatalf("the grain's node counted %d unreadable calls, want 2", n)
	}
	ok, err := host.Request(windowPrefix+key, KindName, mustRequest(t, &messages.CreditRequest{Op: messages.CreditAcquire, Node: "n1", Window: PerDay.Index(clk.Now()), Amount: 100}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeReply(ok); err != nil || got.Granted != 100 {
		t.Fatalf("after the refused calls the whole budget was not there to grant: %+v (%v)", got, err)
	}
}

func mustRequest(t *testing.T, r *messages.CreditRequest) *wrapperspb.BytesValue {
	t.Helper()
	v, err := encodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// spendWindow spends a window budget from every member concurrently until
// each member's pool reports the cluster's budget spent, and returns what
// was taken in total.
func spendWindow(t *testing.T, key string, limit, cost int64) int64 {
	t.Helper()
	var total atomic.Int64
	var wg sync.WaitGroup
	windowEnd := time.Unix(0, int64(WindowIndex(clk.Now())+1)*int64(Window))
	for i := range members {
		p := window(i, key, limit)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) {
					_, ok, retry := p.Take(clk.Now(), cost)
					if ok {
						total.Add(cost)
						continue
					}
					if retry.Equal(windowEnd) {
						return // the cluster's budget is spent
					}
					time.Sleep(time.Millisecond)
				}
				t.Errorf("pool %s never reported the budget spent", p.ID())
			}()
		}
	}
	wg.Wait()
	return total.Load()
}

// TestWindowBudgetSharedAcrossNodes: three nodes spending one budget at
// once take at most the limit in a window, and between them use all but
// what the others still hold when the first learns it is spent.
func TestWindowBudgetSharedAcrossNodes(t *testing.T) {
	const limit, cost = 3200, 7
	key := uniq("test/shared")
	got := spendWindow(t, key, limit, cost)
	if got > limit {
		t.Fatalf("three nodes took %d of a budget of %d", got, limit)
	}
	chunk := window(0, key, limit).Chunk()
	// Each node stops once the grain says the budget is spent; what it
	// still holds then is less than one request.
	if got < limit-int64(len(members))*cost {
		t.Fatalf("three nodes took only %d of %d (chunk %d): credit was lost", got, limit, chunk)
	}
}

// TestWindowGrainReactivationKeepsBudget: a grain stopped half way through
// a window (as when its member dies) comes back from the store, so the
// budget is not reset.
func TestWindowGrainReactivationKeepsBudget(t *testing.T) {
	const limit, cost = 1600, 5
	key := uniq("test/rehome")
	p := window(1, key, limit)
	var before int64
	for before < limit/2 {
		if _, ok, _ := p.Take(clk.Now(), cost); ok {
			before += cost
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	host.deactivate(t, windowPrefix+key)
	after := spendWindow(t, key, limit, cost)
	if before+after > limit {
		t.Fatalf("after the grain re-activated the nodes took %d more, %d in all of a budget of %d: the budget was reset", after, before+after, limit)
	}
}

// TestSlotsCapAcrossNodes: 30 callers on three nodes never hold more than
// the cap of 10 slots at once, and the cap is used.
func TestSlotsCapAcrossNodes(t *testing.T) {
	const limit = 10
	_, pools := leasedSlots(t, "test/conc", limit)
	var inUse, peak atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for i := 0; i < 30; i++ {
		p := pools[i%len(pools)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if !p.TakeSlot(clk.Now()) {
					time.Sleep(time.Millisecond)
					continue
				}
				n := inUse.Add(1)
				for {
					m := peak.Load()
					if n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				inUse.Add(-1)
				p.GiveSlot()
			}
		}()
	}
	wg.Wait()
	if peak.Load() > limit {
		t.Fatalf("%d slots were in use at once across the nodes; the cap is %d", peak.Load(), limit)
	}
	if peak.Load() < 2 {
		t.Fatalf("at most %d slot was in use at once: the nodes did not lease the cap", peak.Load())
	}
	var held int64
	for _, p := range pools {
		held += p.held.Load()
	}
	if held > limit {
		t.Fatalf("the nodes hold %d slots of a cap of %d", held, limit)
	}
}

// TestIdleSlotsGoWhereTheyAreWanted: with a cap of three slots on three
// nodes, each node leases one; when one node needs all three, the others
// give back the slots they hold idle, so it gets the whole cap.
func TestIdleSlotsGoWhereTheyAreWanted(t *testing.T) {
	const limit = 3 // chunk 1
	_, pools := leasedSlots(t, "test/idle", limit)
	busy := pools[2]
	var taken, advances int
	last := time.Now()
	waitFor(t, "one node to hold the whole cap", func() bool {
		if busy.TakeSlot(clk.Now()) {
			taken++
		} else if advances < 10 && time.Since(last) >= tickEvery {
			// Time passes while the node waits: the idle holders learn
			// that the cap is contended at their next renewal (a tick
			// after their lease's last word), never on a clock that
			// stands still. A tick of the shared clock per tick of the
			// lease actors, ten at most: the package's tests share the
			// clock and must not carry it across a minute boundary.
			clk.Advance(tickEvery)
			advances++
			last = time.Now()
		}
		return taken == limit
	})
	usable := int64(taken)
	for _, p := range pools {
		if p.expires.Load() > clk.Now().UnixNano() { // a node whose lease ended starts nothing
			usable += max(p.avail.Load(), 0)
		}
	}
	for range taken {
		busy.GiveSlot()
	}
	if usable > limit {
		t.Fatalf("with one node using the whole cap of %d, the nodes could start %d requests", limit, usable)
	}
}

// TestSlotsLeaseExpiresClosed: a node whose lease is past its expiry
// refuses (fail closed) even with free slots in hand.
func TestSlotsLeaseExpiresClosed(t *testing.T) {
	// The cap's first activation grants at once (no holders to wait for).
	p := slotPool(2, uniq("test/expiry"), 4)
	waitFor(t, "a live slot lease", func() bool { return p.held.Load() > 0 && p.expires.Load() > clk.Now().UnixNano() })
	if !p.TakeSlot(clk.Now()) {
		t.Fatal("a node holding a live lease refused a slot")
	}
	p.GiveSlot()
	if p.TakeSlot(time.Unix(0, p.expires.Load())) {
		t.Fatal("a node took a slot at its lease's expiry")
	}
}

// TestSlotGrainRebuildsFromRenewals: a slots grain stopped while nodes
// hold slots comes back knowing them from their renewals, so the cap is
// not reset.
func TestSlotGrainRebuildsFromRenewals(t *testing.T) {
	const limit = 6
	key, pools := leasedSlots(t, "test/conc-rehome", limit)
	// Node 0 takes everything it can get and keeps it in use.
	var taken int
	deadline := time.Now().Add(5 * time.Second)
	for taken < 3 && time.Now().Before(deadline) {
		if pools[0].TakeSlot(clk.Now()) {
			taken++
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	if taken < 3 {
		t.Fatalf("node 0 got only %d slots of %d", taken, limit)
	}
	host.deactivate(t, slotsPrefix+key)
	// Renewals reach the fresh grain (the clock moves past the renewal
	// point); after its recovery it grants again, never beyond the cap
	// counting node 0's slots in use.
	renewed := make([]int64, len(pools))
	for i, p := range pools {
		renewed[i] = p.renewals.Load() + p.refills.Load() // an acquire carries the holding too
	}
	clk.Advance(RenewInterval)
	waitFor(t, "renewals to the fresh grain", func() bool {
		for i, p := range pools {
			if p.renewals.Load()+p.refills.Load() == renewed[i] {
				return false
			}
		}
		return true
	})
	clk.Advance(LeaseTTL - RenewInterval + time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	var held int64
	for _, p := range pools {
		held += p.held.Load()
	}
	if held > limit {
		t.Fatalf("after the grain re-activated the nodes hold %d slots of a cap of %d", held, limit)
	}
	if h := pools[0].held.Load(); h < int64(taken) {
		t.Fatalf("node 0 has %d slots in use but the fresh grain left it %d", taken, h)
	}
	for i := 0; i < taken; i++ {
		pools[0].GiveSlot()
	}
}

// waitHeld waits until every pool holds slots.
func waitHeld(t *testing.T, pools []*Pool) {
	t.Helper()
	waitEvery(t, "slot leases", pools, func(p *Pool) bool { return p.held.Load() != 0 })
}

// waitEvery waits until cond holds for every pool.
func waitEvery(t *testing.T, what string, pools []*Pool, cond func(*Pool) bool) {
	t.Helper()
	waitFor(t, what, func() bool {
		for _, p := range pools {
			if !cond(p) {
				return false
			}
		}
		return true
	})
}

// slotPools is every member's pool of concurrency cap key.
func slotPools(key string, limit int64) []*Pool {
	pools := make([]*Pool, len(members))
	for i := range members {
		pools[i] = slotPool(i, key, limit)
	}
	return pools
}

// leasedSlots is a slots budget of limit under a key of this run made
// from key, on every member, past its grain's recovery and with slots
// leased on each: where the slot tests start.
func leasedSlots(t *testing.T, key string, limit int64) (string, []*Pool) {
	t.Helper()
	key = uniq(key)
	pools := slotPools(key, limit)
	pastRecovery(t, pools...)
	waitHeld(t, pools)
	return key, pools
}

var runs atomic.Int64

// uniq makes a budget key unique to this run (-count reuses the grains).
func uniq(key string) string { return fmt.Sprintf("%s-%d", key, runs.Add(1)) }

// pastRecovery waits until each pool's grain is active, then moves the
// clock past a fresh slots grain's recovery.
func pastRecovery(t *testing.T, pools ...*Pool) {
	t.Helper()
	waitEvery(t, "the grains to activate", pools, func(p *Pool) bool { return p.refills.Load() != 0 })
	clk.Advance(LeaseTTL + time.Millisecond)
}

// TestRestartAfterPanic: the lease actor restarts from a fresh object and
// keeps the pools filled.
func TestRestartAfterPanic(t *testing.T) {
	l := members[1].leases
	watch := testutil.WatchActors(t, members[1].sys, l.pid.Id)
	l.root.Send(l.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	p := window(1, uniq("test/after-restart"), 640)
	waitFor(t, "a refill after the restart", func() bool { return p.available(WindowIndex(clk.Now())) > 0 })
}

// TestWindowWordsAcrossIndexes: credit added to a never-used pool lands in
// the window it was granted for, whatever the window's index (a tag in
// the upper half of the tag space once read as "a later window").
func TestWindowWordsAcrossIndexes(t *testing.T) {
	for _, idx := range []uint64{0, 1, tagMod/2 + 3, tagMod - 2, 29_400_000} {
		p := &Pool{}
		p.addWindow(idx, 50)
		if got := p.available(idx); got != 50 {
			t.Fatalf("window %d: %d available after a grant of 50", idx, got)
		}
		p.addWindow(idx+2, 7) // the same parity, a later window: replaces
		if p.available(idx) != 0 || p.available(idx+2) != 7 {
			t.Fatalf("window %d: a later window's grant did not replace the old credit", idx)
		}
		p.addWindow(idx, 9) // an older window's late grant is dropped
		if p.available(idx+2) != 7 {
			t.Fatalf("window %d: a late grant for an older window overwrote the current one", idx)
		}
	}
}

// TestRequestLargerThanAChunk: a request larger than one chunk is refused
// once, and the refill it triggers asks for enough that it fits next time.
func TestRequestLargerThanAChunk(t *testing.T) {
	p := window(0, uniq("test/large"), 3200) // chunk 100
	big := 7 * p.Chunk()
	waitFor(t, "a request of seven chunks to fit", func() bool {
		_, ok, _ := p.Take(clk.Now(), big)
		return ok
	})
}

// TestColdPoolWaitsForItsFirstLease: a request to a pool made a moment
// ago waits for the first grant instead of being refused, and an answered
// pool never waits again.
func TestColdPoolWaitsForItsFirstLease(t *testing.T) {
	for _, slots := range []bool{false, true} {
		var p *Pool
		if slots {
			p = slotPool(1, uniq("test/cold"), 4)
		} else {
			p = window(1, uniq("test/cold"), 400)
		}
		// Whether the grant came before this call or during it, the pool
		// has had its answer when WaitFirst returns within its bound.
		p.WaitFirst(30 * time.Second)
		select {
		case <-p.answered:
		default:
			t.Fatalf("slots %v: WaitFirst returned before the pool's first answer", slots)
		}
		if slots {
			if !p.TakeSlot(clk.Now()) {
				t.Fatal("a cold slot pool refused its first request after the first lease")
			}
			p.GiveSlot()
		} else if _, ok, _ := p.Take(clk.Now(), 1); !ok {
			t.Fatal("a cold window pool refused its first request after the first lease")
		}
		if p.WaitFirst(30 * time.Second) {
			t.Fatalf("slots %v: an answered pool waited again", slots)
		}
	}
}
