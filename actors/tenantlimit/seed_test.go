package tenantlimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// spendCall is one Spend call the test holds: it answers what the test
// sends on answer, or ends with the context.
type spendCall struct {
	at     time.Time
	answer chan spendAnswer
	ended  chan error // what the call returned
}

type spendAnswer struct {
	day, month map[string]int64
	err        error
}

// heldSpend is a Spend whose every call blocks until the test answers it
// (or its context ends, unless deaf): a store read as slow as the test
// wants.
type heldSpend struct {
	calls chan *spendCall
	deaf  bool // a store that does not heed its context
}

func newHeldSpend() *heldSpend { return &heldSpend{calls: make(chan *spendCall, 8)} }

func (s *heldSpend) spend(ctx context.Context, at time.Time) (map[string]int64, map[string]int64, error) {
	c := &spendCall{at: at, answer: make(chan spendAnswer, 1), ended: make(chan error, 1)}
	s.calls <- c
	done := ctx.Done()
	if s.deaf {
		done = nil
	}
	select {
	case a := <-c.answer:
		c.ended <- a.err
		return a.day, a.month, a.err
	case <-done:
		c.ended <- ctx.Err()
		return nil, nil, ctx.Err()
	}
}

// next is the next call; the test fails if none comes.
func (s *heldSpend) next(t *testing.T) *spendCall {
	t.Helper()
	return testutil.Recv(t, "a spend read started", s.calls)
}

func startSeeding(t *testing.T, spend SpendFunc) (*Handle, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	h, err := Spawn(testutil.ActorSystem(t), Options{Clock: clk, PublishInterval: 5 * time.Millisecond, Spend: spend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h, clk
}

// snapshotOf is a key snapshot holding the named keys, each with a daily
// budget of $1.
func snapshotOf(names ...string) *keys.Snapshot {
	return snapshotWith(tenantpolicy.Policy{DailyBudgetUSD: 1}, names...)
}

// snapshotWith is a key snapshot holding the named keys, each with policy p.
func snapshotWith(p tenantpolicy.Policy, names ...string) *keys.Snapshot {
	var list []keys.Key
	for i, n := range names {
		var d [32]byte
		d[0] = byte(i + 1)
		list = append(list, keys.Key{Info: keys.Info{Name: n, Source: keys.FromStore, Policy: p},
			Digest: d, ID: id("key_" + n)})
	}
	return keys.Build(list)
}

// publish sends the limiter a key snapshot as the keys actor does, and
// waits on the barrier a management operation waits on.
func publish(t *testing.T, h *Handle, s *keys.Snapshot) {
	t.Helper()
	h.root.Send(h.PID(), &messages.Published[*keys.Snapshot]{Snapshot: s})
	if _, err := h.root.RequestFuture(h.PID(), &messages.Sync{}, 10*time.Second).Result(); err != nil {
		t.Fatalf("the limiter did not answer the barrier: %v", err)
	}
}

func daySpent(h *Handle, name string, clk *clock.Fake) (int64, bool) {
	e := (*h.table.Load())[id("key_"+name)]
	if e == nil {
		return 0, false
	}
	return e.state.View(clk.Now(), e.limits.Load()).DaySpent, true
}

func waitDaySpent(t *testing.T, h *Handle, clk *clock.Fake, name string, want float64) {
	t.Helper()
	testutil.Until(t, name+"'s seeded spend", func() bool {
		v, ok := daySpent(h, name, clk)
		return ok && v == pricing.Nano(want)
	})
}

// TestKeySnapshotsInForceWhileSpendIsRead: a key snapshot's tenants are in
// force as soon as the limiter took it, while the spend read it started is
// still blocked; the barrier answers; the figures arrive when the read
// returns. A tenant added by a newer snapshot while a read was in flight
// never gets that older read's figures: it waits for a read of its own.
func TestKeySnapshotsInForceWhileSpendIsRead(t *testing.T) {
	s := newHeldSpend()
	h, clk := startSeeding(t, s.spend)

	publish(t, h, snapshotOf("a"))
	read1 := s.next(t)
	if _, ok := daySpent(h, "a", clk); !ok {
		t.Fatal("a's budget is not in force while its spend is read")
	}
	publish(t, h, snapshotOf("a", "b")) // answered with read 1 still blocked
	if _, ok := daySpent(h, "b", clk); !ok {
		t.Fatal("b is not in force while a read is in flight")
	}
	if h.reads != 1 { // read after the barrier, which the actor answered after it counted
		t.Fatalf("%d reads started; one at a time", h.reads)
	}

	// Read 1 was for a only: b's figure in it is from before b was added.
	read1.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(0.5), id("key_b").String(): pricing.Nano(0.7)}}
	waitDaySpent(t, h, clk, "a", 0.5)
	read2 := s.next(t)
	if v, _ := daySpent(h, "b", clk); v != 0 {
		t.Fatalf("b got %d from a read older than it", v)
	}
	read2.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(9), id("key_b").String(): pricing.Nano(0.3)}}
	waitDaySpent(t, h, clk, "b", 0.3)
	if v, _ := daySpent(h, "a", clk); v != pricing.Nano(0.5) {
		t.Fatalf("a was seeded twice: %d", v)
	}
	// Seeded past the budget: refused.
	clk.Advance(time.Minute)
	publish(t, h, snapshotOf("a", "b", "c"))
	read3 := s.next(t)
	read3.answer <- spendAnswer{day: map[string]int64{id("key_c").String(): pricing.Nano(1)}}
	waitDaySpent(t, h, clk, "c", 1)
	if _, res := h.Reserve(id("key_c"), &tenantlimit.Request{}, clk.Now()); res.Kind != tenantlimit.KindDailyBudget {
		t.Fatalf("c seeded over its budget: %v", res.Kind)
	}
	if read3.at != clk.Now() {
		t.Fatalf("the read was for %v, want the limiter's clock %v", read3.at, clk.Now())
	}
}

