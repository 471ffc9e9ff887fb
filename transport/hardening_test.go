package transport_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway"
)

// relayDemoFile is the default shape of finding 1: a model served natively
// and a relay token for it.
func relayDemoFile(t *testing.T) *config.File {
	f := testFile(t, `, "demo": {"targets": [{"connection": "mock/a", "model": "m-relay-demo"}]}`)
	f.Relay = &config.RelayConfig{Tokens: []config.RelayToken{{Name: "ops", TokenSHA256: sha([]byte("rt-demo"))}}}
	return f
}

// TestRelayWhileTargetCoolsDoesNotCrash is finding 1: a relay request
// that finds its only target cooling down either waits for it (routing
// waits "recovered") or is refused (503 targets_unavailable). Both counted
// a metric that existed only for the chat, messages and responses routes:
// a nil pointer inside the fasthttp handler, and the gateway exited.
func TestRelayWhileTargetCoolsDoesNotCrash(t *testing.T) {
	resetMock(t)
	body := chatBody("demo", false)
	auth := []string{"Authorization", "Bearer rt-demo"}

	// Waits, then is served: the first request's answers (503, and 503
	// again on its one retry of the lone target) cooled the target for
	// 100 ms, well inside the wait budget.
	setBehavior(t, map[string]mockprovider.Behavior{"m-relay-demo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Times: 2}}})
	g := startGateway(t, relayDemoFile(t), map[string]string{"OMNIROUTE_RELAY_BACKEND": "native", "OMNIROUTE_COOLDOWN_BASE_MS": "100"})
	if r := g.post(relayPath, body, auth...); r.status != 503 {
		t.Fatalf("first relay request: %d %s", r.status, r.body)
	}
	waitFor(t, "the cooldown to be published", func() bool { return targetCooling(t, g, "mock/a/m-relay-demo") })
	if r := g.post(relayPath, body, auth...); r.status != 200 {
		t.Fatalf("relay request after the cooldown: %d %s", r.status, r.body)
	}
	if m := string(g.get("/metrics").body); !strings.Contains(m, `omniroute_routing_waits_total{route="relay",outcome="recovered"} 1`) {
		t.Fatalf("the relay wait was not counted:\n%s", grepLines(m, "routing_waits"))
	}

	// Refused at once: the cooldown is longer than the wait budget.
	setBehavior(t, map[string]mockprovider.Behavior{"m-relay-demo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Times: 2}}})
	g2 := startGateway(t, relayDemoFile(t), map[string]string{"OMNIROUTE_RELAY_BACKEND": "native", "OMNIROUTE_ROUTING_MAX_WAIT_MS": "1"})
	g2.post(relayPath, body, auth...)
	waitFor(t, "the cooldown to be published", func() bool { return targetCooling(t, g2, "mock/a/m-relay-demo") })
	// The target failed (503s): an outage, not a limit.
	r := g2.post(relayPath, body, auth...)
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "targets_unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("relay request while cooling: %d %s", r.status, r.body)
	}
	if m := string(g2.get("/metrics").body); !strings.Contains(m, `omniroute_routing_waits_total{route="relay",outcome="refused"} 1`) {
		t.Fatalf("the relay refusal was not counted:\n%s", grepLines(m, "routing_waits"))
	}
}

// TestPanicIsOneFailedRequest: a panic in a handler answers 500
// internal_error in the route's dialect, is logged with the request id and
// a stack, counts in omniroute_request_panics_total, leaves nothing
// reserved, and the gateway keeps serving. A panic in a streaming body
// (which fasthttp runs after the handler returned) breaks only that
// stream.
func TestPanicIsOneFailedRequest(t *testing.T) {
	resetMock(t)
	var mode sync.Map // where → panic
	restore := transport.SetPanicProbe(func(where string) {
		if v, ok := mode.Load(where); ok && v.(bool) {
			panic("injected " + where + " panic")
		}
	})
	defer restore()
	var logs testutil.SyncBuffer
	g := startGatewayWith(t, testFile(t, ""), nil, gateway.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	mode.Store("handler", true)
	r := g.post("/v1/chat/completions", `{"model":"echo","messages":[]}`, "X-Request-Id", "panic-chat-1")
	if r.status != 500 || jsonField(t, r.body, "error", "code") != "internal_error" {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	r = g.post("/v1/messages", `{"model":"claude","max_tokens":5,"messages":[]}`)
	if r.status != 500 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "code") != "internal_error" {
		t.Fatalf("messages (Anthropic dialect): %d %s", r.status, r.body)
	}
	r = g.do("GET", "/api/services", "")
	if r.status != 500 || jsonField(t, r.body, "error", "code") != "internal_error" || jsonField(t, r.body, "requestId") == nil {
		t.Fatalf("management (its own dialect): %d %s", r.status, r.body)
	}
	mode.Store("handler", false)
	if r := g.post("/v1/chat/completions", `{"model":"echo","messages":[]}`); r.status != 200 {
		t.Fatalf("after the panics: %d %s", r.status, r.body)
	}

	mode.Store("stream", true)
	// The status may already be on its way; the connection closes, so the
	// caller sees a broken stream (an error, or a body without [DONE]).
	if resp, err := g.hc.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"echo","stream":true,"messages":[]}`)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "[DONE]") {
			t.Fatalf("a panicking stream must end early: %d %s", resp.StatusCode, b)
		}
	}
	mode.Store("stream", false)
	if r := g.post("/v1/chat/completions", `{"model":"echo","stream":true,"messages":[]}`); r.status != 200 || !strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("stream after the panic: %d %s", r.status, r.body)
	}

	m := string(g.get("/metrics").body)
	for _, want := range []string{`omniroute_request_panics_total{route="chat"} 2`, `omniroute_request_panics_total{route="messages"} 1`,
		`omniroute_request_panics_total{route="management"} 1`, `omniroute_requests_total{route="chat",status="500"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "panics"))
		}
	}
	waitFor(t, "requests to be released", func() bool {
		h := g.get("/api/monitoring/health").body
		return jsonField(t, h, "server", "inflightRequests") == 0.0 && jsonField(t, h, "chatAdmission", "inflightBytes") == 0.0
	})
	out := logs.String()
	if !strings.Contains(out, `"requestId":"panic-chat-1"`) || !strings.Contains(out, "injected handler panic") ||
		!strings.Contains(out, "probePanic") || !strings.Contains(out, `"level":"ERROR"`) {
		t.Fatalf("the panic log lacks the request id, the value or the stack:\n%s", out)
	}
}

