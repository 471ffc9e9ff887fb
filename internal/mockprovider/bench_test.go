package mockprovider

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkHandler measures the request path without the network: the
// default non-streaming answer must stay allocation-light because the
// gateway's benchmark uses this mock as its "direct" baseline.
func BenchmarkHandler(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the benchmark."}]}`)
	for _, tc := range []struct {
		name, path string
		beh        Behavior
	}{
		{"chat", "/v1/chat/completions", Behavior{}},
		{"messages", "/v1/messages", Behavior{}},
		{"responses", "/v1/responses", Behavior{}},
		{"chat openai-ratelimit", "/v1/chat/completions", Behavior{RateLimit: RateLimitSpec{Family: FamilyOpenAI}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := New(Options{Default: tc.beh})
			h := srv.Handler()
			var req fasthttp.Request
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI(tc.path)
			req.Header.SetContentType("application/json")
			req.SetBody(body)
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}
