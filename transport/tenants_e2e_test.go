package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport/gateway"
)

// tenantsFile has models for the tenant tests, each with a price (per
// million tokens) so costs are known.
func tenantsFile(t *testing.T) *config.File {
	f := testFile(t, `,
    "ten-gpt": {"targets": [{"connection": "mock/a", "model": "m-ten-gpt"}]},
    "ten-claude": {"targets": [{"connection": "anth", "model": "m-ten-claude"}]},
    "ten-fail": {"targets": [{"connection": "mock/a", "model": "m-ten-first"}, {"connection": "mock/b", "model": "m-ten-second"}]}`)
	f.Prices = config.PriceTable{"m-ten-*": {Input: 1, CachedInput: 0.5, Output: 2}}
	return f
}

type keyCreated struct {
	Key struct {
		Name      string     `json:"name"`
		TenantID  string     `json:"tenantId"`
		Source    string     `json:"source"`
		RevokedAt *time.Time `json:"revokedAt"`
	} `json:"key"`
	Secret string `json:"secret"`
}

func (g *gwEnv) createKey(body string) keyCreated {
	g.t.Helper()
	r := g.post("/api/keys", body)
	if r.status != 201 {
		g.t.Fatalf("POST /api/keys %s: %d %s", body, r.status, r.body)
	}
	var k keyCreated
	if err := json.Unmarshal(r.body, &k); err != nil || !strings.HasPrefix(k.Secret, "sk-omni-") {
		g.t.Fatalf("create answer %s: %v", r.body, err)
	}
	return k
}

