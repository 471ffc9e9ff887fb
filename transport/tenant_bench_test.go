package transport

import (
	"testing"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/planner"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/limits"
)

// tenantFastPath builds a gateway with one run-time key whose policy
// limits everything, and a call for a chat request with that key: what
// the request path holds when it reaches the tenant layer. The request log
// is off, so the loop measures authentication and limits alone.
func tenantFastPath(t testing.TB) (*Gateway, *call, []byte) {
	t.Helper()
	g := allocGateway(t, "OMNIROUTE_REQUEST_LOG", "off")
	p := tenantpolicy.Policy{RequestsPerMinute: 1 << 32, TokensPerMinute: 1 << 32, MaxConcurrent: 1 << 20,
		DailyBudgetUSD: 1e8, MonthlyBudgetUSD: 1e8, AllowedModels: []string{"m"}, Weight: 2}
	_, secret, err := g.ten.Create("fast", p)
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/chat/completions")
	c := g.acquireCall(&ctx, edge.Chat, []byte("rid"), nil, time.Now())
	c.body = bytebufferpool.Get()
	c.body.B = append(c.body.B[:0], `{"model":"m","max_tokens":256,"messages":[{"role":"user","content":"hello there"}]}`...)
	if err := jsonscan.ScanRequest(c.body.B, &c.scan); err != nil {
		t.Fatal(err)
	}
	c.model = g.cat.Model(c.scan.Model)
	c.att.Target = c.model.Targets[0] // as if a provider answered: its headers are replaced
	t.Cleanup(c.release)
	return g, c, []byte(secret)
}

// tenantRequest is the tenant layer's part of one request: authenticate
// against the key snapshot, reserve every counter, set the rate-limit
// headers, settle.
func tenantRequest(tb testing.TB, g *Gateway, c *call, key []byte) {
	id, e, _ := g.lim.Identify(g.rc.Load().tenants, key, true)
	if e == nil {
		tb.Fatal("the key did not authenticate")
	}
	c.tenant, c.ten = id, limits.State{Entry: e}
	c.ctx.Response.Header.Reset()
	if !c.reserveTenant() {
		tb.Fatalf("refused: %s", c.ctx.Response.Body())
	}
	c.applyTenantHeaders()
	c.plan.Reset() // one attempt was taken: the planner's count
	c.plan.Begin(1, time.Time{}, planner.Limits{MaxAttempts: 1})
	c.plan.Take(0)
	c.plan.Metering = true
	c.finishTenant()
	if c.ten.Reserved() {
		tb.Fatal("not settled")
	}
}

// BenchmarkTenantLimitFastPath is the limit check of a request whose key
// has every limit set: key lookup (one SHA-256, one map read), the
// one-step reservation, the headers, the settle. No message, no
// allocation.
func BenchmarkTenantLimitFastPath(b *testing.B) {
	g, c, key := tenantFastPath(b)
	b.ReportAllocs()
	defer testutil.CPUPerOp(b)()
	for b.Loop() {
		tenantRequest(b, g, c, key)
	}
}

// TestTenantWeightsReachAdmission: a key's weight is what the ingest
// queue and the lanes' schedulers are given for its tenant; other tenants
// get the default share.
func TestTenantWeightsReachAdmission(t *testing.T) {
	g, _, key := tenantFastPath(t)
	id, _, _ := g.lim.Identify(g.rc.Load().tenants, key, true)
	if w := g.tenantWeight(id); w != 2 {
		t.Fatalf("ingest weight %d, want 2", w)
	}
	if w := g.laneWeight(id); w != 2 {
		t.Fatalf("lane weight %v, want 2", w)
	}
	other, _, _ := g.lim.Identify(g.rc.Load().tenants, []byte("someone-else"), true)
	if w := g.tenantWeight(other); w != 1 {
		t.Fatalf("default weight %d, want 1", w)
	}
	if _, err := g.ten.UpdatePolicy("fast", tenantpolicy.Policy{Weight: 5}); err != nil {
		t.Fatal(err)
	}
	if w := g.tenantWeight(id); w != 5 {
		t.Fatalf("weight after a policy update %d, want 5", w)
	}
}
