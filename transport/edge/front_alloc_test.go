//go:build !race

package edge

import (
	"log/slog"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
)

// TestFrontDoorChecksAllocateNothing: what every request now passes before
// routing (the route lookup, the oversize mark check, the Host and Origin
// policy, the body deadline from its declared length) allocates nothing.
func TestFrontDoorChecksAllocateNothing(t *testing.T) {
	g := newTestEdge(t, "OMNIROUTE_CORS_ORIGINS", "http://app.test:5173").Edge
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
			i := Find(ctx.Path())
			if i < 0 || Endpoints[i].Route != Chat || !g.guardBrowser(&ctx, Chat, Endpoints[i].Guard, []byte("rid")) {
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

// nopPipeline records nothing: the serve loop's own allocations alone.
type nopPipeline struct{}

func (nopPipeline) Finished(Route, int, time.Duration)          {}
func (nopPipeline) Panicked(Route, string, string, any)         {}
func (nopPipeline) ExpectBody(*fasthttp.RequestCtx) (int, bool) { return 0, false }

// TestServeLoopAllocatesNothing: the whole serve loop (request id,
// routing, guards, the method check and the dispatch through the handler
// table) allocates nothing per request: the request id, which a handler
// call through a function value would move to the heap, is pooled.
func TestServeLoopAllocatesNothing(t *testing.T) {
	env, err := config.LoadEnv(map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var hs [NumHandlers]HandlerFunc
	var seen int
	for h := range hs {
		hs[h] = func(ctx *fasthttp.RequestCtx, r Request) bool {
			seen += len(r.RID)
			ctx.SetStatusCode(200)
			return false
		}
	}
	e, err := New(Config{Env: &env, Log: slog.New(slog.DiscardHandler), Clock: clock.Real{}, Pipeline: nopPipeline{}, Handlers: hs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, path := range []string{ChatPath, MessagesPath, ModelsPath} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.SetHost("127.0.0.1:20128")
		e.Handler(&ctx) // warm the pools
		allocs := testing.AllocsPerRun(1000, func() {
			ctx.Response.Header.Reset()
			e.Handler(&ctx)
		})
		if allocs != 0 || ctx.Response.StatusCode() != 200 || seen == 0 {
			t.Fatalf("%s: the serve loop allocates %v times per request (status %d)", path, allocs, ctx.Response.StatusCode())
		}
	}
}