// TestKeyLifecycleEndToEnd: a key created over the API works through the
// OpenAI and Anthropic SDKs with its rate-limit headers, is refused with
// 429 and an exact Retry-After once over its limit, 401 once revoked; and a
// restart on the same data directory finds the key, its usage and its
// request log.
func TestKeyLifecycleEndToEnd(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-ten-gpt":    {Text: "hello tenant", ChunkCount: 3, CompletionTokens: 7, CachedTokens: 4},
		"m-ten-claude": {Text: "hello tenant", ChunkCount: 3, CompletionTokens: 5},
	})
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC))
	env := map[string]string{"OMNIROUTE_DATA_DIR": dir}
	g := startGatewayWith(t, tenantsFile(t), env, gateway.Options{Clock: clk})

	// Bad bodies name the field.
	g.createKey(`{"name":"other"}`)
	for _, c := range []struct{ body, code, field string }{
		{`{"name":"x","rpm":5}`, "invalid_policy", "rpm"},
		{`{"name":"x","max_concurrent":-1}`, "invalid_policy", "max_concurrent"},
		{`{"name":"x","daily_budget_usd":-2}`, "invalid_policy", "daily_budget_usd"},
		{`{"name":"x","requests_per_minute":100,"requests_per_day":50}`, "invalid_policy", "requests_per_day"},
		{`{"name":"x","tokens_per_minute":500}`, "invalid_policy", "tokens_per_minute"}, // below a request's 1024 output tokens
		{`{"name":"x","allowed_models":["ten-gpt","nothing-*"]}`, "invalid_policy", "allowed_models[1]"},
		{`{"name":"x","weight":"high"}`, "invalid_policy", "weight"},
		{`{"name":"other"}`, "duplicate_key_name", "name"},
		{`{"name":"bad name"}`, "invalid_key_name", "name"},
	} {
		r := g.post("/api/keys", c.body)
		if r.status != 400 || jsonField(t, r.body, "error", "code") != c.code || jsonField(t, r.body, "error", "field") != c.field {
			t.Errorf("%s: %d %s; want 400 %s naming %s", c.body, r.status, r.body, c.code, c.field)
		}
	}

	k := g.createKey(`{"name":"agents","requests_per_minute":3,"tokens_per_minute":600000,"max_concurrent":4,"daily_budget_usd":20,"weight":2}`)
	if r := g.get("/api/keys"); r.status != 200 || strings.Contains(string(r.body), k.Secret) || !strings.Contains(string(r.body), `"agents"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	oc := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey(k.Secret), option.WithMaxRetries(0), option.WithHTTPClient(g.hc))
	ac := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey(k.Secret), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc))
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "ten-gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	var hr *http.Response
	cc, err := oc.Chat.Completions.New(ctx, chat, option.WithResponseInto(&hr))
	if err != nil || cc.Choices[0].Message.Content != "hello tenant" {
		t.Fatalf("openai: %v", err)
	}
	if h := hr.Header; h.Get("x-ratelimit-limit-requests") != "3" || h.Get("x-ratelimit-remaining-requests") != "2" ||
		h.Get("x-ratelimit-limit-tokens") != "600000" || h.Get("x-ratelimit-reset-requests") != "1m2s" {
		t.Fatalf("openai rate-limit headers: %v", h)
	}
	var ar *http.Response
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "ten-claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&ar))
	if err != nil || len(msg.Content) == 0 {
		t.Fatalf("anthropic: %v", err)
	}
	if h := ar.Header; h.Get("anthropic-ratelimit-requests-limit") != "3" || h.Get("anthropic-ratelimit-requests-remaining") != "1" ||
		h.Get("anthropic-ratelimit-requests-reset") != "2025-11-25T10:01:02Z" || h.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("anthropic rate-limit headers: %v", h)
	}
	stream := oc.Chat.Completions.NewStreaming(ctx, chat)
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	stream.Close()

	// Over the limit: 429 with the limit named and the exact wait (three
	// requests at one instant: they leave the rolling minute with their
	// second, 62 s later).
	_, err = oc.Chat.Completions.New(ctx, chat, option.WithResponseInto(&hr))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "rate_limit_exceeded" {
		t.Fatalf("over the limit: %v", err)
	}
	if h := hr.Header; h.Get("Retry-After") != "62" || h.Get("retry-after-ms") != "62000" || h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("429 headers: %v", h)
	}
	if !strings.Contains(oe.RawJSON(), `"reason":"requests_per_minute"`) {
		t.Fatalf("429 body %s", oe.RawJSON())
	}
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "ten-claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&ar))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ar.Header.Get("anthropic-ratelimit-requests-remaining") != "0" || ar.Header.Get("Retry-After") != "62" {
		t.Fatalf("anthropic over the limit: %v", err)
	}

	// Revoked: 401 on the next request, through both SDKs.
	if r := g.post("/api/keys/agents/revoke", ""); r.status != 200 || jsonField(t, r.body, "key", "revokedAt") == nil {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if _, err = oc.Chat.Completions.New(ctx, chat); !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Fatalf("revoked key (openai): %v", err)
	}
	if _, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "ten-claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}); !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("revoked key (anthropic): %v", err)
	}
	if r := g.post("/api/keys/agents/rotate", ""); r.status != 409 || jsonField(t, r.body, "error", "code") != "key_revoked" {
		t.Fatalf("rotate a revoked key: %d %s", r.status, r.body)
	}

	// Restart on the same data directory.
	g.stop()
	g2 := startGatewayWith(t, tenantsFile(t), env, gateway.Options{Clock: clk})
	var list struct {
		Keys []struct {
			Name      string     `json:"name"`
			RevokedAt *time.Time `json:"revokedAt"`
		} `json:"keys"`
	}
	if r := g2.get("/api/keys"); json.Unmarshal(r.body, &list) != nil || len(list.Keys) != 2 || list.Keys[0].Name != "agents" || list.Keys[0].RevokedAt == nil {
		t.Fatalf("keys after the restart: %s", r.body)
	}
	var usage struct {
		Usage []struct {
			TenantName   string  `json:"tenantName"`
			Model        string  `json:"model"`
			Requests     int64   `json:"requests"`
			Errors       int64   `json:"errors"`
			TokensIn     int64   `json:"tokensIn"`
			TokensOut    int64   `json:"tokensOut"`
			TokensCached int64   `json:"tokensCached"`
			CostUSD      float64 `json:"costUsd"`
		} `json:"usage"`
		Refused []struct {
			TenantName, Code string
			Count            int64
		} `json:"refused"`
	}
	r := g2.get("/api/usage?tenant=agents")
	if err := json.Unmarshal(r.body, &usage); err != nil || len(usage.Usage) != 2 {
		t.Fatalf("usage after the restart: %s", r.body)
	}
	gpt, claude := usage.Usage[1], usage.Usage[0]
	if gpt.Model != "ten-gpt" || gpt.Requests != 2 || gpt.Errors != 0 || gpt.TokensOut != 14 || gpt.TokensCached != 8 ||
		claude.Model != "ten-claude" || claude.Requests != 1 || claude.Errors != 0 || claude.TokensOut != 5 {
		t.Fatalf("usage rows: %+v", usage.Usage)
	}
	// The two refused over the limit are counted, not logged one by one.
	if len(usage.Refused) != 1 || usage.Refused[0].TenantName != "agents" || usage.Refused[0].Code != "rate_limit_exceeded" || usage.Refused[0].Count != 2 {
		t.Fatalf("refusal counts: %s", r.body)
	}
	// Price: input $1, cached $0.5, output $2 per million.
	want := pricing.USD((gpt.TokensIn-gpt.TokensCached)*1000 + gpt.TokensCached*500 + gpt.TokensOut*2000)
	if d := gpt.CostUSD - want; d > 1e-12 || d < -1e-12 {
		t.Fatalf("gpt cost %v, want %v", gpt.CostUSD, want)
	}
	var page struct {
		Requests []struct {
			RequestID     string  `json:"requestId"`
			TenantName    string  `json:"tenantName"`
			Model         string  `json:"model"`
			Target        string  `json:"target"`
			CallerDialect string  `json:"callerDialect"`
			Status        int     `json:"status"`
			ErrorCode     string  `json:"errorCode"`
			Attempts      int     `json:"attempts"`
			LatencyMs     float64 `json:"latencyMs"`
			TokensIn      int64   `json:"tokensIn"`
			CostUSD       float64 `json:"costUsd"`
			ClientIP      string  `json:"clientIp"`
		} `json:"requests"`
		Next string `json:"next"`
	}
	// Two pages, newest first, no record twice. (A stream is logged when
	// its relay ends, which may be after the next request's answer.)
	r = g2.get("/api/requests?tenant=agents&limit=2")
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Requests) != 2 || page.Next == "" {
		t.Fatalf("request log page 1: %s", r.body)
	}
	recs := page.Requests
	r = g2.get("/api/requests?tenant=agents&limit=2&cursor=" + page.Next)
	page.Requests, page.Next = nil, ""
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Requests) != 1 || page.Next != "" {
		t.Fatalf("request log page 2: %s", r.body)
	}
	recs = append(recs, page.Requests...)
	seen := map[string]bool{}
	var served int
	for _, rec := range recs {
		if seen[rec.RequestID] || !strings.HasPrefix(rec.RequestID, "req_") || rec.TenantName != "agents" || rec.ClientIP != "loopback" {
			t.Fatalf("record %+v (twice, or without its id, tenant or address class)", rec)
		}
		seen[rec.RequestID] = true
		switch {
		case rec.Status == 200:
			served++
			wantDialect := map[string]string{"ten-gpt": "chat", "ten-claude": "messages"}[rec.Model]
			if rec.Attempts != 1 || rec.TokensIn == 0 || rec.CostUSD <= 0 || rec.LatencyMs <= 0 || rec.CallerDialect != wantDialect || rec.Target == "" {
				t.Errorf("served record %+v", rec)
			}
		default:
			t.Errorf("record %+v", rec)
		}
	}
	if served != 3 {
		t.Fatalf("%d served records, want 3", served)
	}
	page.Requests = nil
	if r := g2.get("/api/requests?status=2xx&tenant=agents"); json.Unmarshal(r.body, &page) != nil || len(page.Requests) != 3 {
		t.Fatalf("status filter: %s", r.body)
	}
	page.Requests = nil
	if r := g2.get("/api/requests?status=4xx&tenant=agents"); json.Unmarshal(r.body, &page) != nil || len(page.Requests) != 0 {
		t.Fatalf("status filter (the refusals are counts, not records): %s", r.body)
	}
	for q, field := range map[string]string{"status=7": "status", "since=yesterday": "since", "limit=0": "limit", "colour=red": "colour", "cursor=abc": "cursor"} {
		if r := g2.get("/api/requests?" + q); r.status != 400 || jsonField(t, r.body, "error", "field") != field {
			t.Errorf("GET /api/requests?%s: %d %s", q, r.status, r.body)
		}
	}
	if r := g2.get("/api/usage?bucket=week"); r.status != 400 || jsonField(t, r.body, "error", "field") != "bucket" {
		t.Errorf("usage bucket=week: %d %s", r.status, r.body)
	}
	// Nothing secret in the log.
	r = g2.get("/api/requests?limit=1000")
	if strings.Contains(string(r.body), k.Secret) || strings.Contains(string(r.body), "upstream-key-a") {
		t.Fatal("a secret reached the request log")
	}
	if n := strings.Count(string(r.body), `"requestId"`); n != 3 {
		t.Fatalf("%d records, want the 3 served (refusals, and the two requests after the revocation, are counted in /api/usage)", n)
	}
}

// TestBudgetsRollOverAndAllowedModels: a spent daily budget answers 402
// budget_exceeded until 00:00 UTC, a monthly one until the first of the
// month; a model outside allowed_models is 403; a policy update is in
// force on the next request.
func TestBudgetsRollOverAndAllowedModels(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ten-gpt": {CompletionTokens: 100}})
	clk := clock.NewFake(time.Date(2025, 11, 30, 22, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, tenantsFile(t), nil, gateway.Options{Clock: clk})
	// One request costs ~$0.0002; each budget admits one.
	day := g.createKey(`{"name":"day","daily_budget_usd":0.0001,"allowed_models":["ten-*"]}`)
	month := g.createKey(`{"name":"month","monthly_budget_usd":0.0001}`)
	body := chatBody("ten-gpt", false)
	auth := func(k keyCreated) []string { return []string{"Authorization", "Bearer " + k.Secret} }
	if r := g.post("/v1/chat/completions", chatBody("echo", false), auth(day)...); r.status != 403 || jsonField(t, r.body, "error", "code") != "model_not_allowed" {
		t.Fatalf("model outside allowed_models: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		k     keyCreated
		retry string
	}{{day, "7200"}, {month, "7200"}} {
		if r := g.post("/v1/chat/completions", body, auth(c.k)...); r.status != 200 {
			t.Fatalf("%s first: %d %s", c.k.Key.Name, r.status, r.body)
		}
		r := g.post("/v1/chat/completions", body, auth(c.k)...)
		if r.status != 402 || jsonField(t, r.body, "error", "code") != "budget_exceeded" || r.header.Get("Retry-After") != c.retry {
			t.Fatalf("%s spent: %d %v %s", c.k.Key.Name, r.status, r.header, r.body)
		}
	}
	r := g.post("/v1/messages", `{"model":"ten-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", day.Secret)
	if r.status != 402 || jsonField(t, r.body, "error", "type") != "billing_error" {
		t.Fatalf("anthropic caller over budget: %d %s", r.status, r.body)
	}
	// The next day (also the next month): both budgets start from zero.
	clk.Set(time.Date(2025, 12, 1, 0, 0, 1, 0, time.UTC))
	for _, k := range []keyCreated{day, month} {
		if r := g.post("/v1/chat/completions", body, auth(k)...); r.status != 200 {
			t.Fatalf("%s after the rollover: %d %s", k.Key.Name, r.status, r.body)
		}
	}
	// A day later the daily budget is free again, the monthly one is not.
	clk.Set(time.Date(2025, 12, 2, 0, 0, 1, 0, time.UTC))
	if r := g.post("/v1/chat/completions", body, auth(day)...); r.status != 200 {
		t.Fatalf("day budget on the next day: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", body, auth(month)...); r.status != 402 || r.header.Get("Retry-After") != strconv.Itoa(30*86400-1) {
		t.Fatalf("month budget within the month: %d %v", r.status, r.header)
	}
	// A raised budget is in force on the next request.
	if r := g.post("/api/keys/month/policy", `{"monthly_budget_usd":5}`); r.status != 200 {
		t.Fatalf("policy update: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", body, auth(month)...); r.status != 200 {
		t.Fatalf("after raising the budget: %d %s", r.status, r.body)
	}
	if r := g.post("/api/keys/month/policy", `{"monthly_budget_usd":5,"bogus":1}`); r.status != 400 || jsonField(t, r.body, "error", "field") != "bogus" {
		t.Fatalf("bad policy update: %d %s", r.status, r.body)
	}
}

// probeBody is the request that reads a tenant's token bucket back: its
// reservation is ceil(len/4) + max_tokens tokens (internal/ledger.Estimate).
const probeBody = `{"model":"ten-gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

func estimate(body string, maxTokens int64) int64 { return (int64(len(body))+3)/4 + maxTokens }

// charged reads what a tenant with tokens_per_minute 60000 (one token per
// millisecond of its bucket, so the numbers are exact) and max_concurrent
// 1 has been charged on a frozen clock: a probe is admitted once the
// earlier request settled, and its remaining tokens are what is left
// after the earlier charges and its own reservation.
func (g *gwEnv) charged(secret string) int64 {
	g.t.Helper()
	var r response
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = g.post("/v1/chat/completions", probeBody, "Authorization", "Bearer "+secret)
		if r.status == 200 {
			break
		}
		if r.status != 429 || time.Now().After(deadline) {
			g.t.Fatalf("probe: %d %s", r.status, r.body)
		}
		time.Sleep(5 * time.Millisecond) // the earlier request still holds the slot
	}
	left, err := strconv.ParseInt(r.header.Get("x-ratelimit-remaining-tokens"), 10, 64)
	if err != nil {
		g.t.Fatalf("probe headers %v", r.header)
	}
	return 60000 - left - estimate(probeBody, 10)
}

func usageTotal(t *testing.T, body []byte) int64 {
	p, _ := jsonField(t, body, "usage", "prompt_tokens").(float64)
	c, _ := jsonField(t, body, "usage", "completion_tokens").(float64)
	return int64(p + c)
}

// TestTenantSettlesFromRealUsage: the tokens a tenant is charged, read
// back from its bucket: a whole answer's usage; a stream that ended early
// frees what it did not use; a stream the caller left keeps its
// reservation; after a fail-over only the serving attempt's usage counts;
// a provider's refusal (4xx) costs nothing.
func TestTenantSettlesFromRealUsage(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-ten-gpt":    {ChunkCount: 3, CompletionTokens: 3},
		"m-ten-long":   {ChunkCount: 40, ChunkGapMS: 25},
		"m-ten-first":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 500}},
		"m-ten-second": {CompletionTokens: 11},
		"m-ten-bad":    {Fail: mockprovider.FailSpec{Mode: "status", Status: 400}},
	})
	f := tenantsFile(t)
	clk := clock.NewFake(time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, withModels(t, f, `{"ten-long": {"targets": [{"connection": "mock/a", "model": "m-ten-long"}]},
		"ten-bad": {"targets": [{"connection": "mock/a", "model": "m-ten-bad"}]}}`), nil, gateway.Options{Clock: clk})
	policy := `"tokens_per_minute":60000,"max_concurrent":1}`
	n := 0
	key := func() string {
		n++
		return g.createKey(`{"name":"settle` + strconv.Itoa(n) + `",` + policy).Secret
	}

	t.Run("whole answer", func(t *testing.T) {
		k := key()
		body := `{"model":"ten-gpt","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`
		r := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+k)
		if got, want := g.charged(k), usageTotal(t, r.body); r.status != 200 || got != want {
			t.Fatalf("charged %d, want the usage %d (%d %s)", got, want, r.status, r.body)
		}
	})
	t.Run("stream that ends early", func(t *testing.T) {
		k := key()
		body := `{"model":"ten-gpt","max_tokens":4000,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		r := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+k)
		var want int64
		for _, ev := range sseEvents(r.body) {
			if strings.Contains(ev[1], `"usage":{`) {
				want = usageTotal(t, []byte(ev[1]))
			}
		}
		if got := g.charged(k); want == 0 || got != want || got > estimate(body, 4000)-3900 {
			t.Fatalf("charged %d, want the stream's usage %d", got, want)
		}
	})
	t.Run("stream the caller leaves", func(t *testing.T) {
		k := key()
		body := `{"model":"ten-long","max_tokens":3000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := g.hc.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v", err)
		}
		buf := make([]byte, 64)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		if got, want := g.charged(k), estimate(body, 3000); got != want {
			t.Fatalf("charged %d, want the reservation %d", got, want)
		}
	})
	t.Run("fail over", func(t *testing.T) {
		k := key()
		body := `{"model":"ten-fail","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`
		r := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+k)
		if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
			t.Fatalf("fail over: %d %v %s", r.status, r.header, r.body)
		}
		if got, want := g.charged(k), usageTotal(t, r.body); got != want {
			t.Fatalf("charged %d, want the serving attempt's usage %d", got, want)
		}
	})
	t.Run("provider refusal", func(t *testing.T) {
		k := key()
		body := `{"model":"ten-bad","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`
		if r := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+k); r.status != 400 {
			t.Fatalf("want the provider's 400, got %d %s", r.status, r.body)
		}
		if got := g.charged(k); got != 0 {
			t.Fatalf("charged %d for a request the provider refused", got)
		}
	})
}

