package transport_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
)

func TestPassThroughFidelity(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	body := `{"messages":[{"role":"user","content":"h\u00e9llo \"quoted\" 世界"}],  "model" : "echo", "temperature":0.25, "n":1 }`
	r := g.post("/v1/chat/completions", body,
		"Authorization", "Bearer client-secret-key", "Anthropic-Version", "2099-01-01", "X-Request-Id", "trace-123")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got := r.header.Get("X-OmniRoute-Target"); got != "mock/a/m-echo" {
		t.Fatalf("X-OmniRoute-Target = %q", got)
	}
	if r.header.Get("X-Request-Id") != "trace-123" || r.header.Get("X-OmniRoute-Fallbacks") != "0" {
		t.Fatalf("headers %v", r.header)
	}
	// The answer names the model the caller asked for (the upstream's
	// name is in X-OmniRoute-Target); nothing else of it changes.
	if m := jsonField(t, r.body, "model"); m != "echo" {
		t.Fatalf("response model %v: the answer must name the model the caller asked for", m)
	}
	st := mockStats(t)
	rec := st.Bodies[len(st.Bodies)-1]
	want := strings.Replace(body, `"echo"`, `"m-echo"`, 1)
	if rec.SHA256 != sha([]byte(want)) || rec.Bytes != len(want) || rec.Path != "/v1/chat/completions" {
		t.Fatalf("mock received %d bytes sha %s at %s; want exactly the caller's body with only model rewritten (%d bytes)", rec.Bytes, rec.SHA256, rec.Path, len(want))
	}
	if rec.Headers["authorization"] != "Bearer upstream-key-a" {
		t.Fatalf("upstream authorization %q; want the connection's key", rec.Headers["authorization"])
	}
	for k, v := range rec.Headers {
		if strings.Contains(v, "client-secret-key") {
			t.Fatalf("the caller's key reached the provider in %s", k)
		}
	}
	if rec.Headers["anthropic-version"] != "2099-01-01" || rec.Headers["x-request-id"] != "trace-123" {
		t.Fatalf("forwarded headers %v", rec.Headers)
	}

	// A target without an upstream name forwards the body byte for byte.
	body2 := "{\"model\":\"same-name\",\n\"messages\":[]}"
	if r := g.post("/v1/chat/completions", body2); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	st = mockStats(t)
	if rec := st.Bodies[len(st.Bodies)-1]; rec.SHA256 != sha([]byte(body2)) {
		t.Fatal("body without rewrite was changed")
	}
}

func TestFailoverBeforeFirstByte(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-first": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "7"}},
	})
	r := g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" || r.header.Get("X-OmniRoute-Target") != "mock/b/m-second" {
		t.Fatalf("status %d headers %v body %s", r.status, r.header, r.body)
	}

	// The 429 (Retry-After: 7) cools the first target: once the targets
	// actor has published that, the next request goes straight to the
	// second one.
	waitFor(t, "the cooldown to be published", func() bool { return targetCooling(t, g, "mock/a/m-first") })
	r = g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "0" || r.header.Get("X-OmniRoute-Target") != "mock/b/m-second" {
		t.Fatalf("cooling target retried: status %d headers %v; m-first saw %d requests", r.status, r.header, mockStats(t).Models["m-first"].Requests)
	}
	if n := mockStats(t).Models["m-first"].Requests; n != 1 {
		t.Fatalf("the cooling target got %d requests, want 1", n)
	}

	// Streaming: an error as the first event fails over too (a fresh
	// gateway per surface: each failure cools the first target).
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-first": {Fail: mockprovider.FailSpec{Mode: "error_event", AfterChunks: 0}},
	})
	for _, surface := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		g := startGateway(t, testFile(t, ""), nil)
		r = g.post(surface, `{"model":"failover","stream":true,"messages":[],"input":"x","max_tokens":10}`)
		if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
			t.Fatalf("%s: status %d fallbacks %q body %s", surface, r.status, r.header.Get("X-OmniRoute-Fallbacks"), r.body)
		}
		if strings.Contains(string(r.body), "(injected)") {
			t.Fatalf("%s: the failed attempt's error reached the caller: %s", surface, r.body)
		}
		if !strings.Contains(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: content type %q", surface, r.header.Get("Content-Type"))
		}
	}

	// A provider that cannot be reached fails over as well.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	f := testFileWith(t, `,
    "dead": {"base_url": "http://`+deadAddr+`/v1", "apis": ["chat"], "auth": "none", "connections": {"default": {}}}`, `,
    "with-dead": {"targets": [{"connection": "dead", "model": "x"}, {"connection": "mock/a", "model": "m-after-dead"}]}`)
	g2 := startGateway(t, f, nil)
	r = g2.post("/v1/chat/completions", `{"model":"with-dead","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("dead target: status %d %v %s", r.status, r.header, r.body)
	}
}

