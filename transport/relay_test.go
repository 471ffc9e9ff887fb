package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// The shared mock provider plays Bifrost: the relay forwards the body
// unchanged, so Bifrost requests reach it as model "gpt-relay" while the
// native pipeline rewrites the same model to "m-native". The mock's
// per-model counters tell which path served a request.
const (
	bifrostModel = "gpt-relay"
	nativeModel  = "m-native"
	relayPath    = "/api/v1/relay/chat/completions"
)

func relayFile(t *testing.T) *config.File {
	f := testFileWith(t,
		`, "other": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "connections": {"k": {"api_key_env": "TEST_KEY_A"}}}`,
		`, "gpt-relay": {"targets": [{"connection": "mock/a", "model": "m-native"}]},
		   "llama": {"targets": [{"connection": "other", "model": "m-native"}]}`)
	f.Relay = &config.RelayConfig{
		Tokens: []config.RelayToken{
			{Name: "ci", TokenEnv: "RELAY_CI_TOKEN", Models: []string{"gpt-*", "llama", "groq/*"}},
			{Name: "limited", TokenSHA256: sha([]byte("rt-limited")), RateLimit: &config.RelayRateLimit{Requests: 2, WindowMs: 60_000}},
			{Name: "old", TokenSHA256: sha([]byte("rt-old")), ExpiresAt: "2020-01-01T00:00:00Z"},
		},
		Providers: map[string]config.RelayProvider{"mock": {Bifrost: true}, "other": {Bifrost: false, Reason: "runtime provider"}},
	}
	return f
}

