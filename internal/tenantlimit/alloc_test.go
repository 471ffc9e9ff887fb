//go:build !race

package tenantlimit

import (
	"testing"

	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// TestReserveAllocAllocatesNothing: reserving, rendering headers and
// settling run on every request of a limited tenant.
func TestReserveAllocAllocatesNothing(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 30, MaxConcurrent: 100, DailyBudgetUSD: 1e6, AllowedModels: []string{"claude-*"}})
	req := &Request{Model: []byte("claude-sonnet-4-5"), Tokens: 500, Cost: 1000}
	if a := testing.AllocsPerRun(500, func() {
		r, res := st.Reserve(t0, lim, req)
		h := res.Headers(OpenAI)
		_ = h.Value(h.Len() - 1)
		e := res.APIError()
		_ = e
		r.Settle(t0, Usage{Tokens: 100, Cost: 10, Known: true})
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
