package ledger

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.LeakOptions()...) }

func start(t testing.TB, slots ...SlotSpec) (*Handle, *clock.Fake) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, slots, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	return h, clk
}

func waitSnap(t *testing.T, h *Handle, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s := h.Snapshot(); cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot never matched: %+v", h.Snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestReserveSettleRefund(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", TokensPerMinute: 10000, RequestsPerMinute: 3}, SlotSpec{Connection: "p/b", Model: "m"})
	now := clk.Now()
	// No limits: affordable, nothing held (fail open).
	if r, b, _ := h.Reserve(1, 1e9, now); r.Active || b != routing.BudgetUnconfigured {
		t.Fatalf("unlimited slot: %+v %v", r, b)
	}
	r1, b, end := h.Reserve(0, 6000, now)
	if !r1.Active || b != routing.BudgetAffordable || !end.Equal(now.Add(time.Minute)) {
		t.Fatalf("first: %+v %v %v", r1, b, end)
	}
	if v, _ := h.Check(0, 5000, now); v != routing.BudgetInsufficient {
		t.Fatalf("check 5000 after 6000: %v", v)
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
	s := waitSnap(t, h, func(s *Snapshot) bool { return s.Slots[0].TotalRequests == 1 && s.Slots[0].Refunds == 1 })
	if v := s.Slots[0]; v.TotalTokens != 1000 || v.SettledTokens != 1000 || s.Slots[1].Limited || v.Tokens.Used != 10000 || v.Requests.Used != 2 {
		t.Fatalf("snapshot %+v tokens %+v requests %+v", v, v.Tokens, v.Requests)
	}
	// The next window starts empty.
	clk.Advance(time.Minute)
	if v, _ := h.Check(0, 9000, clk.Now()); v != routing.BudgetAffordable {
		t.Fatalf("next window: %v", v)
	}
}

// TestConcurrentReservationsNeverOvershoot: 50 concurrent requests against
// a 10k-tokens-per-minute connection never hold more than the limit plus
// one request's estimate.
func TestConcurrentReservationsNeverOvershoot(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", TokensPerMinute: 10000})
	const est = 1700
	var held, maxHeld atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
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
		}()
	}
	close(gate)
	wg.Wait()
	if m := maxHeld.Load(); m > 10000+est || m == 0 {
		t.Fatalf("held at most %d tokens against a 10000 limit", m)
	}
}

func TestHeaderLimits(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", TokensPerMinute: 10000}, SlotSpec{Connection: "p/b", Model: "m", TokensPerMinute: 2000})
	obs := &messages.QuotaObservation{N: 2}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit, Limit: 5000, Window: time.Minute}
	obs.Readings[1] = messages.QuotaReading{Dimension: messages.DimDailyRequests, Flags: messages.HasLimit, Limit: 3, Window: 24 * time.Hour}
	h.ObserveLimits(0, obs)
	h.ObserveLimits(1, obs)
	waitSnap(t, h, func(s *Snapshot) bool { return s.Slots[0].Tokens.Limit == 5000 })
	if l := h.Limits(0); l.Tokens != 5000 || l.TokensSource != "response_headers" || l.Requests != 0 {
		t.Fatalf("provider limit below configured: %+v", l)
	}
	// The configured limit below the provider's stays: the operator's share.
	time.Sleep(20 * time.Millisecond)
	if l := h.Limits(1); l.Tokens != 2000 || l.TokensSource != "configured" {
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
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", RequestsPerMinute: 5})
	now := clk.Now()
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
		t.Fatalf("first slot: %v", v)
	}
	first, err := h.AddSlots([]SlotSpec{{Connection: "q/b", Model: "n", RequestsPerMinute: 1}})
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
	h.root.Send(h.pid, supervise.Crash{Reason: "after AddSlots"})
	h.Settle(&r, 10, false)
	waitSnap(t, h, func(s *Snapshot) bool { return len(s.Slots) == 2 && s.Slots[1].TotalTokens == 10 })
}

// TestSetConfiguredChangesLimits: new configured limits are in force when
// SetConfigured returns, and what the window used stays counted.
func TestSetConfiguredChangesLimits(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", RequestsPerMinute: 2})
	now := clk.Now()
	for i := 0; i < 2; i++ {
		if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
			t.Fatalf("request %d: %v", i, v)
		}
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetExhausted {
		t.Fatalf("third request under a limit of 2: %v", v)
	}
	if err := h.SetConfigured(0, 0, 3); err != nil {
		t.Fatal(err)
	}
	if l := h.Limits(0); l.Requests != 3 || l.RequestsSource != "configured" {
		t.Fatalf("limits after SetConfigured: %+v", l)
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetAffordable {
		t.Fatalf("third request under the raised limit of 3: %v", v)
	}
	if _, v, _ := h.Reserve(0, 1, now); v != routing.BudgetExhausted {
		t.Fatalf("fourth request: %v (the window's count was lost)", v)
	}
	if err := h.SetConfigured(0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r, v, _ := h.Reserve(0, 1, now); v != routing.BudgetUnconfigured || r.Active {
		t.Fatalf("without limits: %v active=%v", v, r.Active)
	}
}