func bifrostEnv(extra map[string]string) map[string]string {
	env := map[string]string{"BIFROST_BASE_URL": "http://" + mock.Addr + "/", "BIFROST_API_KEY": "bf-secret-key", "BIFROST_TIMEOUT_MS": "1000"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func chatBody(model string, stream bool) string {
	return `{"model":"` + model + `","stream":` + strconv.FormatBool(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
}

func (g *gwEnv) relay(token, body string) response {
	g.t.Helper()
	if token == "" {
		return g.post(relayPath, body)
	}
	return g.post(relayPath, body, "Authorization", "Bearer "+token)
}

func requests(t *testing.T, model string) int64 { return mockStats(t).Models[model].Requests }

func relayErrCode(t *testing.T, r response, status int, code string) string {
	t.Helper()
	if r.status != status || jsonField(t, r.body, "error", "code") != code {
		t.Fatalf("got %d %s; want %d %s", r.status, r.body, status, code)
	}
	return jsonField(t, r.body, "error", "message").(string)
}

// routing checks the routing headers: backend, and the fallback reason
// ("" = no fallback headers at all).
func routing(t *testing.T, r response, backend, reason string) {
	t.Helper()
	h := r.header
	if h.Get("X-Routing-Backend") != backend || h.Get("X-Routing-Fallback-Reason") != reason ||
		(reason == "") != (h.Get("X-Routing-Fallback") == "") || (reason != "" && !strings.HasPrefix(h.Get("X-Routing-Fallback"), reason)) {
		t.Fatalf("routing headers backend %q fallback %q reason %q; want %s/%s (status %d %s)",
			h.Get("X-Routing-Backend"), h.Get("X-Routing-Fallback"), h.Get("X-Routing-Fallback-Reason"), backend, reason, r.status, r.body)
	}
	if (backend == "bifrost") != (h.Get("X-Routed-By") == "bifrost") {
		t.Fatalf("X-Routed-By %q with backend %s", h.Get("X-Routed-By"), backend)
	}
}

func TestRelayTokensAndLimits(t *testing.T) {
	resetMock(t)
	if g := startGW(t, testFile(t, ""), gwOpts{}); true {
		relayErrCode(t, g.relay("rt-ci", chatBody(bifrostModel, false)), 404, "relay_not_enabled")
	}
	g := startGW(t, relayFile(t), gwOpts{env: map[string]string{"OMNIROUTE_RELAY_BACKEND": "ts"}})
	relayErrCode(t, g.relay("", chatBody(bifrostModel, false)), 401, "missing_relay_token")
	relayErrCode(t, g.relay("rt-nope", chatBody(bifrostModel, false)), 401, "invalid_api_key")
	if msg := relayErrCode(t, g.relay("rt-old", chatBody(bifrostModel, false)), 401, "relay_token_expired"); !strings.Contains(msg, "2020-01-01T00:00:00Z") {
		t.Fatalf("expiry message %q", msg)
	}
	relayErrCode(t, g.relay("rt-ci", chatBody("echo", false)), 403, "model_not_allowed")
	relayErrCode(t, g.relay("rt-ci", `{"model":`), 400, "invalid_json")
	relayErrCode(t, g.relay("rt-ci", `{"messages":[]}`), 400, "missing_model")
	if r := g.do("GET", relayPath, ""); r.status != 405 {
		t.Fatalf("GET relay: %d", r.status)
	}

	r := g.relay("rt-ci", chatBody(bifrostModel, false))
	if r.status != 200 || r.header.Get("X-Relay-Token") != "ci" || r.header.Get("X-OmniRoute-Target") != "mock/a/m-native" {
		t.Fatalf("native relay: %d %v %s", r.status, r.header, r.body)
	}
	routing(t, r, "native", "")
	if requests(t, nativeModel) != 1 || requests(t, bifrostModel) != 0 {
		t.Fatal("native relay did not go through the native pipeline")
	}

	for i := 0; i < 2; i++ {
		if r := g.relay("rt-limited", chatBody(bifrostModel, false)); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(1-i) {
			t.Fatalf("limited %d: %d remaining %q", i, r.status, r.header.Get("X-RateLimit-Remaining"))
		}
	}
	r = g.relay("rt-limited", chatBody(bifrostModel, false))
	relayErrCode(t, r, 429, "rate_limit_exceeded")
	if r.header.Get("Retry-After") != "30" || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Limit") != "2" {
		t.Fatalf("429 headers %v", r.header)
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{`omniroute_requests_total{route="relay",status="200"} 3`, `omniroute_relay_rejected_total{reason="rate_limited"} 1`,
		`omniroute_relay_rejected_total{reason="expired_token"} 1`, `omniroute_relay_requests_total{backend="native"} 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestRelayForcedBifrost(t *testing.T) {
	resetMock(t)
	g := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(map[string]string{"OMNIROUTE_RELAY_BACKEND": "bifrost"})})
	body := chatBody(bifrostModel, false)
	r := g.relay("rt-ci", body)
	if r.status != 200 || jsonField(t, r.body, "object") != "chat.completion" {
		t.Fatalf("bifrost: %d %s", r.status, r.body)
	}
	routing(t, r, "bifrost", "")
	st := mockStats(t)
	rec := st.Bodies[len(st.Bodies)-1]
	if rec.Model != bifrostModel || rec.SHA256 != sha([]byte(body)) || rec.Path != "/v1/chat/completions" ||
		rec.Headers["authorization"] != "Bearer bf-secret-key" || rec.Headers["x-relay-token-id"] != "ci" || rec.Headers["x-request-id"] != r.header.Get("X-Request-Id") {
		t.Fatalf("Bifrost received %+v", rec)
	}

	r = g.relay("rt-ci", chatBody(bifrostModel, true))
	if r.status != 200 || !strings.Contains(string(r.body), "data: [DONE]") {
		t.Fatalf("bifrost stream: %d %s", r.status, r.body)
	}
	routing(t, r, "bifrost", "")

	// A provider error the relay passes on is the answer.
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "7", Times: 1}}})
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	if r.status != 429 || r.header.Get("Retry-After") != "7" || jsonField(t, r.body, "error", "message") == nil {
		t.Fatalf("provider 429 through the relay: %d %v %s", r.status, r.header, r.body)
	}
	routing(t, r, "bifrost", "")

	// The relay's own failure is a 502, never a silent native answer.
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: mockprovider.FailSpec{Mode: "status", Status: 502, Body: "<html>Bad Gateway</html>"}}})
	before := requests(t, nativeModel)
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	if msg := relayErrCode(t, r, 502, "bad_gateway"); !strings.Contains(msg, "Bifrost answered HTTP 502 without a provider error") {
		t.Fatalf("502 message %q", msg)
	}
	r = g.relay("rt-ci", chatBody(bifrostModel, true))
	relayErrCode(t, r, 502, "bad_gateway")
	if requests(t, nativeModel) != before {
		t.Fatal("forced bifrost fell back to native")
	}

	down := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(map[string]string{"OMNIROUTE_RELAY_BACKEND": "bifrost", "BIFROST_BASE_URL": "http://127.0.0.1:1"})})
	if msg := relayErrCode(t, down.relay("rt-ci", chatBody(bifrostModel, false)), 502, "bad_gateway"); !strings.Contains(msg, "Bifrost sidecar unreachable") {
		t.Fatalf("unreachable message %q", msg)
	}
	none := startGW(t, relayFile(t), gwOpts{env: map[string]string{"OMNIROUTE_RELAY_BACKEND": "bifrost"}})
	if msg := relayErrCode(t, none.relay("rt-ci", chatBody(bifrostModel, false)), 503, "bifrost_unavailable"); !strings.Contains(msg, "BIFROST_BASE_URL") {
		t.Fatalf("no endpoint message %q", msg)
	}
	nostream := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(map[string]string{"OMNIROUTE_RELAY_BACKEND": "bifrost", "BIFROST_STREAMING_ENABLED": "0"})})
	relayErrCode(t, nostream.relay("rt-ci", chatBody(bifrostModel, true)), 503, "bifrost_streaming_disabled")
}

func TestRelayAutoFallbackAndCooldown(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	g := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(nil), clock: clk}) // no backend set: auto, since an endpoint exists
	r := g.relay("rt-ci", chatBody(bifrostModel, false))
	if r.status != 200 {
		t.Fatalf("auto: %d %s", r.status, r.body)
	}
	routing(t, r, "bifrost", "")

	// Manifest: "other" is not eligible; "groq" is not in the manifest.
	r = g.relay("rt-ci", chatBody("llama", false))
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "other/k/m-native" {
		t.Fatalf("ineligible: %d %s", r.status, r.body)
	}
	routing(t, r, "native", "bifrost-ineligible")
	r = g.relay("rt-ci", chatBody("groq/llama-3", false))
	routing(t, r, "native", "bifrost-provider-unknown")
	relayErrCode(t, r, 404, "model_not_found") // the native pipeline answered

	// A relay failure cools the base URL and falls back to native.
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Body: "upstream connect error", Times: 1}}})
	relayed, native := requests(t, bifrostModel), requests(t, nativeModel)
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	if r.status != 200 || !strings.Contains(r.header.Get("X-Routing-Fallback"), "Bifrost answered HTTP 503") {
		t.Fatalf("fallback: %d %v %s", r.status, r.header, r.body)
	}
	routing(t, r, "native", "bifrost-error")
	if requests(t, bifrostModel) != relayed+1 || requests(t, nativeModel) != native+1 {
		t.Fatal("want one Bifrost attempt and one native answer")
	}
	// While cooling, Bifrost is not tried at all.
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	routing(t, r, "native", "bifrost-cooldown")
	if r.header.Get("X-Routing-Fallback") != "bifrost-cooldown; remaining=5000ms" || requests(t, bifrostModel) != relayed+1 {
		t.Fatalf("cooldown header %q", r.header.Get("X-Routing-Fallback"))
	}
	var health struct {
		Relay struct {
			Backend string
			Bifrost struct{ CooldownRemainingMs int64 }
		}
	}
	if err := json.Unmarshal(g.get("/api/monitoring/health").body, &health); err != nil || health.Relay.Backend != "auto" || health.Relay.Bifrost.CooldownRemainingMs != 5000 {
		t.Fatalf("health relay %+v %v", health.Relay, err)
	}
	clk.Advance(4999 * time.Millisecond)
	if r := g.relay("rt-ci", chatBody(bifrostModel, false)); r.header.Get("X-Routing-Fallback") != "bifrost-cooldown; remaining=1ms" {
		t.Fatalf("1 ms before expiry: %q", r.header.Get("X-Routing-Fallback"))
	}
	clk.Advance(time.Millisecond)
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	routing(t, r, "bifrost", "")
	if requests(t, bifrostModel) != relayed+2 {
		t.Fatal("Bifrost not retried after the cooldown expired")
	}

	// Provider errors passed on by the relay never cool it.
	for _, fail := range []mockprovider.FailSpec{{Mode: "status", Status: 429, Times: 1}, {Mode: "status", Status: 500, Times: 1}} {
		setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: fail}})
		r = g.relay("rt-ci", chatBody(bifrostModel, false))
		if r.status != fail.Status || jsonField(t, r.body, "error") == nil {
			t.Fatalf("provider %d: %d %s", fail.Status, r.status, r.body)
		}
		routing(t, r, "bifrost", "")
		r = g.relay("rt-ci", chatBody(bifrostModel, false))
		routing(t, r, "bifrost", "") // not cooling
	}

	// Connection reset and timeout are relay failures too.
	for _, b := range []mockprovider.Behavior{
		{Fail: mockprovider.FailSpec{Mode: "reset", Times: 2}}, // 2: a reset on a pooled connection is retried once
		{LatencyMS: 3000},
	} {
		setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: b})
		r = g.relay("rt-ci", chatBody(bifrostModel, false))
		if r.status != 200 {
			t.Fatalf("fallback after %+v: %d %s", b, r.status, r.body)
		}
		routing(t, r, "native", "bifrost-error")
		if b.LatencyMS > 0 && !strings.Contains(r.header.Get("X-Routing-Fallback"), "timed out after 1000ms") {
			t.Fatalf("timeout detail %q", r.header.Get("X-Routing-Fallback"))
		}
		clk.Advance(5 * time.Second)
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{`omniroute_relay_fallbacks_total{reason="bifrost-error"} 3`, `omniroute_relay_fallbacks_total{reason="bifrost-cooldown"} 2`,
		`omniroute_relay_fallbacks_total{reason="bifrost-ineligible"} 1`, `omniroute_relay_fallbacks_total{reason="bifrost-provider-unknown"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestRelayStreamsFallBackOnlyBeforeTheFirstByte(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	g := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(map[string]string{"OMNIROUTE_RELAY_BACKEND": "auto"}), clock: clk})

	// Before the first byte: a failed relay stream falls back to a native
	// stream that completes.
	for _, fail := range []mockprovider.FailSpec{{Mode: "status", Status: 500, Body: "oops", Times: 1}, {Mode: "reset", Times: 2}} {
		setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: fail}})
		native := requests(t, nativeModel)
		r := g.relay("rt-ci", chatBody(bifrostModel, true))
		if r.status != 200 || !strings.Contains(string(r.body), "data: [DONE]") || requests(t, nativeModel) != native+1 {
			t.Fatalf("fallback stream after %s: %d %s", fail.Mode, r.status, r.body)
		}
		routing(t, r, "native", "bifrost-error")
		clk.Advance(5 * time.Second)
	}

	// After the first byte: no fallback; the stream ends with an in-band
	// error, and the relay is cooled for the next requests.
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {ChunkCount: 6, Fail: mockprovider.FailSpec{Mode: "truncate", AfterChunks: 2, Times: 1}}})
	native := requests(t, nativeModel)
	r := g.relay("rt-ci", chatBody(bifrostModel, true))
	routing(t, r, "bifrost", "")
	events := sseEvents(r.body)
	last := events[len(events)-1][1]
	if r.status != 200 || len(events) < 3 || !strings.Contains(last, `"code":"stream_interrupted"`) || strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("cut stream: %d %s", r.status, r.body)
	}
	if requests(t, nativeModel) != native {
		t.Fatal("a stream that had started was retried natively")
	}
	r = g.relay("rt-ci", chatBody(bifrostModel, true))
	routing(t, r, "native", "bifrost-cooldown")
	if !strings.Contains(string(r.body), "data: [DONE]") {
		t.Fatalf("native stream during cooldown: %s", r.body)
	}

	// An error event from the provider inside a committed stream is passed
	// on as is and does not cool the relay.
	clk.Advance(5 * time.Second)
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: {Fail: mockprovider.FailSpec{Mode: "error_event", AfterChunks: 1, Times: 1}}})
	r = g.relay("rt-ci", chatBody(bifrostModel, true))
	routing(t, r, "bifrost", "")
	r = g.relay("rt-ci", chatBody(bifrostModel, true))
	routing(t, r, "bifrost", "")
}