// TestFirstBudgetRaisesCountedSpend: a tenant limited by its rates that
// gets its first budget is read for. Until the read returns, its budget
// counts what the tenant settled since it was limited; the store's figure
// holds that spend too, so the read raises the counter to it rather than
// adding it. A policy change that keeps a budget reads nothing.
func TestFirstBudgetRaisesCountedSpend(t *testing.T) {
	s := newHeldSpend()
	h, clk := startSeeding(t, s.spend)
	p := tenantpolicy.Policy{RequestsPerMinute: 100}
	publish(t, h, snapshotWith(p, "a"))
	if h.reads != 0 {
		t.Fatalf("%d reads for a tenant without a budget", h.reads)
	}
	r, res := h.Reserve(id("key_a"), &tenantlimit.Request{Cost: pricing.Nano(0.25)}, clk.Now())
	if !res.Allowed {
		t.Fatalf("reserve: %v", res.Kind)
	}
	h.Settle(&r, tenantlimit.Usage{Cost: pricing.Nano(0.25), Known: true}, clk.Now())

	p.DailyBudgetUSD = 1
	publish(t, h, snapshotWith(p, "a"))
	read := s.next(t)
	if v, _ := daySpent(h, "a", clk); v != pricing.Nano(0.25) {
		t.Fatalf("while the read is held: %d, want what a settled since it was limited", v)
	}
	// The store holds the $0.25 settled here and $0.50 from before.
	read.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(0.75)}}
	waitDaySpent(t, h, clk, "a", 0.75)

	p.DailyBudgetUSD = 2
	publish(t, h, snapshotWith(p, "a"))
	if h.reads != 1 {
		t.Fatalf("%d reads; a budget raised is not read again", h.reads)
	}
	if v, _ := daySpent(h, "a", clk); v != pricing.Nano(0.75) {
		t.Fatalf("after raising the budget: %d", v)
	}
}

// TestFailedSpendReadLeavesZero: a read that fails leaves its tenants
// counting from zero (as when the store cannot be read), in force all the
// same, and they are not read again.
func TestFailedSpendReadLeavesZero(t *testing.T) {
	s := newHeldSpend()
	h, clk := startSeeding(t, s.spend)
	publish(t, h, snapshotOf("a"))
	s.next(t).answer <- spendAnswer{err: errors.New("database is locked")}
	publish(t, h, snapshotOf("a", "b"))
	read := s.next(t)
	read.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(5), id("key_b").String(): pricing.Nano(0.25)}}
	waitDaySpent(t, h, clk, "b", 0.25)
	if v, ok := daySpent(h, "a", clk); !ok || v != 0 {
		t.Fatalf("a after a failed read: %d (in force %v); want 0", v, ok)
	}
}

// TestRestartDuringSpendRead: a restart cancels the read in flight; the
// fresh actor reads again for the tenants still waiting.
func TestRestartDuringSpendRead(t *testing.T) {
	s := newHeldSpend()
	h, clk := startSeeding(t, s.spend)
	publish(t, h, snapshotOf("a"))
	first := s.next(t)
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	if err := <-first.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the read in flight ended with %v, want it canceled", err)
	}
	s.next(t).answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(0.4)}}
	waitDaySpent(t, h, clk, "a", 0.4)
}

// TestRestartDoesNotWaitForADeafRead: a read whose store does not heed
// the cancel does not hold up a restarted actor: the fresh one starts its
// own read and answers the barrier key management waits on while the old
// read is still blocked; the old read's figures are dropped, and Stop
// waits for its goroutine (goleak checks).
func TestRestartDoesNotWaitForADeafRead(t *testing.T) {
	s := newHeldSpend()
	s.deaf = true
	h, clk := startSeeding(t, s.spend)
	publish(t, h, snapshotOf("a"))
	first := s.next(t)
	t.Cleanup(func() { // a failed test's blocked read must not hang Stop
		select {
		case first.answer <- spendAnswer{}:
		default:
		}
	})
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	second := s.next(t) // the fresh actor's, the first still blocked
	publish(t, h, snapshotOf("a", "b"))
	first.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(9)}}
	<-first.ended
	second.answer <- spendAnswer{day: map[string]int64{id("key_a").String(): pricing.Nano(0.4)}}
	waitDaySpent(t, h, clk, "a", 0.4)
	s.next(t).answer <- spendAnswer{day: map[string]int64{id("key_b").String(): pricing.Nano(0.2)}}
	waitDaySpent(t, h, clk, "b", 0.2)
	if v, _ := daySpent(h, "a", clk); v != pricing.Nano(0.4) {
		t.Fatalf("a: %d; the read from before the restart landed", v)
	}
}

// TestWithoutSpendNewTenantsStartFromZero: with no Spend (actor tests,
// hosts without a store) a snapshot's tenants start from zero and nothing
// is read.
func TestWithoutSpendNewTenantsStartFromZero(t *testing.T) {
	h, clk := startSeeding(t, nil)
	publish(t, h, snapshotOf("a"))
	if v, ok := daySpent(h, "a", clk); !ok || v != 0 {
		t.Fatalf("a: %d in force %v", v, ok)
	}
}
