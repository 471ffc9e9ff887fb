package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport/gateway"
)

// startGatewayClock is startGateway with the gateway's decision clock
// injected, so cooldowns and windows are driven without sleeping.
func startGatewayClock(t *testing.T, f *config.File, envVars map[string]string, clk clock.Clock) *gwEnv {
	t.Helper()
	return startGatewayWith(t, f, envVars, gateway.Options{Clock: clk})
}

// quotaFile has an OpenAI-style provider (header mapping "openai") with
// two connections, plus whatever models and connection fields are given.
func quotaFile(t *testing.T, connA, models string) *config.File {
	t.Helper()
	js := `{
  "providers": {
    "oai": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat", "messages", "responses"], "rate_limit_headers": "openai",
      "connections": {"a": {"api_key_env": "TEST_KEY_A"` + connA + `}, "b": {"api_key_env": "TEST_KEY_B"}}}
  },
  "models": {` + models + `},
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`
	return fileFrom(t, js)
}

type quotaReport struct {
	Connections []struct {
		ConnectionID string `json:"connectionId"`
		Status       string `json:"status"`
		Sources      []string
		Values       []map[string]any `json:"values"`
		Models       []struct {
			Model  string           `json:"model"`
			Status string           `json:"status"`
			Values []map[string]any `json:"values"`
		} `json:"models"`
		Ledger []struct {
			Model         string `json:"model"`
			TotalTokens   int64  `json:"totalTokens"`
			TotalRequests int64  `json:"totalRequests"`
			Tokens        *struct {
				Limit, Used int64
			} `json:"tokens"`
		} `json:"ledger"`
		Targets []struct {
			Target         string  `json:"target"`
			Quota          string  `json:"quota"`
			Circuit        string  `json:"circuit"`
			CooldownUntil  *string `json:"cooldownUntil"`
			CooldownReason string  `json:"cooldownReason"`
			Eligible       bool    `json:"eligible"`
		} `json:"targets"`
	} `json:"connections"`
}

func (g *gwEnv) quota() quotaReport {
	g.t.Helper()
	r := g.get("/api/omniroute/quota")
	if r.status != 200 {
		g.t.Fatalf("GET /api/omniroute/quota: %d %s", r.status, r.body)
	}
	var q quotaReport
	if err := json.Unmarshal(r.body, &q); err != nil {
		g.t.Fatalf("quota report: %v: %s", err, r.body)
	}
	return q
}

func (q quotaReport) model(conn, model string) string {
	for _, c := range q.Connections {
		if c.ConnectionID != conn {
			continue
		}
		for _, m := range c.Models {
			if m.Model == model {
				return m.Status
			}
		}
	}
	return ""
}

func intp(v int) *int { return &v }

