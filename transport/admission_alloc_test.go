//go:build !race

package transport

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/intake"
)

// Allocation tests run without -race (CI reruns -run Alloc without it).

// TestAdmissionDecisionForSmallBodyAllocatesNothing: the byte stage for a
// body under the heavy threshold (and the check for a decision the
// ExpectHandler left) allocates nothing and sends the ingest actor no
// message.
func TestAdmissionDecisionForSmallBodyAllocatesNothing(t *testing.T) {
	g := allocGateway(t, "OMNIROUTE_API_KEY", "self-loop-key")
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/chat/completions")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.Header.SetContentLength(200 << 10)
	ctx.Request.Header.Set("Authorization", "Bearer caller-key")
	id := tenant.Anonymous
	before := g.intake.Ingest().SlowPathRequests()
	allocs := testing.AllocsPerRun(1000, func() {
		if intake.Decided(&ctx) {
			t.Fatal("unexpected decision")
		}
		l, bypass, e := g.intake.ByteStage(&ctx, id, nil)
		if l != nil || bypass || e != nil {
			t.Fatalf("small body: lease %v bypass %v error %v", l, bypass, e)
		}
	})
	if allocs != 0 {
		t.Fatalf("the admission decision for a small body allocates %v times", allocs)
	}
	if n := g.intake.Ingest().SlowPathRequests() - before; n != 0 {
		t.Fatalf("the admission decision for a small body sent %d messages", n)
	}
	if g.intake.Ingest().InflightBytes() != 0 || g.intake.Ingest().ActiveHeavy() != 0 {
		t.Fatal("a small body reserved budget")
	}
}