func TestFailoverStopsAtRequestErrorsAndPassesThroughLastError(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-first": {Fail: mockprovider.FailSpec{Mode: "status", Status: 400, Code: "invalid_value"}},
	})
	r := g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "invalid_value" {
		t.Fatalf("request-caused 400 must pass through at once: %d %s", r.status, r.body)
	}
	if n := mockStats(t).Models["m-second"].Requests; n != 0 {
		t.Fatalf("second target got %d requests after a request-caused error", n)
	}

	setBehavior(t, map[string]mockprovider.Behavior{
		"m-first":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 500}},
		"m-second": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, RetryAfter: "3"}},
	})
	r = g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 503 || r.header.Get("Retry-After") != "3" || jsonField(t, r.body, "error") == nil {
		t.Fatalf("exhausted failover must pass the last provider error through: %d %v %s", r.status, r.header, r.body)
	}
}

func TestInBandErrorAfterFirstByte(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "mid": {"targets": [{"connection": "mock/a", "model": "m-mid"}, {"connection": "mock/b", "model": "m-never"}]}`), nil)
	for _, mode := range []string{"reset", "truncate"} {
		setBehavior(t, map[string]mockprovider.Behavior{
			"m-mid": {ChunkCount: 6, Fail: mockprovider.FailSpec{Mode: mode, AfterChunks: 3}},
		})
		cases := []struct {
			path  string
			check func(evs [][2]string) bool
		}{
			{"/v1/chat/completions", func(evs [][2]string) bool {
				last := evs[len(evs)-1]
				return strings.Contains(last[1], `"code":"stream_interrupted"`) && !strings.Contains(last[1], "[DONE]")
			}},
			{"/v1/messages", func(evs [][2]string) bool { return evs[len(evs)-1][0] == "error" }},
			{"/v1/responses", func(evs [][2]string) bool {
				return evs[len(evs)-2][0] == "error" && evs[len(evs)-1][0] == "response.failed"
			}},
		}
		for _, tc := range cases {
			r := g.post(tc.path, `{"model":"mid","stream":true,"messages":[],"input":"x","max_tokens":5}`)
			evs := sseEvents(r.body)
			if r.status != 200 || len(evs) < 3 || !tc.check(evs) {
				t.Fatalf("%s %s: status %d, events %q", mode, tc.path, r.status, evs)
			}
		}
	}
	if n := mockStats(t).Models["m-never"].Requests; n != 0 {
		t.Fatalf("a committed stream failed over (%d requests to the second target)", n)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "hang": {"targets": [{"connection": "mock/a", "model": "m-hang"}]},
    "slow": {"targets": [{"connection": "mock/a", "model": "m-slow"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-hang": {Fail: mockprovider.FailSpec{Mode: "hang"}},
		"m-slow": {ChunkCount: 50, ChunkGapMS: 1000},
	})
	for _, tc := range []struct{ model, body string }{
		{"m-hang", `{"model":"hang","messages":[]}`},
		{"m-hang", `{"model":"hang","stream":true,"messages":[]}`},
		{"m-slow", `{"model":"slow","stream":true,"messages":[]}`},
	} {
		before := mockStats(t).Models[tc.model].Cancelled
		conn, err := net.Dial("tcp", strings.TrimPrefix(g.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
		waitFor(t, "upstream request in flight", func() bool { return mockStats(t).Models[tc.model].Inflight == 1 })
		if tc.model == "m-slow" {
			// Read the first event so the stream is committed.
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil || strings.HasPrefix(line, "data: ") {
					break
				}
			}
		}
		closed := time.Now()
		conn.Close()
		waitFor(t, "upstream cancelled", func() bool { return mockStats(t).Models[tc.model].Cancelled == before+1 })
		t.Logf("%s: provider saw the cancellation %v after the client left", tc.body, time.Since(closed).Round(time.Millisecond))
	}
	waitFor(t, "gateway in-flight back to 0", func() bool {
		r := g.get("/api/monitoring/health")
		return jsonField(t, r.body, "server", "inflightRequests") == float64(0)
	})
}

func TestGracefulShutdownLetsStreamFinish(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "paced": {"targets": [{"connection": "mock/a", "model": "m-paced"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-paced": {ChunkCount: 8, ChunkGapMS: 100}})
	var wg sync.WaitGroup
	var r response
	wg.Add(1)
	go func() {
		defer wg.Done()
		r = g.post("/v1/chat/completions", `{"model":"paced","stream":true,"messages":[]}`)
	}()
	waitFor(t, "stream in flight", func() bool { return mockStats(t).Models["m-paced"].Inflight == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.gw.Shutdown(ctx) }()
	waitFor(t, "listener closed", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(g.base, "http://"), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	wg.Wait()
	evs := sseEvents(r.body)
	if r.status != 200 || len(evs) == 0 || evs[len(evs)-1][1] != "[DONE]" {
		t.Fatalf("open stream did not finish during shutdown: %d %q", r.status, evs)
	}
	g.closed = true
	<-g.served
	g.system.Shutdown()
}

func TestShutdownTimeoutCancelsInFlight(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "hang2": {"targets": [{"connection": "mock/a", "model": "m-hang2"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-hang2": {Fail: mockprovider.FailSpec{Mode: "hang"}}})
	go g.post("/v1/chat/completions", `{"model":"hang2","messages":[]}`) //nolint:errcheck
	waitFor(t, "request in flight", func() bool { return mockStats(t).Models["m-hang2"].Inflight == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := g.gw.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "cancelled 1 in-flight") {
		t.Fatalf("shutdown error %v; want a report of the forced cancellation", err)
	}
	waitFor(t, "hung upstream cancelled", func() bool { return mockStats(t).Models["m-hang2"].Cancelled == 1 })
	g.closed = true
	<-g.served
	g.system.Shutdown()
}

func TestGatewayErrors(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES": "4096"})
	big := `{"model":"echo","messages":[{"content":"` + strings.Repeat("x", 5000) + `"}]}`
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
		anthropic                       bool
	}{
		{"bad json", "POST", "/v1/chat/completions", "application/json", `{"model":`, 400, "invalid_json", false},
		{"bad json anthropic", "POST", "/v1/messages", "application/json", `{"model"`, 400, "invalid_json", true},
		{"not an object", "POST", "/v1/responses", "application/json", `[1]`, 400, "invalid_json", false},
		{"empty", "POST", "/v1/chat/completions", "application/json", ``, 400, "empty_body", false},
		{"missing model", "POST", "/v1/chat/completions", "application/json", `{"messages":[]}`, 400, "missing_model", false},
		{"model not a string", "POST", "/v1/chat/completions", "application/json", `{"model":5}`, 400, "missing_model", false},
		{"unknown model", "POST", "/v1/chat/completions", "application/json", `{"model":"gpt-9"}`, 404, "model_not_found", false},
		{"unknown model anthropic", "POST", "/v1/messages", "application/json", `{"model":"gpt-9"}`, 404, "model_not_found", true},
		{"untranslatable field", "POST", "/v1/chat/completions", "application/json", `{"model":"claude","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "unsupported_field", false},
		{"duplicate model", "POST", "/v1/chat/completions", "application/json", `{"model":"echo","model":"failover"}`, 400, "duplicate_field", false},
		{"wrong content type", "POST", "/v1/chat/completions", "text/plain", `{"model":"echo"}`, 415, "unsupported_media_type", false},
		{"form content type", "POST", "/v1/chat/completions", "application/x-www-form-urlencoded", `{"model":"echo"}`, 415, "unsupported_media_type", false},
		{"method", "GET", "/v1/chat/completions", "", ``, 405, "method_not_allowed", false},
		{"path", "GET", "/v2/whatever", "", ``, 404, "not_found", false},
		{"too large", "POST", "/v1/chat/completions", "application/json", big, 413, "payload_too_large", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, g.base+tc.path, strings.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := g.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("X-Request-Id") == "" {
				t.Fatalf("status %d (want %d), request id %q, body %s", resp.StatusCode, tc.status, resp.Header.Get("X-Request-Id"), b)
			}
			if tc.anthropic {
				if jsonField(t, b, "type") != "error" || jsonField(t, b, "error", "code") != tc.code || jsonField(t, b, "error", "message") == "" {
					t.Fatalf("anthropic error body %s", b)
				}
			} else if jsonField(t, b, "error", "code") != tc.code || jsonField(t, b, "error", "message") == "" {
				t.Fatalf("openai error body %s", b)
			}
		})
	}
}

func TestExpectContinueRejectedBeforeBody(t *testing.T) {
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES": "4096"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 413 ") {
		t.Fatalf("status line %q, err %v; want 413 before any body byte was sent", status, err)
	}
}

