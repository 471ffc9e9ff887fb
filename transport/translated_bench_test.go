package transport_test

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// benchPostPath is benchPost on any inference path.
func benchPostPath(b *testing.B, addr, path, body string) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + path)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set("X-Api-Key", "bench-key")
	req.SetBodyString(body)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
		}
	}
}

const benchMessagesBody = `{"model":"demo","max_tokens":256,"system":"You are a coding agent.","messages":[{"role":"user","content":"Refactor this function please."}]`

// BenchmarkTranslatedMessagesToChat is BenchmarkPassThrough's request sent
// as Anthropic Messages to the chat-only mock: the difference is the cost
// of translating the request and the answer. The Stream variant converts
// every event of a streamed answer as well.
func BenchmarkTranslatedMessagesToChat(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/messages", benchMessagesBody+`}`)
}

func BenchmarkTranslatedMessagesToChatStream(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/messages", benchMessagesBody+`,"stream":true}`)
}

func BenchmarkPassThroughStream(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/chat/completions", benchBody[:len(benchBody)-1]+`,"stream":true}`)
}
