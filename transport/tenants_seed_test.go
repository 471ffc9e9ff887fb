package transport_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/actors/requestlog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/store/sqlite/sqlitetest"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport/gateway"
)

// heldSpendStore is the real SQLite store whose spend read, once held,
// blocks until the test releases it, whatever its context says: a read
// as slow as a wedged database.
type heldSpendStore struct {
	*sqlite.DB
	held     atomic.Bool
	entered  chan struct{} // one value per held read that started
	release  chan struct{}
	released sync.Once
}

func (s *heldSpendStore) Spend(ctx context.Context, since time.Time) (map[string]int64, error) {
	if s.held.Load() {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
	}
	return s.DB.Spend(ctx, since)
}

func (s *heldSpendStore) Release() { s.released.Do(func() { close(s.release) }) }

// TestSlowSpendReadDoesNotBlockKeyManagement: while the read of what a
// tenant already spent is held (a budget added to a key makes the
// limiter read it), key management answers: the policy change itself,
// creating, listing, rotating and revoking keys. The new budget is in
// force at once, counting from zero; once the read returns, the tenant's
// earlier spend is added, and the spent budget refuses the next request.
func TestSlowSpendReadDoesNotBlockKeyManagement(t *testing.T) {
	g, st, clk := startSeedGateway(t)

	// An unlimited key that already spent $1.50 today.
	k := g.createKey(`{"name":"spender"}`)
	spentEarlier(t, st, clk, k, 1.5)
	auth := []string{"Authorization", "Bearer " + k.Secret}

	st.held.Store(true)
	if r := g.post("/api/keys/spender/policy", `{"daily_budget_usd":1}`); r.status != 200 {
		t.Fatalf("adding a budget while the spend read is held: %d %s", r.status, r.body)
	}
	testutil.Recv(t, "adding a budget reading the tenant's spend", st.entered)
	// The read is held from here until Release: key management answers.
	other := g.createKey(`{"name":"other","requests_per_minute":5}`)
	if r := g.get("/api/keys"); r.status != 200 || !strings.Contains(string(r.body), `"spender"`) || !strings.Contains(string(r.body), `"other"`) {
		t.Fatalf("list while the spend read is held: %d %s", r.status, r.body)
	}
	third := g.createKey(`{"name":"third"}`)
	if r := g.post("/api/keys/third/rotate", ""); r.status != 200 {
		t.Fatalf("rotate while the spend read is held: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), "Authorization", "Bearer "+third.Secret); r.status != 401 {
		t.Fatalf("the rotated key's old secret: %d %s", r.status, r.body)
	}
	if r := g.post("/api/keys/other/revoke", ""); r.status != 200 {
		t.Fatalf("revoke while the spend read is held: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), "Authorization", "Bearer "+other.Secret); r.status != 401 {
		t.Fatalf("the revoked key: %d %s", r.status, r.body)
	}
	// The budget is in force, from zero until the read returns.
	spent := func() (float64, bool) { return g.daySpent(k, 1) }
	if usd, ok := spent(); !ok || usd != 0 {
		t.Fatalf("before the read returned: the budget in force %v, spent $%v", ok, usd)
	}
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), auth...); r.status != 200 {
		t.Fatalf("before the read returned: %d %s", r.status, r.body)
	}

	st.Release()
	testutil.Until(t, "the earlier spend to be added", func() bool { usd, _ := spent(); return usd >= 1.5 })
	r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), auth...)
	if r.status != 402 || jsonField(t, r.body, "error", "code") != "budget_exceeded" {
		t.Fatalf("after the read returned: %d %s", r.status, r.body)
	}
}

// TestFirstBudgetOnARateLimitedKeyCountsEarlierSpend: a key limited by its
// rates that gets a daily budget has its spend read too: what it spent
// before this gateway started counts against the new budget (a read
// that adds, not raises, would count the request settled here twice).
func TestFirstBudgetOnARateLimitedKeyCountsEarlierSpend(t *testing.T) {
	g, st, clk := startSeedGateway(t)
	k := g.createKey(`{"name":"limited","requests_per_minute":100}`)
	auth := []string{"Authorization", "Bearer " + k.Secret}
	// $0.60 before this gateway started, then a request settled here.
	spentEarlier(t, st, clk, k, 0.6)
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), auth...); r.status != 200 {
		t.Fatalf("before the budget: %d %s", r.status, r.body)
	}
	// The request log commits on its tick, on the gateway's fake clock.
	today := clk.Now().Truncate(24 * time.Hour)
	var stored float64
	testutil.Until(t, "the request's record to reach the store", func() bool {
		clk.Advance(requestlog.DefaultTick)
		m, err := st.DB.Spend(context.Background(), today)
		stored = pricing.USD(m[k.Key.TenantID])
		return err == nil && stored > 0.6
	})

	if r := g.post("/api/keys/limited/policy", `{"requests_per_minute":100,"daily_budget_usd":0.6}`); r.status != 200 {
		t.Fatalf("adding a budget: %d %s", r.status, r.body)
	}
	testutil.Until(t, "the earlier spend to be counted", func() bool { usd, _ := g.daySpent(k, 0.6); return usd >= 0.6 })
	if usd, _ := g.daySpent(k, 0.6); usd != stored {
		t.Fatalf("the budget counts $%v; the store holds $%v (the request settled here counted once)", usd, stored)
	}
	r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), auth...)
	if r.status != 402 || jsonField(t, r.body, "error", "code") != "budget_exceeded" {
		t.Fatalf("after the budget: %d %s", r.status, r.body)
	}
}

// startSeedGateway starts a gateway on a real SQLite store whose spend
// read the test can hold, on a fake clock, with the mock answering
// ten-gpt.
func startSeedGateway(t *testing.T) (*gwEnv, *heldSpendStore, *clock.Fake) {
	t.Helper()
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ten-gpt": {CompletionTokens: 5}})
	st := &heldSpendStore{DB: sqlitetest.Open(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
	clk := clock.NewFake(time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, tenantsFile(t), nil, gateway.Options{Clock: clk, Store: st})
	t.Cleanup(st.Release) // before the gateway stops (cleanups run last first)
	return g, st, clk
}

// spentEarlier stores a request of k's an hour ago that cost usd.
func spentEarlier(t *testing.T, st *heldSpendStore, clk *clock.Fake, k keyCreated, usd float64) {
	t.Helper()
	if err := st.DB.InsertRequests(context.Background(), []store.Record{{Time: clk.Now().Add(-time.Hour), RequestID: "req_earlier",
		TenantID: k.Key.TenantID, TenantName: k.Key.Name, Model: "ten-gpt", Status: 200, CostNano: pricing.Nano(usd)}}); err != nil {
		t.Fatal(err)
	}
}

// daySpent is what k's tenant spent today as the limiter's snapshot shows
// it, and whether its daily budget of budgetUSD is in force.
func (g *gwEnv) daySpent(k keyCreated, budgetUSD float64) (float64, bool) {
	for _, v := range g.gw.TenantLimits().Snapshot().Tenants {
		if v.ID == k.Key.TenantID {
			return v.DaySpentUSD, v.Policy != nil && v.Policy.DailyBudgetUSD == budgetUSD
		}
	}
	return 0, false
}