// withModels adds models (a JSON object of name → model) to f.
func withModels(t *testing.T, f *config.File, models string) *config.File {
	t.Helper()
	var m map[string]config.Model
	if err := json.Unmarshal([]byte(models), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		f.Models[k] = v
	}
	return f
}

// TestSixtyFourConcurrentRequestsAgainstACapOfTen: 64 callers with one
// key (max_concurrent 10, a tight tokens_per_minute) keep sending until
// the token limit refuses them. The provider (the mock's ground truth)
// never has more than 10 of them at once, and the tokens really used
// exceed the limit by at most one request's max_tokens.
func TestSixtyFourConcurrentRequestsAgainstACapOfTen(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ten-conc": {LatencyMS: 40, CompletionTokens: 30}})
	clk := clock.NewFake(time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, withModels(t, tenantsFile(t), `{"ten-conc": {"targets": [{"connection": "mock/a", "model": "m-ten-conc"}]}}`),
		nil, gateway.Options{Clock: clk})
	const limit, maxTokens = 3000, 60
	k := g.createKey(`{"name":"conc","max_concurrent":10,"tokens_per_minute":` + strconv.Itoa(limit) + `}`)
	body := `{"model":"ten-conc","max_tokens":` + strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"count to three"}]}`
	type result struct{ used, capped, rated int64 }
	out := make(chan result, 64)
	for i := 0; i < 64; i++ {
		go func() {
			var res result
			for j := 0; j < 50; j++ {
				r := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+k.Secret)
				if r.status == 200 {
					res.used += usageTotal(t, r.body)
					continue
				}
				reason, _ := jsonField(t, r.body, "error", "reason").(string)
				if r.status != 429 {
					t.Errorf("%d %s", r.status, r.body)
					break
				}
				if reason == "tokens_per_minute" {
					res.rated++
					break
				}
				res.capped++
				time.Sleep(2 * time.Millisecond)
			}
			out <- res
		}()
	}
	var total result
	for i := 0; i < 64; i++ {
		r := <-out
		total.used, total.capped, total.rated = total.used+r.used, total.capped+r.capped, total.rated+r.rated
	}
	peak := mockStats(t).Models["m-ten-conc"].MaxInflight
	if peak > 10 || peak < 2 {
		t.Fatalf("the provider saw %d at once; want 2..10", peak)
	}
	if total.used > limit+maxTokens || total.used < limit/2 {
		t.Fatalf("%d tokens used against a limit of %d (max_tokens %d)", total.used, limit, maxTokens)
	}
	if total.capped == 0 || total.rated == 0 {
		t.Fatalf("refusals: %d by the concurrency cap, %d by the token limit; want both", total.capped, total.rated)
	}
}

// TestDatabaseFailures: a corrupt database stops start-up with a message
// that says what to do; a full one stops the request log (counted, shown
// in health) but never stops serving.
func TestDatabaseFailures(t *testing.T) {
	resetMock(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sqlite.FileName), bytes.Repeat([]byte("not a database "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	e := testEnv(t, map[string]string{"OMNIROUTE_DATA_DIR": dir})
	system := testutil.ActorSystem(t)
	if _, err := gateway.New(system, gateway.Options{Env: e, File: tenantsFile(t), Getenv: testGetenv}); err == nil ||
		!strings.Contains(err.Error(), "corrupt or not a SQLite database") || !strings.Contains(err.Error(), "restore a backup") {
		t.Fatalf("start-up on a corrupt database: %v", err)
	}

	full, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName), sqlite.Options{MaxPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	g := startGatewayWith(t, tenantsFile(t), nil, gateway.Options{Store: full})
	k := g.createKey(`{"name":"filler","requests_per_minute":100000}`)
	failing := func() bool {
		v, _ := jsonField(t, g.get("/api/monitoring/health").body, "tenants", "requestLog", "failing").(bool)
		return v
	}
	long := `{"model":"ten-gpt","messages":[{"role":"user","content":"` + strings.Repeat("padding ", 200) + `"}]}`
	for i := 0; !failing(); i++ {
		if i == 400 {
			t.Fatal("the request log never reported a full database")
		}
		if r := g.post("/v1/chat/completions", long, "Authorization", "Bearer "+k.Secret); r.status != 200 {
			t.Fatalf("request %d while the log fills: %d %s", i, r.status, r.body)
		}
		if i%20 == 19 {
			time.Sleep(300 * time.Millisecond) // a flush
		}
	}
	if r := g.post("/v1/chat/completions", chatBody("ten-gpt", false), "Authorization", "Bearer "+k.Secret); r.status != 200 {
		t.Fatalf("serving with a full database: %d %s", r.status, r.body)
	}
	h := g.get("/api/monitoring/health").body
	if jsonField(t, h, "tenants", "requestLog", "writeErrors").(float64) < 1 || !strings.Contains(fmt.Sprint(jsonField(t, h, "tenants", "requestLog", "lastError")), "full") ||
		jsonField(t, h, "status") != "degraded" {
		t.Fatalf("health with a full database: %s", h)
	}
}

// TestRequestLogToStdout: OMNIROUTE_REQUEST_LOG=stdout writes one line
// per request, with the record's fields and no secret, and one line per
// tenant and code of the refusals before routing (with their count).
func TestRequestLogToStdout(t *testing.T) {
	resetMock(t)
	var out testutil.SyncBuffer
	g := startGatewayWith(t, tenantsFile(t), map[string]string{"OMNIROUTE_REQUEST_LOG": "stdout", "OMNIROUTE_LOG_FORMAT": "json"},
		gateway.Options{RequestLogOutput: &out})
	k := g.createKey(`{"name":"lines","requests_per_minute":10}`)
	for _, m := range []string{"ten-gpt", "nope"} {
		g.post("/v1/chat/completions", chatBody(m, false), "Authorization", "Bearer "+k.Secret)
	}
	g.stop()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	var first, second map[string]any
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("not JSON lines:\n%s", out.String())
	}
	if first["msg"] != "request" || first["tenant"] != "lines" || first["model"] != "ten-gpt" || first["status"] != float64(200) ||
		first["target"] != "mock/a/m-ten-gpt" || first["client_ip"] != "loopback" || first["cost_usd"].(float64) <= 0 {
		t.Fatalf("first line %v", first)
	}
	if second["msg"] != "refused" || second["error_code"] != "model_not_found" || second["tenant"] != "lines" || second["count"] != float64(1) {
		t.Fatalf("second line %v", second)
	}
	if strings.Contains(out.String(), k.Secret) || strings.Contains(out.String(), "upstream-key") {
		t.Fatal("a secret reached the request log lines")
	}
}