func TestRelayUsesARunningSupervisedBifrost(t *testing.T) {
	resetMock(t)
	port, err := services.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	f := relayFile(t)
	f.Services = map[string]config.ServiceConfig{"bifrost": {
		Command: config.SelfCommand, Args: []string{"mockprovider", "--listen", "{addr}", "--quiet"},
		HealthPath: "/_mock/health", Identity: "omniroute-mockprovider", Env: map[string]string{"GORACE": "atexit_sleep_ms=0"},
	}}
	g := startGW(t, f, gwOpts{env: map[string]string{"BIFROST_PORT": strconv.Itoa(port)}})
	h := g.service("bifrost")
	if h.Status().Port != port {
		t.Fatalf("BIFROST_PORT not applied: %d", h.Status().Port)
	}
	// Stopped: no endpoint, so the default backend is native.
	r := g.relay("rt-ci", chatBody(bifrostModel, false))
	routing(t, r, "native", "")
	if st := decodeStatus(t, g.do("POST", "/api/services/bifrost/start", "")); st.State != "running" {
		t.Fatalf("start bifrost: %+v", st)
	}
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	if r.status != 200 {
		t.Fatalf("via supervised bifrost: %d %s", r.status, r.body)
	}
	routing(t, r, "bifrost", "")
	sup := &mockprovider.Client{BaseURL: "http://" + h.Addr()}
	if st, err := sup.Stats(); err != nil || st.Models[bifrostModel].Requests != 1 {
		t.Fatalf("supervised bifrost saw %+v %v", st.Models, err)
	}
	if requests(t, bifrostModel) != 0 {
		t.Fatal("the shared mock was used instead of the supervised one")
	}
	var eng struct {
		Engines []struct{ ID, Lifecycle, RelayRole, State string } `json:"engines"`
	}
	if err := json.Unmarshal(g.get("/api/engines").body, &eng); err != nil || len(eng.Engines) != 2 || eng.Engines[1].ID != "bifrost" ||
		eng.Engines[1].RelayRole != "relay" || eng.Engines[1].State != "running" {
		t.Fatalf("engines %+v %v", eng, err)
	}
	if _, err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = g.relay("rt-ci", chatBody(bifrostModel, false))
	routing(t, r, "native", "")
}

