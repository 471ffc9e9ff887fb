//go:build !race

package transport

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/config"
)

// TestFrontDoorChecksAllocateNothing: what every request now passes before
// routing (the route lookup, the oversize mark check, the Host and Origin
// policy, the body deadline from its declared length) allocates nothing.
func TestFrontDoorChecksAllocateNothing(t *testing.T) {
	f, err := config.DecodeFile(strings.NewReader(`{"providers":{"p":{"base_url":"http://127.0.0.1:9/v1","apis":["chat"],"auth":"none","connections":{"c":{}}}},
		"models":{"m":{"targets":[{"connection":"p/c"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.LoadEnv(map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789",
		"OMNIROUTE_CORS_ORIGINS": "http://app.test:5173"})
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	g, err := New(system, Options{Env: env, File: f})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, origin := range []string{"", "http://app.test:5173"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/v1/chat/completions")
		ctx.Request.Header.SetHost("127.0.0.1:20128")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.SetContentLength(2000)
		if origin != "" {
			ctx.Request.Header.Set("Origin", origin)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			ctx.Response.Header.Reset() // as fasthttp does between requests
			g.forgetOversize(&ctx)
			if routeOf(ctx.Path()) != routeChat || !g.guardBrowser(&ctx, routeChat, []byte("rid")) {
				t.Fatal("refused")
			}
			if rc := g.headerReceived(&ctx.Request.Header); rc.ReadTimeout <= 0 {
				t.Fatal("no body deadline")
			}
		})
		if allocs != 0 {
			t.Fatalf("origin %q: the front-door checks allocate %v times per request", origin, allocs)
		}
	}
}
