package ledger

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the ledger actor: after a panic
// inside Receive the fresh actor settles and republishes again, the
// reservations in the handle still bind, the header limit it had learnt
// is kept when the other dimension changes, and no tick outlives it.
func TestRestartAfterPanic(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(10000, 100)})
	watch := testutil.WatchActors(t, h.root.ActorSystem(), h.pid.Id)
	obs := func(dim messages.QuotaDimension, limit float64) *messages.QuotaObservation {
		o := &messages.QuotaObservation{N: 1}
		o.Readings[0] = messages.QuotaReading{Dimension: dim, Flags: messages.HasLimit, Limit: limit, Window: time.Minute}
		return o
	}
	h.ObserveLimits(0, obs(messages.DimTokens, 5000))
	waitSnap(t, h, func(s *Snapshot) bool { return s.Slots[0].Tokens.Limit == 5000 })
	r, _, _ := h.Reserve(0, 4000, clk.Now())

	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	if _, b, _ := h.Reserve(0, 2000, clk.Now()); b != routing.BudgetInsufficient {
		t.Fatalf("the reservation held before the restart no longer binds: %v", b)
	}
	// The fresh actor still knows the header token limit when only the
	// request limit changes.
	h.ObserveLimits(0, obs(messages.DimRequests, 50))
	waitSnap(t, h, func(s *Snapshot) bool { return s.Slots[0].Requests != nil && s.Slots[0].Requests.Limit == 50 })
	if l := h.Limits(0); l.Windows[rolling.Tokens][rolling.Minute] != 5000 || l.Source[rolling.Tokens][rolling.Minute] != SourceHeaders {
		t.Fatalf("the restart forgot the header token limit: %+v", l)
	}
	h.Settle(&r, 100, false)
	if s := published(t, h, clk); s.Slots[0].Tokens.Used != 100 {
		t.Fatalf("the fresh actor published %d tokens used, want the settled 100", s.Slots[0].Tokens.Used)
	}
	h.Stop()
	watch.NoTimerLeft(t, clk, 2*PublishInterval)
}