func TestAuthModes(t *testing.T) {
	resetMock(t)
	f := testFile(t, "")
	f.Auth.Mode, f.Auth.AllowAnonymous = "keys", false
	f.Tenants = append(f.Tenants, tenantWithSHA("team", "team-key-1"))
	g := startGateway(t, f, nil)
	body := `{"model":"echo","messages":[]}`
	if r := g.post("/v1/chat/completions", body); r.status != 401 || jsonField(t, r.body, "error", "code") != "missing_api_key" {
		t.Fatalf("no key: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", body, "Authorization", "Bearer wrong"); r.status != 401 || jsonField(t, r.body, "error", "code") != "invalid_api_key" {
		t.Fatalf("wrong key: %d %s", r.status, r.body)
	}
	for _, h := range [][2]string{{"Authorization", "Bearer team-key-1"}, {"Authorization", "bearer   team-key-1 "}, {"X-Api-Key", "team-key-1"}, {"X-Goog-Api-Key", "team-key-1"}} {
		if r := g.post("/v1/chat/completions", body, h[0], h[1]); r.status != 200 {
			t.Fatalf("%s: %d %s", h[0], r.status, r.body)
		}
	}
	if r := g.post("/v1/messages", `{"model":"claude","messages":[]}`, "X-Api-Key", "nope"); r.status != 401 || jsonField(t, r.body, "type") != "error" {
		t.Fatalf("anthropic 401: %d %s", r.status, r.body)
	}
}

func TestModelsAndHealthAndMetrics(t *testing.T) {
	g := startGateway(t, testFile(t, ""), nil)
	r := g.get("/v1/models")
	if r.status != 200 || jsonField(t, r.body, "object") != "list" || !strings.Contains(string(r.body), `"id":"echo"`) {
		t.Fatalf("models: %d %s", r.status, r.body)
	}
	r = g.getWith("/v1/models", "Anthropic-Version", "2023-06-01")
	if !strings.Contains(string(r.body), `"type":"model"`) || jsonField(t, r.body, "has_more") != false {
		t.Fatalf("anthropic models: %s", r.body)
	}
	g.post("/v1/chat/completions", `{"model":"echo","messages":[]}`)
	r = g.get("/api/monitoring/health")
	if r.status != 200 || jsonField(t, r.body, "status") != "ok" || jsonField(t, r.body, "targets") == nil {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
	r = g.get("/metrics")
	for _, want := range []string{`omniroute_requests_total{route="chat",status="200"} 1`, `omniroute_upstream_attempts_total{target="mock/a/m-echo",outcome="ok"} 1`, "omniroute_requests_inflight 0", `omniroute_upstream_responses_total{target="mock/a/m-echo",status="200"} 1`, "process_resident_memory_bytes"} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, r.body)
		}
	}
}

