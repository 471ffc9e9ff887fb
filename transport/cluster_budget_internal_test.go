package transport

import (
	"testing"

	"github.com/omniroute/gateway/actors/credit"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// TestGrainBudgetsComeFromThisNodesConfig: the budget a grain hosted here
// serves is this node's configuration and keys, by grain key; a key the
// node does not know, or a window it does not limit, is no budget.
func TestGrainBudgetsComeFromThisNodesConfig(t *testing.T) {
	cs := &clusterSys{}
	var slot rolling.Limits
	slot[rolling.Requests] = [rolling.NumPeriods]int64{60, 0, 1500}
	cs.slotLimits = func(s int) (rolling.Limits, bool) { return slot, s == 0 }
	cs.ledgerKeys.Store("ledger/p/a/m-1", 0)
	for key, want := range map[string]struct {
		b  credit.Budget
		ok bool
	}{
		"ledger/p/a/m-1/requests": {credit.Budget{Windows: slot[rolling.Requests]}, true},
		"ledger/p/a/m-1/tokens":   {credit.Budget{}, false}, // no token window
		"ledger/p/a/m-2/requests": {credit.Budget{}, false}, // not a budget of this node
		"tenant/abc/requests":     {credit.Budget{}, false}, // the tenant layer is not open yet
	} {
		if b, ok := cs.budget(key); ok != want.ok || (ok && b != want.b) {
			t.Errorf("%s: %+v %v, want %+v %v", key, b, ok, want.b, want.ok)
		}
	}
	p := &tenantpolicy.Policy{RequestsPerMinute: 10, TokensPerDay: 50000, MaxConcurrent: 3, DailyBudgetUSD: 2}
	var ts Tenants = sharesOnly{shares: &ikeys.Shares{Policies: map[string]*tenantpolicy.Policy{"abc": p}}}
	cs.ten.Store(&ts)
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
		if b, ok := cs.budget(key); ok != want.ok || (ok && b != want.b) {
			t.Errorf("%s: %+v %v, want %+v %v", key, b, ok, want.b, want.ok)
		}
	}
}

// sharesOnly is a tenant layer of which only the shares are read.
type sharesOnly struct {
	Tenants
	shares *ikeys.Shares
}

func (s sharesOnly) Shares() *ikeys.Shares { return s.shares }
