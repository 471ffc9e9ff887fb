package transport_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/actors/gateway"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/testutil"
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
// creating, listing and revoking keys. The new budget is in force at once,
// counting from zero; once the read returns, the tenant's earlier spend
// is added, and the spent budget refuses the next request.
func TestSlowSpendReadDoesNotBlockKeyManagement(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ten-gpt": {CompletionTokens: 5}})
	db, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &heldSpendStore{DB: db, entered: make(chan struct{}, 1), release: make(chan struct{})}
	clk := clock.NewFake(time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, tenantsFile(t), nil, gateway.Options{Clock: clk, Store: st})
	t.Cleanup(st.Release) // before the gateway stops (cleanups run last first)

	// An unlimited key that already spent $1.50 today.
	k := g.createKey(`{"name":"spender"}`)
	if err := db.InsertRequests(context.Background(), []store.Record{{Time: clk.Now().Add(-time.Hour), RequestID: "req_earlier",
		TenantID: k.Key.TenantID, TenantName: "spender", Model: "ten-gpt", Status: 200, CostNano: pricing.Nano(1.5)}}); err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + k.Secret}

	st.held.Store(true)
	if r := g.post("/api/keys/spender/policy", `{"daily_budget_usd":1}`); r.status != 200 {
		t.Fatalf("adding a budget while the spend read is held: %d %s", r.status, r.body)
	}
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("adding a budget did not read the tenant's spend")
	}
	// The read is held from here until Release: key management answers.
	other := g.createKey(`{"name":"other","requests_per_minute":5}`)
	if r := g.get("/api/keys"); r.status != 200 || !strings.Contains(string(r.body), `"spender"`) || !strings.Contains(string(r.body), `"other"`) {
		t.Fatalf("list while the spend read is held: %d %s", r.status, r.body)
	}
	if r := g.post("/api/keys/other/revoke", ""); r.status != 200 {
		t.Fatalf("revoke while the spend read is held: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), "Authorization", "Bearer "+other.Secret); r.status != 401 {
		t.Fatalf("the revoked key: %d %s", r.status, r.body)
	}
	// The budget is in force, from zero until the read returns.
	lh := g.gw.TenantLimits()
	spent := func() (float64, bool) {
		for _, v := range lh.Snapshot().Tenants {
			if v.ID == k.Key.TenantID {
				return v.DaySpentUSD, v.Policy != nil && v.Policy.DailyBudgetUSD == 1
			}
		}
		return 0, false
	}
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