// TestHeadersMoveTrafficBeforeAny429: a connection whose rate-limit headers
// say it is nearly spent is demoted (approaching) or skipped (exhausted)
// before it ever answers 429.
func TestHeadersMoveTrafficBeforeAny429(t *testing.T) {
	resetMock(t)
	g := startGateway(t, quotaFile(t, "", `
    "spend": {"targets": [{"connection": "oai/a", "model": "m-spend-a"}, {"connection": "oai/b", "model": "m-spend-b"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		// 500 of 10000 tokens left: 5 %, below the 20 % threshold.
		"m-spend-a": {RateLimit: mockprovider.RateLimitSpec{Family: "openai", LimitTokens: 10000, RemainingTokens: intp(500)}},
		"m-spend-b": {RateLimit: mockprovider.RateLimitSpec{Family: "openai", LimitTokens: 10000}},
	})
	r := g.post("/v1/chat/completions", `{"model":"spend","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "oai/a/m-spend-a" || r.header.Get("X-Ratelimit-Remaining-Tokens") != "500" {
		t.Fatalf("first request: %d %v", r.status, r.header)
	}
	waitFor(t, "approaching_limit from headers", func() bool { return g.quota().model("oai/a", "m-spend-a") == "approaching_limit" })
	for i := 0; i < 3; i++ {
		r = g.post("/v1/chat/completions", `{"model":"spend","messages":[{"role":"user","content":"hi"}]}`)
		if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "oai/b/m-spend-b" || r.header.Get("X-OmniRoute-Fallbacks") != "0" {
			t.Fatalf("request %d after the headers: %d %v", i, r.status, r.header)
		}
	}
	// Exhausted: skipped outright; it would be tried last otherwise.
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-spend-a": {RateLimit: mockprovider.RateLimitSpec{Family: "openai", LimitTokens: 10000, RemainingTokens: intp(0)}},
		"m-spend-b": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503}},
	})
	g2 := startGateway(t, quotaFile(t, "", `
    "spend": {"targets": [{"connection": "oai/a", "model": "m-spend-a"}, {"connection": "oai/b", "model": "m-spend-b"}]}`), nil)
	if r := g2.post("/v1/chat/completions", `{"model":"spend","messages":[]}`); r.status != 200 {
		t.Fatalf("learning request: %d %s", r.status, r.body)
	}
	waitFor(t, "exhausted from headers", func() bool { return g2.quota().model("oai/a", "m-spend-a") == "exhausted" })
	before := mockStats(t).Models["m-spend-a"].Requests
	r = g2.post("/v1/chat/completions", `{"model":"spend","messages":[]}`)
	if r.status != 503 || mockStats(t).Models["m-spend-a"].Requests != before {
		t.Fatalf("an exhausted target was tried: %d, requests %d → %d", r.status, before, mockStats(t).Models["m-spend-a"].Requests)
	}
	st := mockStats(t)
	if st.Models["m-spend-a"].Failed != 0 {
		t.Fatalf("the spent connection answered errors: %+v", st.Models["m-spend-a"])
	}
}

// TestRetryAfterCoolsForExactlyItsDuration: a 429 with Retry-After: 5
// keeps the target out for 5 s of the gateway's clock, and no longer.
func TestRetryAfterCoolsForExactlyItsDuration(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, quotaFile(t, "", `
    "ra": {"targets": [{"connection": "oai/a", "model": "m-ra-a"}, {"connection": "oai/b", "model": "m-ra-b"}]}`), nil, clk)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-ra-a": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "5", Times: 1}},
	})
	r := g.post("/v1/chat/completions", `{"model":"ra","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "oai/b/m-ra-b" || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("failover: %d %v", r.status, r.header)
	}
	waitFor(t, "the cooldown", func() bool {
		for _, tg := range g.quota().Connections[0].Targets {
			if tg.Target == "oai/a/m-ra-a" {
				return tg.CooldownUntil != nil && *tg.CooldownUntil == "2026-06-01T12:00:05Z" && tg.CooldownReason == "rate_limit"
			}
		}
		return false
	})
	clk.Advance(4999 * time.Millisecond)
	r = g.post("/v1/chat/completions", `{"model":"ra","messages":[]}`)
	if r.header.Get("X-OmniRoute-Target") != "oai/b/m-ra-b" || r.header.Get("X-OmniRoute-Fallbacks") != "0" || mockStats(t).Models["m-ra-a"].Requests != 1 {
		t.Fatalf("at 4.999 s the target must still be out: %v", r.header)
	}
	clk.Advance(time.Millisecond)
	r = g.post("/v1/chat/completions", `{"model":"ra","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "oai/a/m-ra-a" {
		t.Fatalf("at 5 s the target must be back: %d %v", r.status, r.header)
	}
}

