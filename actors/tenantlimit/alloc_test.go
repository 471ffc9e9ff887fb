//go:build !race

package tenantlimit

import (
	"testing"

	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// TestReserveSettleAllocAllocatesNothing: the request path's check,
// reserve, headers and release.
func TestReserveSettleAllocAllocatesNothing(t *testing.T) {
	h, clk := start(t, TenantSpec{ID: id("key_a"), Name: "a", Policy: tenantpolicy.Policy{RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 30, MaxConcurrent: 64, DailyBudgetUSD: 1e6}})
	now := clk.Now()
	req := &tenantlimit.Request{Model: []byte("m"), Tokens: 1000, Cost: 5000}
	if a := testing.AllocsPerRun(500, func() {
		r, res := h.Reserve(id("key_a"), req, now)
		hd := res.Headers(tenantlimit.OpenAI)
		_ = hd.Len()
		h.Settle(&r, tenantlimit.Usage{Tokens: 600, Cost: 3000, Known: true}, now)
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
