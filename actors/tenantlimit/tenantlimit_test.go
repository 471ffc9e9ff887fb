package tenantlimit

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

func id(s string) tenant.ID {
	var i tenant.ID
	copy(i[:], s)
	return i
}

func start(t testing.TB, specs ...TenantSpec) (*Handle, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	h, err := Spawn(testutil.ActorSystem(t), Options{Clock: clk, Tenants: specs, PublishInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h, clk
}

// waitSnap waits until the published snapshot matches cond, sending the
// actor its publish tick between looks: the tick's timer runs on the
// tests' fake clock, which they move only where time matters.
func waitSnap(t *testing.T, h *Handle, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	return testutil.UntilSnapshot(t, h.Snapshot, func() { h.root.Send(h.pid, tick{}) }, cond)
}

func TestReserveThroughTheTable(t *testing.T) {
	h, clk := start(t,
		TenantSpec{ID: id("key_a"), Name: "a", Policy: tenantpolicy.Policy{RequestsPerMinute: 2}},
		TenantSpec{ID: id("key_free"), Name: "free", Policy: tenantpolicy.Policy{Class: "batch", Weight: 3}},
		TenantSpec{ID: id("key_b"), Name: "b", Policy: tenantpolicy.Policy{DailyBudgetUSD: 1}, DaySpent: pricing.Nano(1)})
	now := clk.Now()
	// Unknown and unlimited tenants pass with nothing held and no headers.
	for _, who := range []tenant.ID{id("key_nobody"), id("key_free")} {
		r, res := h.Reserve(who, &tenantlimit.Request{Tokens: 1e6}, now)
		if !res.Allowed || r.Active() || res.Limited() {
			t.Fatalf("%v: %+v", who, res)
		}
	}
	for i := 0; i < 2; i++ {
		if _, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, now); !res.Allowed {
			t.Fatalf("request %d refused: %v", i, res.Kind)
		}
	}
	if _, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, now); res.Kind != tenantlimit.KindRequests {
		t.Fatalf("third: %v", res.Kind)
	}
	// The seed stands for what b spent before a restart.
	if _, res := h.Reserve(id("key_b"), &tenantlimit.Request{}, now); res.Kind != tenantlimit.KindDailyBudget {
		t.Fatalf("seeded budget: %v", res.Kind)
	}
	// A policy change keeps the counters: a's two requests still count.
	h.SetTenants([]TenantSpec{{ID: id("key_a"), Name: "a2", Policy: tenantpolicy.Policy{RequestsPerMinute: 3}}})
	waitSnap(t, h, func(s *Snapshot) bool { return len(s.Tenants) == 1 && s.Tenants[0].Name == "a2" })
	if _, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, now); !res.Allowed || res.Requests.Remaining != 0 {
		t.Fatalf("after raising the limit: %+v", res)
	}
	if _, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, now); res.Allowed {
		t.Fatal("counters were reset by a policy change")
	}
	// b left the set: unlimited now (a revoked key is refused by
	// authentication before it gets here).
	if _, res := h.Reserve(id("key_b"), &tenantlimit.Request{}, now); !res.Allowed {
		t.Fatal("removed tenant still limited")
	}
	s := waitSnap(t, h, func(s *Snapshot) bool {
		v, ok := s.Tenant(id("key_a"))
		return ok && v.Refused["requests_per_minute"] == 2
	})
	if v, _ := s.Tenant(id("key_a")); v.Admitted != 3 || v.Requests == nil || v.Requests.Limit != 3 || v.Policy.RequestsPerMinute != 3 {
		t.Fatalf("view %+v", v)
	}
}

// TestSixtyFourRequestsAgainstACapOfTen: 64 goroutines send requests for a
// tenant with max_concurrent 10 and a tight token budget on a clock that
// does not move. Never more than 10 run at once, and the tokens used stay
// within the budget plus one request's max_tokens.
func TestSixtyFourRequestsAgainstACapOfTen(t *testing.T) {
	const (
		tpm       = 20000
		input     = 150
		maxTokens = 850
	)
	h, clk := start(t, TenantSpec{ID: id("key_agents"), Name: "agents", Policy: tenantpolicy.Policy{MaxConcurrent: 10, TokensPerMinute: tpm}})
	var running, peak, used, admitted, refusedCap, refusedTok atomic.Int64
	testutil.AtOnce(64, func(g int) {
		for i := 0; i < 40; i++ {
			r, res := h.Reserve(id("key_agents"), &tenantlimit.Request{Tokens: input + maxTokens}, clk.Now())
			if !res.Allowed {
				switch res.Kind {
				case tenantlimit.KindConcurrency:
					refusedCap.Add(1)
				case tenantlimit.KindTokens:
					refusedTok.Add(1)
				default:
					t.Errorf("refused for %v", res.Kind)
				}
				runtime.Gosched()
				continue
			}
			admitted.Add(1)
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			runtime.Gosched() // "the provider works"
			out := int64(g*7+i*13) % (maxTokens + 1)
			running.Add(-1)
			used.Add(input + out)
			h.Settle(&r, tenantlimit.Usage{Tokens: input + out, Known: true}, clk.Now())
			h.Settle(&r, tenantlimit.Usage{Tokens: input + out, Known: true}, clk.Now()) // released once
		}
	})
	if p := peak.Load(); p > 10 || p < 1 {
		t.Fatalf("%d requests ran at once against a cap of 10", p)
	}
	if u := used.Load(); u > tpm+maxTokens {
		t.Fatalf("used %d tokens against a budget of %d (+%d allowed)", u, tpm, maxTokens)
	}
	if refusedTok.Load() == 0 || admitted.Load() < tpm/(input+maxTokens) {
		t.Fatalf("the budget was not the constraint: admitted %d, refused for tokens %d, for the cap %d", admitted.Load(), refusedTok.Load(), refusedCap.Load())
	}
	s := waitSnap(t, h, func(s *Snapshot) bool {
		v, _ := s.Tenant(id("key_agents"))
		return v.Settled == uint64(admitted.Load())
	})
	if v, _ := s.Tenant(id("key_agents")); v.InFlight != 0 || v.SettledTokens != used.Load() {
		t.Fatalf("left over: %+v", v)
	}
}

func TestRestartKeepsTheTable(t *testing.T) {
	h, clk := start(t, TenantSpec{ID: id("key_a"), Name: "a", Policy: tenantpolicy.Policy{MaxConcurrent: 1}})
	r, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, clk.Now())
	if !res.Allowed {
		t.Fatal(res.Kind)
	}
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	// The fresh actor applies the next set on the same counters.
	h.SetTenants([]TenantSpec{{ID: id("key_a"), Name: "after", Policy: tenantpolicy.Policy{MaxConcurrent: 1}}})
	waitSnap(t, h, func(s *Snapshot) bool {
		return len(s.Tenants) == 1 && s.Tenants[0].Name == "after" && s.Tenants[0].InFlight == 1
	})
	if _, res := h.Reserve(id("key_a"), &tenantlimit.Request{}, clk.Now()); res.Kind != tenantlimit.KindConcurrency {
		t.Fatalf("the held slot was lost in the restart: %v", res.Kind)
	}
	r.Settle(clk.Now(), tenantlimit.Usage{})
	// Ticks keep coming after the restart, on the clock.
	before := h.Snapshot().At
	clk.Advance(time.Second)
	testutil.Until(t, "a tick of the fresh actor", func() bool { return h.Snapshot().At.After(before) })
}