// TestAllTargetsOutAnswer429WithEarliestRecovery: when failover runs out
// the 429 names the earliest recovery, and leaves the SDK free to retry
// after it (the failures were transient); when every target is already
// out, the gateway refuses without calling any, or waits when the
// recovery fits the wait budget.
func TestAllTargetsOutAnswer429WithEarliestRecovery(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, quotaFile(t, "", `
    "out": {"targets": [{"connection": "oai/a", "model": "m-out-a"}, {"connection": "oai/b", "model": "m-out-b"}]}`),
		map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "3000"}, clk)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-out-a": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "8", Times: 1}},
		"m-out-b": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfterMS: 5000, Times: 1}},
	})
	r := g.post("/v1/chat/completions", `{"model":"out","messages":[]}`)
	if r.status != 429 || r.header.Get("Retry-After") != "5" || r.header.Get("X-Should-Retry") != "" || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("failover exhausted: %d %v %s", r.status, r.header, r.body)
	}
	waitFor(t, "both cooling", func() bool {
		n := 0
		for _, tg := range g.quota().Connections {
			for _, x := range tg.Targets {
				if x.CooldownUntil != nil {
					n++
				}
			}
		}
		return n == 2
	})
	// Both out, the earliest back in 5 s, beyond the 3 s wait budget.
	before := mockStats(t).Totals.Requests
	r = g.post("/v1/chat/completions", `{"model":"out","messages":[]}`)
	if r.status != 429 || r.header.Get("Retry-After") != "5" || r.header.Get("X-Should-Retry") != "" ||
		jsonField(t, r.body, "error", "code") != "targets_exhausted" || mockStats(t).Totals.Requests != before {
		t.Fatalf("all cooling: %d %v %s", r.status, r.header, r.body)
	}
	// Anthropic callers get their dialect.
	r = g.post("/v1/messages", `{"model":"out","max_tokens":5,"messages":[]}`)
	if r.status != 429 || jsonField(t, r.body, "error", "type") != "rate_limit_error" {
		t.Fatalf("anthropic dialect: %d %s", r.status, r.body)
	}
	// 3 s later the earliest recovery (2 s away) fits the budget: the
	// request waits for it instead of failing, and is served by b.
	clk.Advance(3 * time.Second)
	done := make(chan response, 1)
	go func() { done <- g.post("/v1/chat/completions", `{"model":"out","messages":[]}`) }()
	// The clock moves on only once the request waits (a request that
	// arrived after the move would find b back and never wait).
	waitFor(t, "the request to wait for the recovery", func() bool {
		return strings.Contains(scrape(t, g), "\nomniroute_routing_waiting 1\n")
	})
	select {
	case r := <-done:
		t.Fatalf("answered before the recovery: %d %v %s", r.status, r.header, r.body)
	default:
	}
	clk.Advance(2 * time.Second)
	r = <-done
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "oai/b/m-out-b" {
		t.Fatalf("after waiting: %d %v %s", r.status, r.header, r.body)
	}
	if m := scrape(t, g); !strings.Contains(m, `omniroute_routing_waits_total{route="chat",outcome="recovered"} 1`) ||
		!strings.Contains(m, `omniroute_routing_waits_total{route="chat",outcome="refused"} 1`) ||
		!strings.Contains(m, `omniroute_routing_skips_total{target="oai/a/m-out-a",reason="cooling"}`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "omniroute_routing"))
	}
}

