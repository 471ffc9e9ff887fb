//go:build !race

package transport

import "testing"

// TestTenantLimitFastPathAllocatesNothing: authenticating a run-time key,
// reserving all of its counters, rendering its rate-limit headers and
// settling allocate nothing.
func TestTenantLimitFastPathAllocatesNothing(t *testing.T) {
	g, c, key := tenantFastPath(t)
	tenantRequest(t, g, c, key) // warm the header buffers
	if a := testing.AllocsPerRun(1000, func() { tenantRequest(t, g, c, key) }); a != 0 {
		t.Fatalf("the tenant fast path allocates %.1f times per request", a)
	}
	if got := string(c.ctx.Response.Header.Peek("x-ratelimit-limit-requests")); got != "4294967296" {
		t.Fatalf("x-ratelimit-limit-requests %q", got)
	}
}
