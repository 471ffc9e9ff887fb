package ledger

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func start(t testing.TB, slots ...SlotSpec) (*Handle, *clock.Fake) {
	t.Helper()
	sys := testutil.NewActorSystem()
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, slots, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	return h, clk
}

// lim is a slot's configured windows: tokens and requests per minute.
func lim(tokens, requests int64) rolling.Limits {
	var l rolling.Limits
	l[rolling.Tokens][rolling.Minute], l[rolling.Requests][rolling.Minute] = tokens, requests
	return l
}

func waitSnap(t *testing.T, h *Handle, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	return testutil.UntilSnapshot(t, h.Snapshot, nil, cond)
}

// published moves clk on by one publish interval, so that the ledger's
// tick comes behind everything sent to it before, and returns the
// snapshot the tick published.
func published(t *testing.T, h *Handle, clk *clock.Fake) *Snapshot {
	t.Helper()
	testutil.Drain(t, h.root, h.pid) // started (its tick armed) and caught up
	clk.Advance(PublishInterval)
	testutil.Drain(t, h.root, h.pid)
	return h.Snapshot()
}

func TestReserveSettleRefund(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(10000, 3)}, SlotSpec{Connection: "p/b", Model: "m"})
	now := clk.Now()
	// No limits: affordable, nothing held (fail open).
	if r, b, _ := h.Reserve(1, 1e9, now); r.Active || b != routing.BudgetUnconfigured {
		t.Fatalf("unlimited slot: %+v %v", r, b)
	}
	r1, b, _ := h.Reserve(0, 6000, now)
	if !r1.Active || b != routing.BudgetAffordable {
		t.Fatalf("first: %+v %v", r1, b)
	}
	// The 6000 leave the window with their second, 62 s later (a minute,
	// the margin second and the second itself).
	if v, at := h.Check(0, 5000, now); v != routing.BudgetInsufficient || !at.Equal(now.Add(62*time.Second)) {
		t.Fatalf("check 5000 after 6000: %v until %v", v, at)
	}
	if _, b, _ := h.Reserve(0, 5000, now); b != routing.BudgetInsufficient {
		t.Fatalf("reserve 5000 after 6000: %v", b)
	}
	// Settling at the real usage frees the difference at once.
	h.Settle(&r1, 1000, false)
	r2, b, _ := h.Reserve(0, 5000, now)
	if b != routing.BudgetAffordable {
		t.Fatalf("after settle: %v", b)
	}
	h.Settle(&r2, 0, true) // refund
	h.Settle(&r2, 0, true) // a second settle is a no-op
	r3, _, _ := h.Reserve(0, 9000, now)
	if !r3.Active {
		t.Fatal("refund did not free the budget")
	}
	// The token budget is spent (the refund returned its request slot).
	if _, b, _ := h.Reserve(0, 1, now); b != routing.BudgetInsufficient && b != routing.BudgetExhausted {
		t.Fatalf("fourth request of three: %v", b)
	}
	if v, _ := h.Check(0, 0, now); v != routing.BudgetExhausted {
		t.Fatalf("tokens exhausted: %v", v)
	}
	s := published(t, h, clk)
	if v := s.Slots[0]; v.TotalRequests != 1 || v.Refunds != 1 || v.TotalTokens != 1000 || s.Slots[1].Limited || v.Tokens.Used != 10000 || v.Requests.Used != 2 || len(v.Windows) != 2 {
		t.Fatalf("snapshot %+v tokens %+v requests %+v", v, v.Tokens, v.Requests)
	}
	// A minute later nothing has left yet: there is no fresh window at a
	// boundary. Two seconds after that, everything has.
	clk.Advance(time.Minute)
	if v, _ := h.Check(0, 1, clk.Now()); v != routing.BudgetExhausted {
		t.Fatalf("a minute later: %v", v)
	}
	clk.Advance(2 * time.Second)
	if v, _ := h.Check(0, 9000, clk.Now()); v != routing.BudgetAffordable {
		t.Fatalf("62 s later: %v", v)
	}
}

// TestHourAndDayWindows: a slot limited per minute and per day admits a
// request only when it fits both, and says which window frees it when.
func TestHourAndDayWindows(t *testing.T) {
	l := lim(0, 10)
	l[rolling.Requests][rolling.Day] = 12
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: l})
	now := clk.Now()
	for i := range 10 {
		if _, b, _ := h.Reserve(0, 0, now); b != routing.BudgetAffordable {
			t.Fatalf("request %d: %v", i, b)
		}
	}
	if b, at := h.Check(0, 0, now); b != routing.BudgetExhausted || !at.Equal(now.Add(62*time.Second)) {
		t.Fatalf("the minute is full: %v until %v", b, at)
	}
	later := now.Add(62 * time.Second)
	for range 2 {
		if _, b, _ := h.Reserve(0, 0, later); b != routing.BudgetAffordable {
			t.Fatalf("after the minute: %v", b)
		}
	}
	// The day's 24-minute slot holding all twelve leaves a day and two
	// slots after it began (10:00 is a slot boundary).
	if b, at := h.Check(0, 0, later); b != routing.BudgetExhausted || !at.Equal(now.Add(24*time.Hour+48*time.Minute)) {
		t.Fatalf("the day is full: %v until %v", b, at)
	}
	s := published(t, h, clk)
	if w := s.Slots[0].Windows; len(w) != 2 || s.Slots[0].Requests.Period != "day" || w[0].Period != "minute" || w[1].Period != "day" || w[1].Used != 12 || w[1].Source != SourceConfigured {
		t.Fatalf("windows %+v", w)
	}
}