func scrape(t *testing.T, g *gwEnv) string {
	t.Helper()
	r := g.get("/metrics")
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	return string(r.body)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestConcurrentRequestsNeverOvershootTheTokenBudget: 50 concurrent
// requests against a 10k-tokens-per-minute connection never hold more
// than the limit plus one request's estimate at the provider.
//
// The provider holds every answer until all 50 requests have met the
// ledger (each one is either held at the provider or refused with 429), so
// no settled answer frees budget while others are still arriving, however
// slowly a loaded machine delivers them; then the held answers are
// released and settle.
func TestConcurrentRequestsNeverOvershootTheTokenBudget(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)) // one window for the whole test
	// Admission off: all 50 reach the ledger at once (admission would
	// queue them behind each other).
	g := startGatewayClock(t, quotaFile(t, `, "limits": {"tokens_per_minute": 10000}`, `
    "budget": {"targets": [{"connection": "oai/a", "model": "m-budget"}]}`), map[string]string{"ADAPTIVE_ADMISSION_MODE": "off"}, clk)
	setBehavior(t, map[string]mockprovider.Behavior{"m-budget": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailHang}}})
	body := `{"model":"budget","max_tokens":1000,"messages":[{"role":"user","content":"count the tokens"}]}`
	est := int64((len(body)+3)/4 + 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var retryAfter []string
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g.post("/v1/chat/completions", body)
			mu.Lock()
			codes[r.status]++
			if r.status == 429 {
				retryAfter = append(retryAfter, r.header.Get("Retry-After"))
			}
			mu.Unlock()
		}()
	}
	returned := func() (codes429, all int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range codes {
			all += n
		}
		return codes[429], all
	}
	waitFor(t, "every request held at the provider or refused", func() bool {
		refused, all := returned()
		return all > refused || int(mockStats(t).Models["m-budget"].Requests)+refused == 50
	})
	if refused, all := returned(); all > refused {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("answers %v came back while the provider held every request", codes)
	}
	setBehavior(t, map[string]mockprovider.Behavior{"m-budget": {}}) // releases the held requests as successes
	wg.Wait()
	st := mockStats(t).Models["m-budget"]
	if held := st.MaxInflight * est; held > 10000+est {
		t.Fatalf("%d requests in flight at once hold %d tokens (estimate %d) against a 10000 limit", st.MaxInflight, held, est)
	}
	// Every admitted request was held at once, the budget was filled and
	// not overshot: at least limit/estimate requests, at most one more.
	if int64(codes[200]) < 10000/est || int64(codes[200]) > 10000/est+1 || codes[200]+codes[429] != 50 || st.MaxInflight != int64(codes[200]) {
		t.Fatalf("answers %v, %d at the provider at once (estimate %d)", codes, st.MaxInflight, est)
	}
	for _, ra := range retryAfter {
		if ra != "62" { // the reservations of second 0 leave the rolling minute 62 s later (the clock is frozen)
			t.Fatalf("Retry-After %q, want when the first reservations leave the window", ra)
		}
	}
	// Settled at the provider's real usage, which is below the estimate.
	waitFor(t, "the ledger snapshot", func() bool {
		clk.Advance(ledgeractor.PublishInterval) // the ledger publishes on its tick, on the gateway's clock
		return g.quota().Connections[0].Ledger[0].TotalRequests == int64(codes[200])
	})
	q := g.quota()
	l := q.Connections[0].Ledger[0]
	if l.Model != "m-budget" || l.TotalRequests != int64(codes[200]) || l.TotalTokens >= int64(codes[200])*est || l.Tokens == nil || l.Tokens.Limit != 10000 {
		t.Fatalf("ledger %+v (tokens %+v)", l, l.Tokens)
	}
}

// TestStreamUsageSettlesAndIsStripped: on a budgeted connection the
// gateway asks for the chat usage chunk, settles the reservation with it
// and strips it from a caller who did not ask; Anthropic and Responses
// streams settle from their own usage events.
func TestStreamUsageSettlesAndIsStripped(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, quotaFile(t, `, "limits": {"tokens_per_minute": 100000}`, `
    "meter": {"targets": [{"connection": "oai/a", "model": "m-meter"}]}`), nil, clk)
	setBehavior(t, map[string]mockprovider.Behavior{"m-meter": {ChunkCount: 4, CompletionTokens: 7}})
	settled := func() int64 {
		clk.Advance(ledgeractor.PublishInterval) // the ledger publishes on its tick, on the gateway's clock
		q := g.quota()
		return q.Connections[0].Ledger[0].TotalTokens
	}
	body := `{"model":"meter","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	r := g.post("/v1/chat/completions", body)
	if r.status != 200 || strings.Contains(string(r.body), `"choices":[]`) || !strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("the usage chunk reached a caller who did not ask: %s", r.body)
	}
	// The mock counts prompt tokens as bytes/4 of the body it received,
	// which carried the injected stream_options and the upstream name.
	rename := len("m-meter") - len("meter")
	upstreamBody := len(body) + len(`"stream_options":{"include_usage":true},`) + rename
	want := int64((upstreamBody+3)/4 + 7)
	waitFor(t, "the chat stream settled", func() bool { return settled() == want })

	asked := `{"model":"meter","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
	r = g.post("/v1/chat/completions", asked)
	if !strings.Contains(string(r.body), `"choices":[],"usage":{`) {
		t.Fatalf("a caller who asked lost the usage chunk: %s", r.body)
	}
	want += int64((len(asked)+rename+3)/4 + 7)
	waitFor(t, "the second chat stream settled", func() bool { return settled() == want })
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		before := settled()
		b := `{"model":"meter","stream":true,"max_tokens":50,"messages":[],"input":"hello"}`
		if r := g.post(path, b); r.status != 200 {
			t.Fatalf("%s: %d", path, r.status)
		}
		want := before + int64((len(b)+rename+3)/4+7)
		waitFor(t, path+" settled", func() bool { return settled() == want })
	}
}

