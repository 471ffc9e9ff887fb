package credit

import (
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

func minute(v int64) [rolling.NumPeriods]int64 { return [rolling.NumPeriods]int64{rolling.Minute: v} }

// rollingPools is every member's pool of rolling budget key.
func rollingPools(key string, windows [rolling.NumPeriods]int64) []*Pool {
	pools := make([]*Pool, len(members))
	for i := range members {
		pools[i] = rollingPool(i, key, windows)
	}
	return pools
}

// TestRollingBudgetNeverExceedsAnySlidingWindow: three nodes spend one
// rolling budget of 600 a minute as fast as they can for three minutes
// of the (fake) clock, giving back part of what they take as requests
// that used less than their estimate: no interval of a minute and a
// second holds more than 600 spent, wherever it starts, and the nodes
// spend most of what a steady 600 a minute allows.
func TestRollingBudgetNeverExceedsAnySlidingWindow(t *testing.T) {
	const limit = 600
	key := uniq("test/rolling")
	pools := rollingPools(key, minute(limit))
	type spend struct {
		at int64
		n  int64
	}
	var mu sync.Mutex
	var spends []spend
	start := clk.Now()
	end := start.Add(3 * time.Minute)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, p := range pools {
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cost := int64(1 + (i+g)%5)
				for !stop.Load() {
					now := clk.Now()
					idx, ok, _ := p.Take(now, cost)
					if !ok {
						time.Sleep(200 * time.Microsecond)
						continue
					}
					used := cost
					if g == 0 && cost > 1 {
						used = cost - 1 // settled below the estimate: one back
						p.Give(idx, 1)
					}
					mu.Lock()
					spends = append(spends, spend{now.UnixNano(), used})
					mu.Unlock()
				}
			}()
		}
	}
	for clk.Now().Before(end) {
		time.Sleep(2 * time.Millisecond)
		clk.Advance(100 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	sort.Slice(spends, func(i, j int) bool { return spends[i].at < spends[j].at })
	span := int64(rolling.Minute.Width() + rolling.Minute.Slot())
	var total int64
	for i := range spends {
		var sum int64
		for j := i; j < len(spends) && spends[j].at < spends[i].at+span; j++ {
			sum += spends[j].n
		}
		if sum > limit {
			t.Fatalf("%d spent in the %v from %v: more than the limit of %d", sum, time.Duration(span), time.Unix(0, spends[i].at).Sub(start), limit)
		}
		total += spends[i].n
	}
	// A steady 600 a minute allows 1800 in three minutes; the grain's
	// windows are a minute, a slot and CreditTTL long, so a little less.
	if total < 1800*85/100 {
		t.Fatalf("the nodes spent only %d in three minutes of a budget of %d a minute", total, limit)
	}
	t.Logf("spent %d of the 1800 a steady 600 a minute allows in three minutes", total)
}

// TestRollingGrainUsesItsOwnLimits: a node that asks under a larger limit
// than the grain's own node configures gets no more than the grain's; a
// budget the grain's node does not know is never granted.
func TestRollingGrainUsesItsOwnLimits(t *testing.T) {
	key := uniq("test/rolling-own")
	setBudget(key, Budget{Windows: minute(100)})
	p := members[0].leases.Rolling(key, minute(1_000_000)) // this node believes a million a minute
	var took int64
	waitFor(t, "the pool to be told the budget is spent", func() bool {
		if _, ok, _ := p.Take(clk.Now(), 5); ok {
			took += 5
		}
		return p.dryUntil.Load() > clk.Now().UnixNano() && p.liveFree(clk.Now().UnixNano()) < 5
	})
	if took > 100 {
		t.Fatalf("took %d of a budget the grain's node limits to 100 a minute", took)
	}
	unknown := members[1].leases.Rolling(uniq("test/rolling-unknown"), minute(100))
	unknown.WaitFirst(30 * time.Second)
	if _, ok, retry := unknown.Take(clk.Now(), 1); ok || retry.IsZero() {
		t.Fatal("a budget the grain's node does not know was granted")
	}
}

// TestGrainRefusesOutOfRange: a calendar grain refuses a window other than
// its own clock's, the one before and the one after; a rolling grain
// refuses a give-back naming a grant from the future.
func TestGrainRefusesOutOfRange(t *testing.T) {
	call := func(id string, r messages.CreditRequest) messages.CreditReply {
		t.Helper()
		return grainCall(t, host, id, r)
	}
	cal := uniq("test/cal-range")
	setBudget(cal, Budget{Limit: 100, Period: PerDay})
	idx := PerDay.Index(clk.Now())
	for _, w := range []uint64{idx - 1, idx, idx + 1} {
		if rep := call(windowPrefix+cal, messages.CreditRequest{Op: messages.CreditAcquire, Node: "n", Window: w, Amount: 1}); rep.Refused {
			t.Fatalf("window %d (now %d) was refused", w, idx)
		}
	}
	for _, w := range []uint64{idx - 2, idx + 2, idx + 400, 0} {
		if rep := call(windowPrefix+cal, messages.CreditRequest{Op: messages.CreditAcquire, Node: "n", Window: w, Amount: 1}); !rep.Refused || rep.Granted != 0 {
			t.Fatalf("window %d (now %d) was served: %+v", w, idx, rep)
		}
	}
	roll := uniq("test/roll-range")
	setBudget(roll, Budget{Windows: minute(10)})
	got := call(rollingPrefix+roll, messages.CreditRequest{Op: messages.CreditAcquire, Node: "n", Amount: 4})
	if got.Granted != 4 || got.Limit != 10 || got.Left != 6 || got.At != clk.Now().UnixNano() {
		t.Fatalf("a rolling grant %+v", got)
	}
	future := clk.Now().Add(time.Hour).UnixNano()
	if rep := call(rollingPrefix+roll, messages.CreditRequest{Op: messages.CreditRelease, Node: "n", Backs: []messages.CreditBack{{At: future, N: 4}}}); !rep.Refused {
		t.Fatal("a give-back of a grant from an hour ahead was accepted")
	}
	if rep := call(rollingPrefix+roll, messages.CreditRequest{Op: messages.CreditRelease, Node: "n", Backs: []messages.CreditBack{{At: got.At, N: 4}}}); rep.Refused || rep.Left != 10 {
		t.Fatalf("the give-back of the grant was not taken: %+v", rep)
	}
	// A give-back never frees more than the grant's slot holds.
	if rep := call(rollingPrefix+roll, messages.CreditRequest{Op: messages.CreditAcquire, Node: "n", Amount: 10, Backs: []messages.CreditBack{{At: got.At, N: 50}}}); rep.Granted != 10 || rep.Left != 0 {
		t.Fatalf("after an oversized give-back: %+v", rep)
	}
}

// TestGrainCountsGrantsForCreditTTL: a rolling grain counts a grant for
// its window, the margin slot and CreditTTL, because the node may spend it
// until CreditTTL after asking; and says how long until the rest fits.
func TestGrainCountsGrantsForCreditTTL(t *testing.T) {
	key := uniq("test/roll-ttl")
	setBudget(key, Budget{Windows: minute(10)})
	call := func(amount int64) messages.CreditReply {
		t.Helper()
		v, err := host.Request(rollingPrefix+key, KindName, mustRequest(t, &messages.CreditRequest{Op: messages.CreditAcquire, Node: "n", Amount: amount}))
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := decodeReply(v)
		return rep
	}
	start := clk.Now().Truncate(time.Second).Add(time.Second)
	clk.Set(start)
	if rep := call(10); rep.Granted != 10 {
		t.Fatalf("first grant %+v", rep)
	}
	// A node-local window would count it until its slot left, 62 s after
	// the slot began: here it stays CreditTTL longer.
	clk.Set(start.Add(62 * time.Second))
	rep := call(10)
	if rep.Granted != 0 || rep.WaitMs != int64(CreditTTL/time.Millisecond) {
		t.Fatalf("62 s after the grant: %+v, want nothing and a wait of CreditTTL", rep)
	}
	clk.Set(start.Add(62*time.Second + CreditTTL))
	if rep := call(10); rep.Granted != 10 {
		t.Fatalf("a minute, a slot and CreditTTL after the grant: %+v", rep)
	}
}

// TestRollingCreditEndsAndGoesBack: credit a node holds is not spendable
// after CreditTTL; the node gives it back, and another node can use it.
func TestRollingCreditEndsAndGoesBack(t *testing.T) {
	const limit = 64 // chunk 2
	key := uniq("test/rolling-ttl")
	a := rollingPool(0, key, minute(limit))
	a.WaitFirst(30 * time.Second)
	if _, ok, _ := a.Take(clk.Now(), 1); !ok {
		t.Fatal("no credit after the first lease")
	}
	held := a.liveFree(clk.Now().UnixNano())
	if held == 0 {
		t.Fatal("the first lease was spent by one request")
	}
	clk.Advance(CreditTTL)
	if _, ok, _ := a.Take(clk.Now(), held); ok {
		t.Fatal("credit was spent at its lease's end")
	}
	// The refused request asked for a refill; unused, that lease ends too
	// and goes back.
	waitFor(t, "node 0's refill", func() bool { return a.liveFree(clk.Now().UnixNano()) > 0 })
	clk.Advance(CreditTTL)
	waitFor(t, "node 0 to give back all it did not spend", func() bool { return a.granted.Load()-a.returned.Load() == 1 })
	// Node 1 gets everything but the one request node 0 spent.
	b := rollingPool(1, key, minute(limit))
	var took int64
	waitFor(t, "node 1 to get what node 0 gave back", func() bool {
		_, ok, _ := b.Take(clk.Now(), 1)
		if !ok && b.Ask(1, time.Second) { // as a request does (transport's take)
			_, ok, _ = b.Take(clk.Now(), 1)
		}
		if ok {
			took++
		}
		return took == limit-1
	})
	// Node 1 asks for more, as a refused request does, and has the
	// grain's answer (or its word that there is none): nothing more.
	if _, ok, _ := b.Take(clk.Now(), 1); ok {
		t.Fatal("node 1 took more than the limit left")
	}
	b.Ask(1, 10*time.Second)
	if _, ok, _ := b.Take(clk.Now(), 1); ok {
		t.Fatal("node 1 took more than the limit left after asking the grain")
	}
}

// TestRollingReactivationKeepsBudget: a rolling grain stopped half way (as
// when its member dies) comes back from its record.
func TestRollingReactivationKeepsBudget(t *testing.T) {
	const limit = 320
	key := uniq("test/rolling-rehome")
	pools := rollingPools(key, minute(limit))
	spendAll := func() int64 {
		var total int64
		for _, p := range pools {
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if _, ok, _ := p.Take(clk.Now(), 1); ok {
					total++
					continue
				}
				if p.dryUntil.Load() > clk.Now().UnixNano() && p.liveFree(clk.Now().UnixNano()) == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		return total
	}
	var before int64
	for before < limit/2 {
		if _, ok, _ := pools[0].Take(clk.Now(), 1); ok {
			before++
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	host.deactivate(t, rollingPrefix+key)
	after := spendAll()
	if before+after > limit {
		t.Fatalf("after the grain re-activated the nodes took %d more, %d in all of a budget of %d a minute", after, before+after, limit)
	}
	// The cluster's view for the headers: the tightest window, all but
	// what the nodes hold spent.
	b, ok := pools[0].Bucket(clk.Now())
	if !ok || b.Limit != limit || b.Period != rolling.Minute || b.Remaining > 3*pools[0].Chunk() || b.Reset <= 0 {
		t.Fatalf("the cluster's view of the window %+v", b)
	}
}

// TestAskBringsCreditOrTheGrainsWord: a request its empty pool refused
// asks the grain (Ask, as transport's take does) and gets, from one
// answer, credit or the grain's word on when there is room: the moment
// the window's first grant leaves it. While that word holds, asking makes
// no call and returns at once; once it has come, asking brings the unit.
func TestAskBringsCreditOrTheGrainsWord(t *testing.T) {
	const limit = 4 // chunk 1
	key := uniq("test/rolling-ask")
	start := clk.Now().Truncate(time.Second).Add(time.Second)
	clk.Set(start)
	p := rollingPool(0, key, minute(limit))
	p.WaitFirst(30 * time.Second)
	took := 0
	for try := 0; took < limit+1 && try < 4*limit; try++ {
		if _, ok, _ := p.Take(clk.Now(), 1); ok {
			took++
			continue
		}
		if _, said := p.Word(clk.Now()); said {
			break // a prefetch found the window full
		}
		if !p.Ask(1, 5*time.Second) {
			t.Fatalf("no answer to a refused request's ask after %d taken", took)
		}
	}
	if took != limit {
		t.Fatalf("took %d of a limit of %d before the grain said when there is room", took, limit)
	}
	at, said := p.Word(clk.Now())
	// The grain counts a grant for the window, two margin slots and
	// CreditTTL from the slot it was made in.
	if earliest, latest := start.Add(time.Minute+CreditTTL), start.Add(time.Minute+2*rolling.Minute.Slot()+CreditTTL); !said || at.Before(earliest) || at.After(latest) {
		t.Fatalf("the grain's word %v (said %v), want between %v and %v", at.Sub(start), said, earliest.Sub(start), latest.Sub(start))
	}
	if p.RetryAt(clk.Now()) != at {
		t.Fatalf("a refusal would say %v, not the grain's word", p.RetryAt(clk.Now()).Sub(start))
	}
	if p.Ask(1, 5*time.Second) {
		t.Fatal("asked the grain again while its word holds")
	}
	clk.Set(at)
	if _, said := p.Word(clk.Now()); said {
		t.Fatal("the grain's word still holds at its moment")
	}
	if !p.Ask(1, 5*time.Second) {
		t.Fatal("no answer once the grain's word had come")
	}
	if _, ok, _ := p.Take(clk.Now(), 1); !ok {
		t.Fatalf("no unit once the first grant left the window (the grain's word now %v)", p.RetryAt(clk.Now()).Sub(clk.Now()))
	}
}
