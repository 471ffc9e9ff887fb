package transport_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport"
)

// syncBuffer is a log sink shared by the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// relayDemoFile is the default shape of finding 1: a model served natively
// and a relay token for it.
func relayDemoFile(t *testing.T) *config.File {
	f := testFile(t, `, "demo": {"targets": [{"connection": "mock/a", "model": "m-relay-demo"}]}`)
	f.Relay = &config.RelayConfig{Tokens: []config.RelayToken{{Name: "ops", TokenSHA256: sha([]byte("rt-demo"))}}}
	return f
}

// TestRelayWhileTargetCoolsDoesNotCrash is finding 1: a relay request
// that finds its only target cooling down either waits for it (routing
// waits "recovered") or is refused (429 targets_exhausted). Both counted
// a metric that existed only for the chat, messages and responses routes:
// a nil pointer inside the fasthttp handler, and the gateway exited.
func TestRelayWhileTargetCoolsDoesNotCrash(t *testing.T) {
	resetMock(t)
	body := chatBody("demo", false)
	auth := []string{"Authorization", "Bearer rt-demo"}

	// Waits, then is served: the first answer (503) cooled the target
	// for 100 ms, well inside the wait budget.
	setBehavior(t, map[string]mockprovider.Behavior{"m-relay-demo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Times: 1}}})
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
	setBehavior(t, map[string]mockprovider.Behavior{"m-relay-demo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Times: 1}}})
	g2 := startGateway(t, relayDemoFile(t), map[string]string{"OMNIROUTE_RELAY_BACKEND": "native", "OMNIROUTE_ROUTING_MAX_WAIT_MS": "1"})
	g2.post(relayPath, body, auth...)
	waitFor(t, "the cooldown to be published", func() bool { return targetCooling(t, g2, "mock/a/m-relay-demo") })
	r := g2.post(relayPath, body, auth...)
	if r.status != 429 || jsonField(t, r.body, "error", "code") != "targets_exhausted" {
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
	var logs syncBuffer
	g := startGatewayWith(t, testFile(t, ""), nil, transport.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

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
			var logs syncBuffer
			restore := transport.SetPanicProbe(func(where string) {
				if where == "handler" && panicNext.CompareAndSwap(true, false) {
					panic("request bytes: Authorization: Bearer " + plantedShaped + " x-api-key: " + plantedPlain + " upstream said " + plantedProvKey)
				}
			})
			defer restore()
			g := startGatewayWith(t, testFile(t, ""), nil, transport.Options{Logger: logging.New(format, "debug", &logs)})
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