// TestPollerExhaustionSkipsTheConnection: OpenRouter's key endpoint says
// the key is spent; the connection is skipped without being called.
func TestPollerExhaustionSkipsTheConnection(t *testing.T) {
	resetMock(t)
	if err := mockAdmin.SetQuotaAPIs(mockprovider.QuotaAPIs{OpenRouterKey: json.RawMessage(`{"limit":10,"limit_remaining":0,"usage":10}`)}); err != nil {
		t.Fatal(err)
	}
	f := testFileWith(t, `,
    "router": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "quota_api": {"kind": "openrouter", "interval_ms": 60000},
      "connections": {"main": {"api_key_env": "TEST_KEY_A"}}}`, `,
    "polled": {"targets": [{"connection": "router", "model": "m-polled"}, {"connection": "mock/b", "model": "m-polled-backup"}]}`)
	g := startGateway(t, f, nil)
	waitFor(t, "the poll", func() bool { return g.quota().model("router/main", "m-polled") == "exhausted" })
	r := g.post("/v1/chat/completions", `{"model":"polled","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "mock/b/m-polled-backup" || mockStats(t).Models["m-polled"].Requests != 0 {
		t.Fatalf("spent key used: %d %v", r.status, r.header)
	}
	q := g.quota()
	for _, c := range q.Connections {
		if c.ConnectionID == "router/main" && (c.Status != "exhausted" || c.Sources[0] != "provider_api" || c.Values[0]["source"] != "provider_api") {
			t.Fatalf("router/main %+v", c)
		}
	}
	s, err := mockAdmin.QuotaAPIs()
	if err != nil || s.Requests.Key < 1 || s.Requests.Credits < 1 || s.Requests.Unauthenticated != 0 {
		t.Fatalf("usage API requests %+v %v", s, err)
	}
	if strings.Contains(string(g.get("/api/omniroute/quota").body), "upstream-key-a") {
		t.Fatal("the quota report leaked a credential")
	}
	h := g.get("/api/monitoring/health")
	if q := jsonField(t, h.body, "quota", "targets", "quotaExhausted"); q != float64(1) || jsonField(t, h.body, "status") != "degraded" {
		t.Fatalf("health: %s", h.body)
	}
	if m := scrape(t, g); !strings.Contains(m, `omniroute_quota_models{connection="router/main",state="exhausted"} 1`) ||
		!strings.Contains(m, `omniroute_quota_polls_total{connection="router/main",outcome="ok"}`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "omniroute_quota"))
	}
}

// TestRoutePreview: ranked, explained and validated, and no request
// reaches any provider.
func TestRoutePreview(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	body := `{"candidates":[
 {"providerId":"denied","modelId":"m","capabilityScore":1,"allocation":"deny","healthScore":1,"circuit":"closed","quota":"healthy"},
 {"providerId":"spent","modelId":"m","capabilityScore":1,"allocation":"allow","healthScore":1,"circuit":"closed","quota":"exhausted"},
 {"providerId":"ok","modelId":"m","capabilityScore":0.9,"allocation":"allow","healthScore":0.95,"circuit":"closed","quota":"approaching_limit","latencyMs":800,"errorRate":0.02}]}`
	r := g.post("/api/omniroute/route/preview", body)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var out struct {
		Request             struct{ CandidateCount int }
		Selected            *string
		LiveRequestExecuted *bool
		Candidates          []struct {
			ProviderID string
			Score      float64
			Eligible   bool
			Reasons    []string
			Factors    map[string]float64
		}
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Request.CandidateCount != 3 || out.Selected == nil || *out.Selected != "ok" || out.LiveRequestExecuted == nil || *out.LiveRequestExecuted {
		t.Fatalf("preview %s", r.body)
	}
	c := out.Candidates[0]
	if c.ProviderID != "ok" || !c.Eligible || len(c.Factors) != 9 || c.Factors["quota"] != 0.65 || c.Reasons[len(c.Reasons)-1] != "2% recent errors" {
		t.Fatalf("first candidate %+v", c)
	}
	if out.Candidates[1].Eligible || out.Candidates[2].Eligible {
		t.Fatalf("ineligible candidates: %s", r.body)
	}
	bad := g.post("/api/omniroute/route/preview", `{"candidates":[{"providerId":"x"}]}`)
	if bad.status != 400 || jsonField(t, bad.body, "error", "code") != "invalid_route_preview" ||
		!strings.Contains(fmt.Sprint(jsonField(t, bad.body, "error", "message")), "candidates[0].modelId: required") {
		t.Fatalf("invalid preview: %d %s", bad.status, bad.body)
	}
	if r := g.getWith("/api/omniroute/route/preview"); r.status != 405 {
		t.Fatalf("GET preview: %d", r.status)
	}
	if st := mockStats(t); st.Totals.Requests != 0 {
		t.Fatalf("the preview reached the provider: %+v", st.Totals)
	}
}

// TestManagementAuth: a key set means a bearer token compared exactly;
// without one, only loopback callers are answered.
func TestManagementAuth(t *testing.T) {
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_MANAGEMENT_KEY": "mgmt-key-0123456789"})
	for _, tc := range []struct {
		auth string
		want int
		code string
	}{
		{"", 401, "missing_management_key"},
		{"Bearer wrong", 401, "invalid_management_key"},
		{"Bearer mgmt-key-0123456789x", 401, "invalid_management_key"},
		{"Basic bWdtdA==", 401, "missing_management_key"},
		{"Bearer mgmt-key-0123456789", 200, ""},
		{"bearer mgmt-key-0123456789", 200, ""},
	} {
		var r response
		if tc.auth == "" {
			r = g.getWith("/api/omniroute/quota")
		} else {
			r = g.getWith("/api/omniroute/quota", "Authorization", tc.auth)
		}
		if r.status != tc.want || (tc.code != "" && jsonField(t, r.body, "error", "code") != tc.code) {
			t.Fatalf("%q: %d %s", tc.auth, r.status, r.body)
		}
	}
	// No key: a remote caller is refused (through the net/http adapter,
	// whose remote address the test can set).
	g2 := startGateway(t, testFile(t, ""), nil)
	g2.get("/api/monitoring/health") // the server is serving (Shutdown before Serve would hang)
	h := g2.gw.HTTPHandler()
	for _, tc := range []struct {
		remote string
		want   int
	}{{"203.0.113.7:4000", 403}, {"127.0.0.1:4000", 200}, {"[::1]:4000", 200}} {
		req := httptest.NewRequest(http.MethodGet, "/api/omniroute/quota", nil).WithContext(context.Background())
		req.Host = "127.0.0.1" // httptest says example.com, which the Host check refuses
		req.RemoteAddr = tc.remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		b, _ := io.ReadAll(w.Result().Body)
		if w.Code != tc.want || (tc.want == 403 && !strings.Contains(string(b), "management_loopback_only")) {
			t.Fatalf("%s: %d %s", tc.remote, w.Code, b)
		}
	}
}
