package tenantlimit

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
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

// BenchmarkReserveSettleAllWindows is BenchmarkReserveSettleSteady with
// every rate window set (requests and tokens per minute, hour and day):
// the cost of several windows at once. Requests are small (100 tokens
// reserved, 90 used) so that no window fills within the run.
func BenchmarkReserveSettleAllWindows(b *testing.B) {
	p := steadyPolicy
	p.RequestsPerHour, p.RequestsPerDay, p.TokensPerHour, p.TokensPerDay = 1<<32, 1<<32, 1<<32, 1<<32
	benchSteady(b, p, 100, 90)
}

// BenchmarkReserveSettleSteady is BenchmarkReserveSettle with time
// moving on 20 µs a request (50,000 requests a second, under the limits),
// so every request is admitted, as on a busy gateway: BenchmarkReserveSettle's
// frozen clock fills the token window after about a million requests and
// measures refusals from then on.
func BenchmarkReserveSettleSteady(b *testing.B) {
	benchSteady(b, steadyPolicy, 1000, 900)
}

// benchSteady reserves tokens and settles used for one tenant of policy p,
// time moving on 20 µs a request; every request must be admitted.
func benchSteady(b *testing.B, p tenantpolicy.Policy, tokens, used int64) {
	h, clk := start(b, TenantSpec{ID: id("key_a"), Name: "a", Policy: p})
	now := clk.Now()
	req := &tenantlimit.Request{Tokens: tokens, Cost: 5000}
	b.ReportAllocs()
	defer testutil.CPUPerOp(b)()
	for b.Loop() {
		now = now.Add(20 * time.Microsecond)
		r, res := h.Reserve(id("key_a"), req, now)
		if !res.Allowed {
			b.Fatalf("refused: %v", res.Kind)
		}
		r.Settle(now, tenantlimit.Usage{Tokens: used, Cost: 4000, Known: true})
	}
}

var steadyPolicy = tenantpolicy.Policy{RequestsPerMinute: 1 << 32, TokensPerMinute: 1 << 32, MaxConcurrent: 1 << 20, DailyBudgetUSD: 1e9, MonthlyBudgetUSD: 1e9}

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
