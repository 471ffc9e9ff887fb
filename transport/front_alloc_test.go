//go:build !race

package transport

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestFrontDoorChecksAllocateNothing: what every request now passes before
// routing (the route lookup, the oversize mark check, the Host and Origin
// policy, the body deadline from its declared length) allocates nothing.
func TestFrontDoorChecksAllocateNothing(t *testing.T) {
	g := allocGateway(t, "OMNIROUTE_CORS_ORIGINS", "http://app.test:5173")
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
