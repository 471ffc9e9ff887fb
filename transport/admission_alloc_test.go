//go:build !race

package transport

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/tenant"
)

// Allocation tests run without -race (CI reruns -run Alloc without it).

// allocGateway is a gateway with one model whose provider is never
// called, and the environment variables given as name, value pairs.
func allocGateway(t testing.TB, vars ...string) *Gateway {
	t.Helper()
	f, err := config.DecodeFile(strings.NewReader(`{"providers":{"p":{"base_url":"http://127.0.0.1:9/v1","apis":["chat"],"auth":"none","connections":{"c":{}}}},
		"models":{"m":{"targets":[{"connection":"p/c"}]}},"auth":{"mode":"open","allow_anonymous":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789"}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	env, err := config.LoadEnv(m)
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	g, err := New(system, Options{Env: env, File: f})
	if err != nil {
		system.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(); system.Shutdown() })
	return g
}

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
	before := g.ingest.SlowPathRequests()
	allocs := testing.AllocsPerRun(1000, func() {
		if v := ctx.UserValue(admissionKey{}); v != nil {
			t.Fatal("unexpected decision")
		}
		l, bypass, e := g.byteStage(&ctx, id, nil)
		if l != nil || bypass || e != nil {
			t.Fatalf("small body: lease %v bypass %v error %v", l, bypass, e)
		}
	})
	if allocs != 0 {
		t.Fatalf("the admission decision for a small body allocates %v times", allocs)
	}
	if n := g.ingest.SlowPathRequests() - before; n != 0 {
		t.Fatalf("the admission decision for a small body sent %d messages", n)
	}
	if g.ingest.InflightBytes() != 0 || g.ingest.ActiveHeavy() != 0 {
		t.Fatal("a small body reserved budget")
	}
}
