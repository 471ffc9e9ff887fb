package transport_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/bench/refproxy"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil/mocktest"
)

// benchGateway runs an in-process mock and gateway on loopback and returns
// the gateway's and the mock's addresses.
func benchGateway(b testing.TB, env ...string) (gwAddr, mockAddr string) {
	b.Helper()
	_, mockAddr = mocktest.Start(b, mockprovider.Options{}, nil)
	f := fileFrom(b, `{"providers":{"mock":{"base_url":"http://`+mockAddr+`/v1","apis":["chat"],"auth":"none","connections":{"default":{}}}},
		"models":{"demo":{"targets":[{"connection":"mock","model":"mock-demo"}]},"same":{"targets":[{"connection":"mock"}]}},"auth":{"mode":"open","allow_anonymous":true}}`)
	vars := map[string]string{}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	g := startGatewayTB(b, f, vars)
	return strings.TrimPrefix(g.base, "http://"), mockAddr
}

// benchPost posts body to the chat path b.N times with a Bearer key.
func benchPost(b *testing.B, addr, body string) {
	benchPostAuth(b, addr, "/v1/chat/completions", "Authorization", "Bearer bench-key", body)
}

// benchPostAuth posts body to path b.N times, authenticated by header:
// the one loop every request benchmark of this package measures.
func benchPostAuth(b *testing.B, addr, path, header, value, body string) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	b.Cleanup(hc.CloseIdleConnections)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + path)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set(header, value)
	req.SetBodyString(body)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
		}
	}
}

const benchBody = `{"model":"demo","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Refactor this function please."}],"max_tokens":256}`

// BenchmarkPassThrough measures one non-streaming request through the
// gateway to the mock; BenchmarkDirect measures the same request sent to the
// mock directly. The difference in allocs/op and ns/op is the gateway's
// (client, gateway and mock share the process, so compare, don't read
// absolutes).
func BenchmarkPassThrough(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPost(b, gw, benchBody)
}

// BenchmarkPassThroughSameName is BenchmarkPassThrough for a model whose
// target keeps the caller's name (as the bench's passthrough scenario
// configures it): nothing is rewritten, in the request or the answer.
func BenchmarkPassThroughSameName(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPost(b, gw, strings.Replace(benchBody, `"demo"`, `"same"`, 1))
}

// BenchmarkPassThroughRequestLogOff is BenchmarkPassThrough with the
// request log off: the difference is what logging every request costs on
// the request path and in the writer (both run in this process).
func BenchmarkPassThroughRequestLogOff(b *testing.B) {
	gw, _ := benchGateway(b, "OMNIROUTE_REQUEST_LOG", "off")
	benchPost(b, gw, benchBody)
}

func BenchmarkDirect(b *testing.B) {
	_, mock := benchGateway(b)
	benchPost(b, mock, benchBody)
}

func BenchmarkRefProxy(b *testing.B) {
	_, mock := benchGateway(b)
	p := refproxy.New(mock)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &fasthttp.Server{Handler: p.Handler}
	go srv.Serve(ln) //nolint:errcheck
	b.Cleanup(func() { srv.Shutdown(); p.Close() })
	benchPost(b, ln.Addr().String(), benchBody)
}

// BenchmarkPassThroughAdmissionEnforce and ...Off are BenchmarkPassThrough
// with the admission lanes enforcing and off: the difference is what
// admission costs a request that is never queued.
func BenchmarkPassThroughAdmissionEnforce(b *testing.B) {
	gw, _ := benchGateway(b, "ADAPTIVE_ADMISSION_MODE", "enforce")
	benchPost(b, gw, benchBody)
}

func BenchmarkPassThroughAdmissionOff(b *testing.B) {
	gw, _ := benchGateway(b, "ADAPTIVE_ADMISSION_MODE", "off")
	benchPost(b, gw, benchBody)
}