// TestConcurrentReservationsNeverOvershoot: 50 concurrent requests against
// a 10k-tokens-per-minute connection never hold more than the limit plus
// one request's estimate.
func TestConcurrentReservationsNeverOvershoot(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(10000, 0)})
	const est = 1700
	var held, maxHeld atomic.Int64
	testutil.AtOnce(50, func(_ int) {
		for j := 0; j < 20; j++ {
			r, _, _ := h.Reserve(0, est, clk.Now())
			if !r.Active {
				continue
			}
			n := held.Add(est)
			for {
				m := maxHeld.Load()
				if n <= m || maxHeld.CompareAndSwap(m, n) {
					break
				}
			}
			held.Add(-est)
			h.Settle(&r, est, true)
		}
	})
	if m := maxHeld.Load(); m > 10000+est || m == 0 {
		t.Fatalf("held at most %d tokens against a 10000 limit", m)
	}
}

func TestHeaderLimits(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(10000, 0)}, SlotSpec{Connection: "p/b", Model: "m", Configured: lim(2000, 0)})
	obs := &messages.QuotaObservation{N: 3}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit, Limit: 5000, Window: time.Minute}
	obs.Readings[1] = messages.QuotaReading{Dimension: messages.DimDailyRequests, Flags: messages.HasLimit, Limit: 3, Window: 24 * time.Hour}
	obs.Readings[2] = messages.QuotaReading{Dimension: messages.DimRequests, Flags: messages.HasLimit, Limit: 50, Window: time.Second} // not a window the ledger keeps
	h.ObserveLimits(0, obs)
	h.ObserveLimits(1, obs)
	waitSnap(t, h, func(s *Snapshot) bool { return s.Slots[0].Tokens.Limit == 5000 && s.Slots[1].Requests != nil })
	l := h.Limits(0)
	if l.Windows[rolling.Tokens][rolling.Minute] != 5000 || l.Source[rolling.Tokens][rolling.Minute] != SourceHeaders ||
		l.Windows[rolling.Requests][rolling.Minute] != 0 || l.Windows[rolling.Requests][rolling.Day] != 3 {
		t.Fatalf("provider limit below configured, the day's requests from the headers: %+v", l)
	}
	// The configured limit below the provider's stays: the operator's share.
	if l := h.Limits(1); l.Windows[rolling.Tokens][rolling.Minute] != 2000 || l.Source[rolling.Tokens][rolling.Minute] != SourceConfigured {
		t.Fatalf("configured limit below provider's: %+v", l)
	}
	if _, b, _ := h.Reserve(0, 5001, clk.Now()); b != routing.BudgetAffordable {
		t.Fatalf("an oversized request into an empty window must pass once: %v", b)
	}
}

// TestAddSlotsEnforcesNewBudgets: a budget added at run time is in the
// snapshot AddSlots waited for and enforces its configured limit, and
// the slots before it keep their counts.
func TestAddSlotsEnforcesNewBudgets(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(0, 5)})
	now := clk.Now()
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
		t.Fatalf("first slot: %v", v)
	}
	first, err := h.AddSlots([]SlotSpec{{Connection: "q/b", Model: "n", Configured: lim(0, 1)}})
	if err != nil || first != 1 || h.Len() != 2 {
		t.Fatalf("AddSlots = %d, %v; Len %d", first, err, h.Len())
	}
	s := h.Snapshot()
	if len(s.Slots) != 2 || s.Slots[1].Connection != "q/b" || s.Slots[0].Requests.Used != 1 {
		t.Fatalf("snapshot after AddSlots: %+v", s.Slots)
	}
	r, v, _ := h.Reserve(1, 1, now)
	if v != routing.BudgetAffordable || !r.Active {
		t.Fatalf("added slot's first request: %v active=%v", v, r.Active)
	}
	if _, v, _ := h.Reserve(1, 1, now); v != routing.BudgetExhausted {
		t.Fatalf("added slot's second request in the window: %v, want exhausted (limit 1/min)", v)
	}
	// A restarted actor keeps accounts for the added slot.
	h.root.Send(h.pid, messages.Crash{Reason: "after AddSlots"})
	h.Settle(&r, 10, false)
	if s := published(t, h, clk); len(s.Slots) != 2 || s.Slots[1].TotalTokens != 10 {
		t.Fatalf("after a restart the added slot's settle is not counted: %+v", s.Slots)
	}
}

// TestSetConfiguredChangesLimits: new configured limits are in force when
// SetConfigured returns, and what the window used stays counted.
func TestSetConfiguredChangesLimits(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(0, 2)})
	now := clk.Now()
	for i := 0; i < 2; i++ {
		if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
			t.Fatalf("request %d: %v", i, v)
		}
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetExhausted {
		t.Fatalf("third request under a limit of 2: %v", v)
	}
	if err := h.SetConfigured(0, lim(0, 3)); err != nil {
		t.Fatal(err)
	}
	if l := h.Limits(0); l.Windows[rolling.Requests][rolling.Minute] != 3 || l.Source[rolling.Requests][rolling.Minute] != SourceConfigured {
		t.Fatalf("limits after SetConfigured: %+v", l)
	}
	if c, _ := h.Configured(0); c.Configured != lim(0, 3) || c.Connection != "p/a" {
		t.Fatalf("Configured after SetConfigured: %+v", c)
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
		t.Fatalf("third request under the raised limit of 3: %v", v)
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetExhausted {
		t.Fatalf("fourth request: %v (the window's count was lost)", v)
	}
	if err := h.SetConfigured(0, rolling.Limits{}); err != nil {
		t.Fatal(err)
	}
	if r, v, _ := h.Reserve(0, 1, now); v != routing.BudgetUnconfigured || r.Active {
		t.Fatalf("without limits: %v active=%v", v, r.Active)
	}
}