// Keys planted by TestNoKeyInAnyLog: a caller key of a well-known shape,
// one of no particular shape, and the provider key of connection mock/a
// (testGetenv's TEST_KEY_A), which the mock echoes in its errors.
const (
	plantedShaped  = "sk-planted-0123456789abcdef"
	plantedPlain   = "caller-plain-Q7Z4"
	plantedProvKey = "upstream-key-a"
)

// TestNoKeyInAnyLog is finding 3 and the provider-echo part of finding 9:
// a malformed request (fasthttp logged its first and last 200 bytes at
// WARN, Authorization included), a panic whose value carries request
// bytes (ERROR), routing decisions (DEBUG) and provider errors that echo
// the provider key in their body and headers. The key never reaches a log
// line, at any level, in text or JSON, nor the caller.
func TestNoKeyInAnyLog(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			resetMock(t)
			var logs testutil.SyncBuffer
			restore := transport.SetPanicProbe(func(where string) {
				if where == "handler" && panicNext.CompareAndSwap(true, false) {
					panic("request bytes: Authorization: Bearer " + plantedShaped + " x-api-key: " + plantedPlain + " upstream said " + plantedProvKey)
				}
			})
			defer restore()
			g := startGatewayWith(t, testFile(t, ""), nil, gateway.Options{Logger: logging.New(format, "debug", &logs)})
			echo := `{"error":{"message":"Incorrect API key provided: ` + plantedProvKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`
			setBehavior(t, map[string]mockprovider.Behavior{
				"m-first":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 500, Body: echo, Headers: map[string]string{"X-Echo-Key": plantedProvKey}}},
				"m-second": {Fail: mockprovider.FailSpec{Mode: "status", Status: 500, Body: echo}},
				"m-echo":   {Fail: mockprovider.FailSpec{Mode: "status", Status: 401, Body: echo, Headers: map[string]string{"X-Echo-Key": "Bearer " + plantedProvKey}}},
			})
			var answers []string
			// Provider errors passed through: after failover (500) and at
			// once (a request-caused 401 answer).
			for _, model := range []string{"failover", "echo"} {
				r := g.post("/v1/chat/completions", `{"model":"`+model+`","messages":[]}`, "Authorization", "Bearer "+plantedShaped)
				if r.status < 400 {
					t.Fatalf("%s: %d", model, r.status)
				}
				answers = append(answers, fmt.Sprint(r.header), string(r.body))
				if !json.Valid(r.body) {
					t.Fatalf("%s: the redacted error is not JSON: %s", model, r.body)
				}
			}
			// A malformed request with the caller's key.
			rawExchange(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+plantedShaped+
				"\r\nX-Api-Key: "+plantedPlain+"\r\nContent-Length: 12x\r\n\r\n{\"key\":\""+plantedPlain+"\"}")
			// A panic whose value carries request bytes.
			panicNext.Store(true)
			g.post("/v1/chat/completions", `{"model":"echo","messages":[]}`, "X-Api-Key", plantedPlain)
			g.stop()

			out := logs.String()
			for _, lvl := range []string{"DEBUG", "INFO", "WARN", "ERROR"} {
				if !strings.Contains(out, lvl) {
					t.Errorf("no %s line was logged: the test does not cover that level", lvl)
				}
			}
			for _, key := range []string{plantedShaped, plantedPlain, plantedProvKey} {
				if strings.Contains(out, key) {
					t.Errorf("%s log holds %q:\n%s", format, key, grepLines(out, key))
				}
				for _, a := range answers {
					if strings.Contains(a, key) {
						t.Errorf("an answer to the caller holds %q: %s", key, a)
					}
				}
			}
		})
	}
}

var panicNext atomic.Bool

// rawExchange writes raw bytes to the gateway and reads until it closes
// the connection (or 5 s pass).
func rawExchange(t *testing.T, g *gwEnv, raw string) string {
	t.Helper()
	c, _ := rawRequest(t, g, raw)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// send is a request with exactly the headers given ("Host" sets the Host
// header, "" values are skipped).
func (g *gwEnv) send(method, path, body string, headers ...string) response {
	g.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.base+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch {
		case headers[i+1] == "":
		case headers[i] == "Host":
			req.Host = headers[i+1]
		default:
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

// TestBrowserForgeryAndRebindingRefused is finding 2: with the default
// configuration (no management key) a web page could stop a service and
// persist auto-start through a "simple" cross-origin POST (text/plain,
// foreign Origin), reach the services API and its logs through a
// DNS-rebinding Host, and be served a completion with no Content-Type.
func TestBrowserForgeryAndRebindingRefused(t *testing.T) {
	resetMock(t)
	dir := t.TempDir()
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}),
		gwOpts{env: map[string]string{"OMNIROUTE_DATA_DIR": dir}})
	self := g.base // the gateway's own origin
	evil := "http://evil.example"
	code := func(r response) any { return jsonField(t, r.body, "error", "code") }
	for _, tc := range []struct {
		name                           string
		method, path, body             string
		host, origin, ctype, fetchSite string
		status                         int
		code                           string
	}{
		{"simple cross-origin POST", "POST", "/api/services/svc/auto-start", `{"enabled":true}`, "", evil, "text/plain", "", 403, "origin_not_allowed"},
		{"cross-origin stop", "POST", "/api/services/svc/stop", "", "", evil, "", "", 403, "origin_not_allowed"},
		{"rebinding Host", "POST", "/api/services/svc/auto-start", `{"enabled":true}`, "rebind.evil.example:20128", "", "application/json", "", 403, "host_not_allowed"},
		{"rebinding Host, same-origin to it", "POST", "/api/services/svc/stop", "", "rebind.evil.example", "http://rebind.evil.example", "", "", 403, "host_not_allowed"},
		{"rebinding logs stream", "GET", "/api/services/svc/logs", "", "rebind.evil.example", "", "", "", 403, "host_not_allowed"},
		{"text/plain without Origin", "POST", "/api/services/svc/auto-start", `{"enabled":true}`, "", "", "text/plain", "", 415, "unsupported_media_type"},
		{"empty text/plain POST", "POST", "/api/services/svc/stop", "", "", "", "text/plain", "", 415, "unsupported_media_type"},
		{"cross-site navigation", "GET", "/api/services", "", "", "", "", "cross-site", 403, "origin_not_allowed"},
		{"chat without Content-Type", "POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, "", "", "", "", 415, "unsupported_media_type"},
		{"chat from a foreign origin", "POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, "", evil, "text/plain", "", 403, "origin_not_allowed"},
		{"chat through rebinding", "POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, "rebind.evil.example", "", "application/json", "", 403, "host_not_allowed"},
		{"models through rebinding", "GET", "/v1/models", "", "rebind.evil.example", "", "", "", 403, "host_not_allowed"},
	} {
		r := g.send(tc.method, tc.path, tc.body, "Host", tc.host, "Origin", tc.origin, "Content-Type", tc.ctype, "Sec-Fetch-Site", tc.fetchSite)
		if r.status != tc.status || code(r) != tc.code || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %s; want %d %s without CORS headers", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "services-state.json")); err == nil {
		t.Fatalf("a refused request persisted a setting: %s", b)
	}
	// What a program (or the gateway's own origin) sends still works.
	for _, tc := range []struct {
		name, method, path, body, host, origin, ctype string
		status                                        int
	}{
		{"JSON POST", "POST", "/api/services/svc/auto-start", `{"enabled":false}`, "", "", "application/json", 204},
		{"bodiless POST", "POST", "/api/services/svc/stop", "", "", "", "", 200},
		{"same origin", "POST", "/api/services/svc/stop", "", "", self, "", 200},
		{"localhost", "GET", "/api/services", "", "localhost:20128", "", "", 200},
		{"IPv6 literal", "GET", "/v1/models", "", "[::1]:20128", "", "", 200},
		{"chat", "POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, "", "", "application/json; charset=utf-8", 200},
	} {
		if r := g.send(tc.method, tc.path, tc.body, "Host", tc.host, "Origin", tc.origin, "Content-Type", tc.ctype); r.status != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// TestCORSAllowList: OMNIROUTE_CORS_ORIGINS lets a listed browser app call
// the gateway: its preflight is answered (204, the methods, the headers it
// asked for), its requests carry Access-Control-Allow-Origin and the
// exposed headers; every other origin is refused, preflight included.
// OMNIROUTE_ALLOWED_HOSTS adds a name the Host header may carry.
func TestCORSAllowList(t *testing.T) {
	resetMock(t)
	app := "http://app.test:5173"
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CORS_ORIGINS": app + ", https://other.test", "OMNIROUTE_ALLOWED_HOSTS": "gw.internal"})
	r := g.send("OPTIONS", "/v1/chat/completions", "", "Origin", app, "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization, content-type, anthropic-dangerous-direct-browser-access")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") ||
		r.header.Get("Access-Control-Allow-Headers") != "authorization, content-type, anthropic-dangerous-direct-browser-access" ||
		r.header.Get("Access-Control-Max-Age") == "" || !strings.Contains(r.header.Get("Vary"), "Origin") {
		t.Fatalf("preflight: %d %v %s", r.status, r.header, r.body)
	}
	r = g.send("POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, "Origin", app, "Content-Type", "application/json")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Fatalf("cross-origin call: %d %v", r.status, r.header)
	}
	if r := g.send("OPTIONS", "/v1/chat/completions", "", "Origin", "http://evil.example", "Access-Control-Request-Method", "POST"); r.status != 403 ||
		r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", r.status, r.header)
	}
	if r := g.send("GET", "/v1/models", "", "Host", "GW.internal:8443"); r.status != 200 {
		t.Fatalf("configured host name: %d %s", r.status, r.body)
	}
	if r := g.send("GET", "/v1/models", "", "Host", "gw.internal.evil.example"); r.status != 403 {
		t.Fatalf("a name that only starts like the configured one: %d", r.status)
	}
}

// TestHealthHidesProcessDetailFromRemotePeers is part of finding 9: the
// health endpoint showed each service's pid, port and last error to
// peers that /api/services refuses.
func TestHealthHidesProcessDetailFromRemotePeers(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{})
	if r := g.do("POST", "/api/services/svc/start", ""); r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	h := g.gw.HTTPHandler()
	get := func(remote string) string {
		req := httptest.NewRequest(http.MethodGet, "/api/monitoring/health", nil)
		req.RemoteAddr, req.Host = remote, "127.0.0.1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d", remote, w.Code)
		}
		return w.Body.String()
	}
	local := get("127.0.0.1:5000")
	if !strings.Contains(local, `"pid":`) || !strings.Contains(local, `"port":`) {
		t.Fatalf("loopback health lacks the detail: %s", local)
	}
	for _, remote := range []string{"203.0.113.7:5000", "192.168.1.20:5000"} {
		body := get(remote)
		svcs, _ := jsonField(t, []byte(body), "services", "services").([]any)
		if len(svcs) != 1 || strings.Contains(body, `"pid"`) || strings.Contains(body, `"port"`) || strings.Contains(body, "lastError") ||
			strings.Contains(body, "127.0.0.1:") {
			t.Fatalf("%s sees process detail: %s", remote, body)
		}
		if s := svcs[0].(map[string]any); s["state"] != "running" || s["tool"] != "svc" {
			t.Fatalf("%s: the brief view lacks the state: %v", remote, s)
		}
	}
}

// readStatus reads a raw HTTP response's status and error code.
func readStatus(t *testing.T, conn net.Conn, br *bufio.Reader, within time.Duration) (int, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", within, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code, _ := jsonField(t, b, "error", "code").(string)
	return resp.StatusCode, code
}

// TestUploadDeadlineFollowsTheBodySize is finding 6: the body was read
// under the header timeout (an upload slower than that got 400
// incomplete_body whatever its rate), a declared length over the cap
// waited for 8 KiB of body before its 413, and a header timeout answered
// 400 bad_request where README promised 408 request_timeout.
func TestUploadDeadlineFollowsTheBodySize(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_HEADER_TIMEOUT_MS": "300", "OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC": "64KiB"})
	body := []byte(`{"model":"echo","messages":[{"role":"user","content":"` + strings.Repeat("a", 200<<10) + `"}]}`)

	// A 200 KiB body sent over about a second (well above 64 KiB/s, far
	// beyond the 300 ms header timeout) is read; its deadline is 300 ms +
	// 200 KiB at 64 KiB/s. Chunked, the deadline follows what arrived.
	for _, chunked := range []bool{false, true} {
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		if chunked {
			head += "Transfer-Encoding: chunked\r\n\r\n"
		} else {
			head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		}
		conn, br := rawRequest(t, g, head)
		for off := 0; off < len(body); off += 20 << 10 {
			part := body[off:min(off+20<<10, len(body))]
			if chunked {
				fmt.Fprintf(conn, "%x\r\n%s\r\n", len(part), part)
			} else {
				conn.Write(part)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if chunked {
			io.WriteString(conn, "0\r\n\r\n")
		}
		if status, code := readStatus(t, conn, br, 10*time.Second); status != 200 {
			t.Fatalf("slow upload (chunked %v): %d %s", chunked, status, code)
		}
	}

	// A body that stops arriving misses its deadline: 408.
	for _, chunked := range []bool{false, true} {
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		if chunked {
			head += "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n", 9<<10, body[:9<<10])
		} else {
			head += "Content-Length: 20000\r\n\r\n" + string(body[:9<<10])
		}
		conn, br := rawRequest(t, g, head)
		if status, code := readStatus(t, conn, br, 10*time.Second); status != 408 || code != "request_timeout" {
			t.Fatalf("stalled upload (chunked %v): %d %s", chunked, status, code)
		}
	}

	// Headers that never end: 408 request_timeout, as documented.
	conn, br := rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	if status, code := readStatus(t, conn, br, 10*time.Second); status != 408 || code != "request_timeout" {
		t.Fatalf("header timeout: %d %s", status, code)
	}

	// A declared 60 MB body is refused at once, whether or not any of it
	// was sent (before: after the 10 s header timeout, with a 408).
	g2 := startGateway(t, testFile(t, ""), nil)
	for _, sent := range []string{"", `{"model":"echo"`} {
		conn, br := rawRequest(t, g2, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n"+sent)
		if status, code := readStatus(t, conn, br, 5*time.Second); status != 413 || code != "payload_too_large" {
			t.Fatalf("declared 60 MB with %d bytes sent: %d %s", len(sent), status, code)
		}
	}
	if r := g2.post("/v1/chat/completions", `{"model":"echo","messages":[]}`); r.status != 200 {
		t.Fatalf("after the refusals: %d %s", r.status, r.body)
	}
}

// TestStalledReaderReleasesItsUpstream is finding 5: a caller that stops
// reading a stream held it, and its upstream connection, for as long as it
// kept the socket open. Two of them on a connection with max_conns 2 left
// every other caller 503 upstream_busy. With a write timeout their
// streams end and the pool is free again.
func TestStalledReaderReleasesItsUpstream(t *testing.T) {
	resetMock(t)
	f := testFileWith(t, `, "tight": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "connections": {"c": {"api_key_env": "TEST_KEY_A", "max_conns": 2}}}`,
		`, "firehose": {"targets": [{"connection": "tight", "model": "m-firehose"}]},
		   "neighbour": {"targets": [{"connection": "tight", "model": "m-neighbour"}]}`)
	setBehavior(t, map[string]mockprovider.Behavior{"m-firehose": {ChunkCount: 100000, Text: strings.Repeat("x", 100000)}})
	g := startGateway(t, f, map[string]string{"OMNIROUTE_WRITE_TIMEOUT_MS": "300"})
	body := `{"model":"firehose","stream":true,"messages":[]}`
	for i := 0; i < 2; i++ {
		conn, err := net.Dial("tcp", strings.TrimPrefix(g.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(4096) // a reader that stops: its window closes soon
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		head := make([]byte, 12)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, head); err != nil || string(head) != "HTTP/1.1 200" {
			t.Fatalf("stream %d: %q %v", i, head, err)
		}
		// ... and reads nothing more, keeping the connection open.
	}
	waitFor(t, "the stalled streams to end", func() bool {
		return jsonField(t, g.get("/api/monitoring/health").body, "server", "upstreamExchanges") == 0.0
	})
	if r := g.post("/v1/chat/completions", `{"model":"neighbour","messages":[]}`); r.status != 200 {
		t.Fatalf("another caller on the same connection: %d %s", r.status, r.body)
	}
}

// TestTokenBudgetCannotBeBypassed is finding 7 end to end: with a budget
// of 2,000 tokens a minute, six concurrent streams that declare 1,500
// tokens each (once with a duplicate max_tokens, once with 2^63-1) all
// got through; the duplicate and the overflow are now 400s, and honest
// requests are held to the budget.
func TestTokenBudgetCannotBeBypassed(t *testing.T) {
	resetMock(t)
	f := testFileWith(t, `, "budget": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "connections": {"c": {"api_key_env": "TEST_KEY_A", "limits": {"tokens_per_minute": 2000}}}}`,
		`, "budgeted": {"targets": [{"connection": "budget", "model": "m-budgeted"}]}`)
	setBehavior(t, map[string]mockprovider.Behavior{"m-budgeted": {LatencyMS: 300}}) // the streams overlap
	g := startGateway(t, f, map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "1"})
	for _, tc := range []struct{ name, fields string }{
		{"duplicate max_tokens", `"max_tokens":1,"max_tokens":1500`},
		{"overflowing max_tokens", `"max_tokens":9223372036854775807`},
		{"duplicate max_completion_tokens", `"max_completion_tokens":1,"max_completion_tokens":1500`},
	} {
		r := g.post("/v1/chat/completions", `{"model":"budgeted","stream":true,`+tc.fields+`,"messages":[]}`)
		if r.status != 400 || (jsonField(t, r.body, "error", "code") != "duplicate_field" && jsonField(t, r.body, "error", "code") != "invalid_field") {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if n := requests(t, "m-budgeted"); n != 0 {
		t.Fatalf("the provider saw %d smuggled requests", n)
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g.post("/v1/chat/completions", `{"model":"budgeted","stream":true,"max_tokens":1500,"messages":[]}`)
			switch {
			case r.status == 200:
				ok.Add(1)
			case r.status != 429 || jsonField(t, r.body, "error", "code") != "targets_exhausted":
				t.Errorf("a request over the budget: %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	// Each holds 1,500 of the 2,000 tokens while it streams: never two at
	// the provider at once, however the requests interleave.
	if st := mockStats(t).Models["m-budgeted"]; ok.Load() < 1 || st.MaxInflight != 1 {
		t.Fatalf("%d served, %d at the provider at once; want at least 1 and never more than 1", ok.Load(), st.MaxInflight)
	}
}