func (g *gwEnv) get(path string) response { return g.getWith(path) }

func (g *gwEnv) getWith(path string, headers ...string) response {
	g.t.Helper()
	return g.send(http.MethodGet, path, "", headers...)
}

// TestModelsMayShareTarget: two models naming the same connection and
// upstream model start (their metric series are shared, not duplicated).
func TestModelsMayShareTarget(t *testing.T) {
	g := startGateway(t, testFile(t, `,
    "echo-alias": {"targets": [{"connection": "mock/a", "model": "m-echo"}]}`), nil)
	for _, m := range []string{"echo", "echo-alias"} {
		if r := g.post("/v1/chat/completions", `{"model":"`+m+`","messages":[]}`); r.status != 200 {
			t.Fatalf("%s: %d %s", m, r.status, r.body)
		}
	}
	if !strings.Contains(string(g.get("/metrics").body), `omniroute_upstream_attempts_total{target="mock/a/m-echo",outcome="ok"} 2`) {
		t.Fatal("shared target series do not count both models")
	}
}

func TestUpstreamPoolExhaustedIs503WithRetryAfter(t *testing.T) {
	resetMock(t)
	f := testFileWith(t, `,
    "tiny": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "auth": "none", "connections": {"one": {"max_conns": 1}}}`, `,
    "slow-one": {"targets": [{"connection": "tiny", "model": "m-slow-one"}]}`)
	g := startGateway(t, f, map[string]string{"OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS": "200"})
	setBehavior(t, map[string]mockprovider.Behavior{"m-slow-one": {LatencyMS: 1500}})
	done := make(chan response, 1)
	go func() { done <- g.post("/v1/chat/completions", `{"model":"slow-one","messages":[]}`) }()
	waitFor(t, "first request upstream", func() bool { return mockStats(t).Models["m-slow-one"].Inflight == 1 })
	r := g.post("/v1/chat/completions", `{"model":"slow-one","messages":[]}`)
	if r.status != 503 || r.header.Get("Retry-After") != "1" || jsonField(t, r.body, "error", "code") != "upstream_busy" {
		t.Fatalf("pool exhausted: %d %v %s", r.status, r.header, r.body)
	}
	if first := <-done; first.status != 200 {
		t.Fatalf("first request: %d", first.status)
	}
	if n := mockStats(t).Models["m-slow-one"].Requests; n != 1 {
		t.Fatalf("the provider saw %d requests; the busy one must not reach it", n)
	}
}

// TestShutdownRightAfterServe: shutting down before Serve has taken its
// listener must not leave Serve running.
func TestShutdownRightAfterServe(t *testing.T) {
	for i := 0; i < 20; i++ {
		gw, system := embedded(t, testFile(t, ""))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- gw.Serve(ln) }()
		if err := gw.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatal("Serve kept running after Shutdown")
		}
		system.Shutdown()
	}
}

// targetCooling reports whether health shows a cooldown on the target.
func targetCooling(t *testing.T, g *gwEnv, name string) bool {
	ts, _ := jsonField(t, g.get("/api/monitoring/health").body, "targets", "targets").([]any)
	for _, x := range ts {
		if m, _ := x.(map[string]any); m["target"] == name {
			return m["cooldownUntil"] != nil
		}
	}
	return false
}
