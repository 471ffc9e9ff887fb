package transport_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// BenchmarkChatWithQuotaRouting measures non-streaming and streaming chat
// requests through the gateway to the mock process over loopback on a
// budgeted two-target combo with OpenAI rate-limit headers, with the quota
// machinery on (rank, reserve, header parse, settle) and off.
func BenchmarkChatWithQuotaRouting(b *testing.B) {
	if err := mockAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{
		"m-bench":   {RateLimit: mockprovider.RateLimitSpec{Family: "openai", LimitTokens: 1 << 30, LimitRequests: 1 << 30}},
		"m-bench-b": {RateLimit: mockprovider.RateLimitSpec{Family: "openai", LimitTokens: 1 << 30, LimitRequests: 1 << 30}},
	}}); err != nil {
		b.Fatal(err)
	}
	js := `{"providers":{"oai":{"base_url":"http://` + mock.Addr + `/v1","apis":["chat"],"rate_limit_headers":"openai",
  "connections":{"a":{"api_key_env":"TEST_KEY_A","limits":{"tokens_per_minute":1000000000000}},"b":{"api_key_env":"TEST_KEY_B"}}}},
  "models":{"bench":{"targets":[{"connection":"oai/a","model":"m-bench"},{"connection":"oai/b","model":"m-bench-b"}]}},
  "auth":{"mode":"loopback","allow_anonymous":true}}`
	for _, tc := range []struct{ name, aware, body string }{
		{"aware", "true", `{"model":"bench","messages":[{"role":"user","content":"hello"}]}`},
		{"off", "false", `{"model":"bench","messages":[{"role":"user","content":"hello"}]}`},
		{"aware-stream", "true", `{"model":"bench","stream":true,"messages":[{"role":"user","content":"hello"}]}`},
		{"off-stream", "false", `{"model":"bench","stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := startGatewayTB(b, fileFrom(b, js), map[string]string{"OMNIROUTE_QUOTA_AWARE_ROUTING": tc.aware})
			url := g.base + "/v1/chat/completions"
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := g.hc.Post(url, "application/json", strings.NewReader(tc.body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			g.stop()
		})
	}
}
