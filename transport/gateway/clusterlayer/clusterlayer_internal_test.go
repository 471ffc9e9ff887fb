package clusterlayer

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/omniroute/gateway/actors/credit"
	"github.com/omniroute/gateway/internal/clock"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// TestGrainBudgetsComeFromThisNodesConfig: the budget a grain hosted here
// serves is this node's configuration and keys, by grain key; a key the
// node does not know, or a window it does not limit, is no budget.
func TestGrainBudgetsComeFromThisNodesConfig(t *testing.T) {
	l := &Layer{}
	var slot rolling.Limits
	slot[rolling.Requests] = [rolling.NumPeriods]int64{60, 0, 1500}
	l.slotLimits = func(s int) (rolling.Limits, bool) { return slot, s == 0 }
	l.ledgerKeys.Store("ledger/p/a/m-1", 0)
	for key, want := range map[string]struct {
		b  credit.Budget
		ok bool
	}{
		"ledger/p/a/m-1/requests": {credit.Budget{Windows: slot[rolling.Requests]}, true},
		"ledger/p/a/m-1/tokens":   {credit.Budget{}, false}, // no token window
		"ledger/p/a/m-2/requests": {credit.Budget{}, false}, // not a budget of this node
		"tenant/abc/requests":     {credit.Budget{}, false}, // the tenant layer is not open yet
	} {
		if b, ok := l.budget(key); ok != want.ok || (ok && b != want.b) {
			t.Errorf("%s: %+v %v, want %+v %v", key, b, ok, want.b, want.ok)
		}
	}
	p := &tenantpolicy.Policy{RequestsPerMinute: 10, TokensPerDay: 50000, MaxConcurrent: 3, DailyBudgetUSD: 2}
	l.Follow(sharesOnly{&ikeys.Shares{Policies: map[string]*tenantpolicy.Policy{"abc": p}}})
	for key, want := range map[string]struct {
		b  credit.Budget
		ok bool
	}{
		"tenant/abc/requests":    {credit.Budget{Windows: [rolling.NumPeriods]int64{10, 0, 0}}, true},
		"tenant/abc/tokens":      {credit.Budget{Windows: [rolling.NumPeriods]int64{0, 0, 50000}}, true},
		"tenant/abc/concurrency": {credit.Budget{Limit: 3}, true},
		"tenant/abc/spend/day":   {credit.Budget{Limit: pricing.Nano(2) / credit.SpendUnit, Period: credit.PerDay}, true},
		"tenant/abc/spend/month": {credit.Budget{}, false},
		"tenant/xyz/requests":    {credit.Budget{}, false}, // a key this node has not heard of
		"tenant/abc/other":       {credit.Budget{}, false},
	} {
		if b, ok := l.budget(key); ok != want.ok || (ok && b != want.b) {
			t.Errorf("%s: %+v %v, want %+v %v", key, b, ok, want.b, want.ok)
		}
	}
}

// sharesOnly is a tenant layer of which only the shares are read.
type sharesOnly struct{ shares *ikeys.Shares }

func (s sharesOnly) Shares() *ikeys.Shares { return s.shares }

// TestBriefHidesMembers: what the cluster's health section shows a
// caller the management routes refuse has the member count and no
// member's address or id.
func TestBriefHidesMembers(t *testing.T) {
	full := map[string]any{"mode": "etcd", "name": "prod", "self": "node-7f3a", "address": "10.0.0.5:7946",
		"members": []icluster.Member{{ID: "node-7f3a", Address: "10.0.0.5:7946"}, {ID: "node-9b1c", Address: "10.0.0.6:7946"}}}
	b, _ := json.Marshal((&Layer{}).Brief(full))
	if strings.Contains(string(b), "10.0.0.") || strings.Contains(string(b), "node-") || !strings.Contains(string(b), `"memberCount":2`) ||
		!strings.Contains(string(b), `"name":"prod"`) {
		t.Fatalf("brief cluster: %s", b)
	}
}

// singleNode is a gateway being composed with cluster mode off.
type singleNode struct {
	env      config.Env
	attached bool
}

func (s *singleNode) Clock() clock.Clock   { return clock.Real{} }
func (s *singleNode) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }
func (s *singleNode) Env() config.Env      { return s.env }
func (s *singleNode) AttachCluster(Port)   { s.attached = true }

// TestSingleNodeHasNoClusterLayer: with cluster mode off (the default)
// nothing is joined or attached, so the pipeline checks one nil pointer,
// and the install secret stays the node's own.
func TestSingleNodeHasNoClusterLayer(t *testing.T) {
	env, err := config.LoadEnv(map[string]string{"OMNIROUTE_TENANT_SECRET": "0123456789abcdef0123"})
	if err != nil {
		t.Fatal(err)
	}
	src := &singleNode{env: env}
	l, err := Start(nil, src, Routing{})
	if l != nil || err != nil || src.attached {
		t.Fatalf("Start on a single node: %v %v, attached %v", l, err, src.attached)
	}
	if _, on := Config(&env); on {
		t.Fatal("Config says cluster mode is on")
	}
	got, err := ShareInstallSecret(&env)
	if got != "" || err != nil || env.Server.TenantSecret != "0123456789abcdef0123" {
		t.Fatalf("ShareInstallSecret on a single node: %q %v, secret %q", got, err, env.Server.TenantSecret)
	}
}