// TestRelayAdmittedBeforeItsBodyIsRead: the relay route goes through the
// ingest byte budget before any byte of its body is read, like the other
// body routes, whichever backend serves it: an upload larger than the
// budget is refused unread (413 body_exceeds_budget, the connection
// closed), in the ExpectHandler too, and a chunked one as soon as what was
// read crosses the budget; a heavy upload holds its reservation while its
// body is still to come; a full budget answers 503 chat_admission_busy,
// to a declared length at once and to a chunked body at the heavy
// threshold; no refused upload reaches the relay target or counts as
// relayed; and an upload that fits is relayed and gives its reservation
// back.
func TestRelayAdmittedBeforeItsBodyIsRead(t *testing.T) {
	resetMock(t)
	feed := newPressureFeed()
	env := bifrostEnv(map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "0"})
	for _, backend := range []string{"native", "bifrost"} {
		t.Run(backend, func(t *testing.T) {
			env["OMNIROUTE_RELAY_BACKEND"] = backend
			g := startGW(t, relayFile(t), gwOpts{env: env, pressure: feed.sample})
			auth := "Authorization: Bearer rt-ci"
			sentUpstream := mockStats(t).Totals.Requests
			// Larger than the budget, announced with Expect: refused before
			// the body is sent, as on /v1/chat/completions.
			conn, br := rawRequest(t, g, head(relayPath, 9<<20, "Expect: 100-continue", auth))
			resp, body := readRaw(t, conn, br)
			if resp.StatusCode != 413 || jsonField(t, body, "error", "code") != "body_exceeds_budget" || !resp.Close ||
				resp.Header.Get("X-Omniroute-Admission-Reason") != "body_exceeds_budget" || resp.Header.Get("X-Request-Id") == "" ||
				jsonField(t, body, "error", "message") != "Request body exceeds the chat ingest budget (max 8 MB)." {
				t.Fatalf("expect, over the budget: %d close %v %v %s", resp.StatusCode, resp.Close, resp.Header, body)
			}
			// The token is checked before the body too.
			conn, br = rawRequest(t, g, head(relayPath, 1<<20, "Expect: 100-continue", "Authorization: Bearer rt-nope"))
			if resp, body = readRaw(t, conn, br); resp.StatusCode != 401 || jsonField(t, body, "error", "code") != "invalid_api_key" {
				t.Fatalf("expect, a bad token: %d %s", resp.StatusCode, body)
			}
			// Without Expect: only 8 KiB of the 9 MiB is ever sent, and the
			// answer comes all the same (a route that read first would
			// wait for the rest).
			conn, br = rawRequest(t, g, head(relayPath, 9<<20, auth)+strings.Repeat(" ", 8<<10))
			if resp, body = readRaw(t, conn, br); resp.StatusCode != 413 || jsonField(t, body, "error", "code") != "body_exceeds_budget" || !resp.Close ||
				resp.Header.Get("X-Omniroute-Admission-Reason") != "body_exceeds_budget" {
				t.Fatalf("over the budget, unread: %d close %v %v %s", resp.StatusCode, resp.Close, resp.Header, body)
			}
			// Chunked: refused as soon as what was read crosses the budget,
			// long before the 64 MiB on offer is sent.
			resp, body, sent := sendChunked(t, g, relayPath, auth)
			if resp.StatusCode != 413 || jsonField(t, body, "error", "code") != "body_exceeds_budget" || !resp.Close ||
				resp.Header.Get("X-Omniroute-Admission-Reason") != "body_exceeds_budget" || sent >= chunkedUpload {
				t.Fatalf("chunked over the budget: %d close %v %v %s after %d bytes", resp.StatusCode, resp.Close, resp.Header, body, sent)
			}
			if s := g.gw.Ingest().Snapshot(); s.ShedsByReason["body_exceeds_budget"] != 3 {
				t.Fatalf("sheds %v", s.ShedsByReason)
			}
			// A heavy upload reserves before its body comes; while it holds
			// the whole budget, the next is busy.
			hold := holdUploadTo(t, g, relayPath, 8<<20, auth)
			conn, br = rawRequest(t, g, head(relayPath, 1<<20, auth)+strings.Repeat(" ", 8<<10))
			if resp, body = readRaw(t, conn, br); resp.StatusCode != 503 || jsonField(t, body, "error", "code") != "chat_admission_busy" ||
				jsonField(t, body, "error", "reason") != "inflight_bytes_budget" || resp.Header.Get("Retry-After") == "" || !resp.Close {
				t.Fatalf("budget held: %d %v %s", resp.StatusCode, resp.Header, body)
			}
			// A chunked body is refused when what it read crosses the heavy
			// threshold and nothing is free.
			resp, body, sent = sendChunked(t, g, relayPath, auth)
			if resp.StatusCode != 503 || jsonField(t, body, "error", "code") != "chat_admission_busy" ||
				jsonField(t, body, "error", "reason") != "inflight_bytes_budget" || resp.Header.Get("Retry-After") == "" || !resp.Close || sent >= chunkedUpload {
				t.Fatalf("budget held, chunked: %d %v %s after %d bytes", resp.StatusCode, resp.Header, body, sent)
			}
			hold.Close()
			waitFor(t, "the held reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 })
			// The same refusals and counts as every body route, and none of
			// them reached the relay target or counted as relayed.
			if s := g.gw.Ingest().Snapshot(); s.ShedsByReason["body_exceeds_budget"] != 3 || s.ShedsByReason["inflight_bytes_budget"] != 2 {
				t.Fatalf("sheds %v", s.ShedsByReason)
			}
			m := string(g.get("/metrics").body)
			for _, w := range []string{`omniroute_chat_admission_sheds_total{reason="body_exceeds_budget"} 3`,
				`omniroute_chat_admission_sheds_total{reason="inflight_bytes_budget"} 2`,
				`omniroute_requests_total{route="relay",status="413"} 3`, `omniroute_requests_total{route="relay",status="503"} 2`,
				`omniroute_relay_requests_total{backend="native"} 0`, `omniroute_relay_requests_total{backend="bifrost"} 0`} {
				if !strings.Contains(m, w+"\n") {
					t.Fatalf("metrics lack %q", w)
				}
			}
			if n := mockStats(t).Totals.Requests; n != sentUpstream {
				t.Fatalf("refused uploads reached the relay target: %d requests", n-sentUpstream)
			}
			// A heavy upload that fits is relayed byte for byte and gives
			// its reservation back.
			payload := admissionBody(bifrostModel, 1<<20, 7)
			r := g.post(relayPath, string(payload), "Authorization", "Bearer rt-ci")
			if r.status != 200 {
				t.Fatalf("relayed upload: %d %s", r.status, r.body)
			}
			routing(t, r, backend, "")
			wantModel := map[string]string{"native": nativeModel, "bifrost": bifrostModel}[backend]
			if st := mockStats(t); st.Bodies[len(st.Bodies)-1].Model != wantModel || (backend == "bifrost" && st.Bodies[len(st.Bodies)-1].SHA256 != sha(payload)) {
				t.Fatalf("the provider got %+v", st.Bodies[len(st.Bodies)-1])
			}
			waitFor(t, "the reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 && g.gw.Ingest().ActiveHeavy() == 0 })
		})
	}
}

// TestRelayStreamReturnsBytesAtCommit: a relayed stream, served natively or
// by Bifrost, no longer holds its body once it has committed, as on
// /v1/chat/completions: its bytes go back to the ingest budget while its
// heavy-request slot stays until the stream ends (here: the caller leaves).
func TestRelayStreamReturnsBytesAtCommit(t *testing.T) {
	resetMock(t)
	slow := mockprovider.Behavior{ChunkCount: 50, ChunkGapMS: 200}
	setBehavior(t, map[string]mockprovider.Behavior{bifrostModel: slow, nativeModel: slow})
	body := admissionBody(bifrostModel, 1<<20, 3)
	body = append(body[:len(body)-1], `,"stream":true}`...)
	for _, backend := range []string{"native", "bifrost"} {
		t.Run(backend, func(t *testing.T) {
			g := startGW(t, relayFile(t), gwOpts{env: bifrostEnv(map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_RELAY_BACKEND": backend})})
			req, _ := http.NewRequest(http.MethodPost, g.base+relayPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer rt-ci")
			resp, err := g.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Routing-Backend") != backend {
				t.Fatalf("status %d backend %q", resp.StatusCode, resp.Header.Get("X-Routing-Backend"))
			}
			// The answer's headers are written after the commit, and the
			// stream goes on for ten seconds: both figures are settled here.
			h := g.gw.Ingest()
			if h.InflightBytes() != 0 || h.ActiveHeavy() != 1 {
				t.Fatalf("during the stream: inflight %d heavy %d; want the bytes back and the slot held", h.InflightBytes(), h.ActiveHeavy())
			}
			resp.Body.Close()
			waitFor(t, "the slot to come back", func() bool { return h.ActiveHeavy() == 0 })
		})
	}
}
