package tenantlimit

import (
	"testing"

	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

var benchPolicy = tenantpolicy.Policy{RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 30, MaxConcurrent: 1 << 20, DailyBudgetUSD: 1e8, MonthlyBudgetUSD: 1e8}

// BenchmarkReserveSettle is the fast path of one request of a limited
// tenant: table lookup, one-step reservation of every counter, release.
func BenchmarkReserveSettle(b *testing.B) {
	h, clk := start(b, TenantSpec{ID: id("key_a"), Name: "a", Policy: benchPolicy})
	now := clk.Now()
	req := &tenantlimit.Request{Tokens: 1000, Cost: 5000}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := h.Reserve(id("key_a"), req, now)
		r.Settle(now, tenantlimit.Usage{Tokens: 900, Cost: 4000, Known: true})
	}
}

// BenchmarkReserveSettleAllWindows is BenchmarkReserveSettle with every
// rate window set (requests and tokens per minute, hour and day): the cost
// of several windows at once.
func BenchmarkReserveSettleAllWindows(b *testing.B) {
	p := benchPolicy
	p.RequestsPerHour, p.RequestsPerDay, p.TokensPerHour, p.TokensPerDay = 1<<30, 1<<30, 1<<30, 1<<30
	h, clk := start(b, TenantSpec{ID: id("key_a"), Name: "a", Policy: p})
	now := clk.Now()
	req := &tenantlimit.Request{Tokens: 1000, Cost: 5000}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := h.Reserve(id("key_a"), req, now)
		r.Settle(now, tenantlimit.Usage{Tokens: 900, Cost: 4000, Known: true})
	}
}

// BenchmarkReserveSettleParallel: every goroutine on the same tenant, the
// worst case of contention on one record.
func BenchmarkReserveSettleParallel(b *testing.B) {
	h, clk := start(b, TenantSpec{ID: id("key_a"), Name: "a", Policy: benchPolicy})
	now := clk.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := &tenantlimit.Request{Tokens: 1000, Cost: 5000}
		for pb.Next() {
			r, _ := h.Reserve(id("key_a"), req, now)
			r.Settle(now, tenantlimit.Usage{Tokens: 900, Cost: 4000, Known: true})
		}
	})
}

// BenchmarkUnlimitedTenant is the cost for a tenant without a policy.
func BenchmarkUnlimitedTenant(b *testing.B) {
	h, clk := start(b)
	now := clk.Now()
	req := &tenantlimit.Request{Tokens: 1000}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := h.Reserve(id("key_x"), req, now)
		r.Settle(now, tenantlimit.Usage{})
	}
}
