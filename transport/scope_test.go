package transport_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/transport/gateway"
)

// TestCountTokensUnderTheKeysScope: a token count is a request of the
// caller's key: a model outside its allowed_models is refused before any
// provider is asked, each count spends one request of its
// requests_per_minute (with the rate-limit headers on the answer), and
// over the rate it is refused like a model call. The provider's own
// request budget is respected too: a connection with requests_per_minute
// 1 counts once a minute, later counts are answered by the local
// estimate without asking it.
func TestCountTokensUnderTheKeysScope(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFileWith(t, `,
    "anthlim": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["messages"], "connections": {"k": {"api_key_env": "TEST_KEY_B", "limits": {"requests_per_minute": 1}}}}`, `,
    "count-ok": {"targets": [{"connection": "anth", "model": "m-scope-count"}]},
    "count-other": {"targets": [{"connection": "anth", "model": "m-scope-other"}]},
    "count-limited": {"targets": [{"connection": "anthlim", "model": "m-scope-limited"}]}`), nil)
	k := g.createKey(`{"name":"counter","requests_per_minute":3,"allowed_models":["count-ok"]}`)
	count := func(model string) response {
		return g.post("/v1/messages/count_tokens", `{"model":"`+model+`",`+countPrompt, "x-api-key", k.Secret, "Anthropic-Version", "2023-06-01")
	}
	r := count("count-other")
	if r.status != 403 || jsonField(t, r.body, "error", "code") != "model_not_allowed" || jsonField(t, r.body, "type") != "error" {
		t.Fatalf("a count for a model outside allowed_models: %d %s", r.status, r.body)
	}
	if n := countCalls(t, "m-scope-other"); n != 0 {
		t.Fatalf("the provider counted %d times for a model the key may not use", n)
	}
	for i := 1; i <= 3; i++ {
		r := count("count-ok")
		if r.status != 200 || r.header.Get("Anthropic-Ratelimit-Requests-Limit") != "3" || r.header.Get("Anthropic-Ratelimit-Requests-Remaining") != fmt.Sprint(3-i) {
			t.Fatalf("count %d: %d %v %s", i, r.status, r.header, r.body)
		}
	}
	r = count("count-ok")
	if r.status != 429 || jsonField(t, r.body, "error", "code") != "rate_limit_exceeded" || jsonField(t, r.body, "error", "reason") != "requests_per_minute" ||
		r.header.Get("Retry-After") == "" {
		t.Fatalf("the fourth count of the minute: %d %v %s", r.status, r.header, r.body)
	}
	if n := countCalls(t, "m-scope-count"); n != 3 {
		t.Fatalf("the provider counted %d times, want 3", n)
	}
	// The spent rate refuses model calls too: counts are the key's
	// requests.
	if r := g.post("/v1/messages", `{"model":"count-ok","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", k.Secret); r.status != 429 {
		t.Fatalf("a model call after three counts: %d %s", r.status, r.body)
	}

	// The connection's own request budget (no key here: anonymous).
	for i := 0; i < 3; i++ {
		r := g.post("/v1/messages/count_tokens", `{"model":"count-limited",`+countPrompt, "Anthropic-Version", "2023-06-01")
		want := ""
		if i > 0 {
			want = "estimate"
		}
		if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != want {
			t.Fatalf("count %d on a connection of one request a minute: %d %v %s", i, r.status, r.header, r.body)
		}
	}
	if n := countCalls(t, "m-scope-limited"); n != 1 {
		t.Fatalf("the rate-limited provider counted %d times in a minute, want 1", n)
	}
}

// TestRefusalFloodAddsBoundedRows: a key limited to 5 requests a minute
// sends 400 requests for made-up models (each name different) and 100 more
// with malformed bodies; a revoked key sends 200, and 100 callers with
// keys of their own that nobody configured (the loopback auth mode lets
// them in) ask for made-up models too. The refusals before routing are
// charged to the limited key's rate (its sixth refusal is already a 429,
// and so is its next real request) and are counted per tenant and code,
// callers without a key of the gateway's in one bucket: the request log
// gains no record for them, and /api/usage shows four counts, not 801
// rows.
func TestRefusalFloodAddsBoundedRows(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	k := g.createKey(`{"name":"flooder","requests_per_minute":5}`)
	auth := []string{"Authorization", "Bearer " + k.Secret}
	gone := g.createKey(`{"name":"gone"}`)
	if r := g.post("/api/keys/gone/revoke", ""); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	send := func(n int, body func(int) string, headers ...string) {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += 4 {
					r := g.post("/v1/chat/completions", body(i), headers...)
					mu.Lock()
					statuses[r.status]++
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
	}
	send(400, func(i int) string { return fmt.Sprintf(`{"model":"no-such-model-%d","messages":[]}`, i) }, auth...)
	send(100, func(int) string { return `{"model":` }, auth...)
	send(200, func(i int) string { return fmt.Sprintf(`{"model":"no-such-model-%d","messages":[]}`, i) }, "Authorization", "Bearer "+gone.Secret)
	for i := 0; i < 100; i++ {
		r := g.post("/v1/chat/completions", fmt.Sprintf(`{"model":"no-such-model-%d","messages":[]}`, i), "Authorization", fmt.Sprintf("Bearer stranger-key-%d", i))
		statuses[r.status]++
	}
	if statuses[404] != 105 || statuses[429] != 495 || statuses[401] != 200 {
		t.Fatalf("answers %v: want 5+100 model_not_found, 495 rate_limit_exceeded for the key, 200 invalid_api_key", statuses)
	}
	if r := g.post("/v1/chat/completions", chatBody("echo", false), auth...); r.status != 429 {
		t.Fatalf("the key's real request after its flood: %d %s", r.status, r.body)
	}
	var usage struct {
		Usage   []json.RawMessage `json:"usage"`
		Refused []struct {
			TenantID, TenantName, Code string
			Count                      int64
		} `json:"refused"`
		Total struct{ Refused int64 } `json:"total"`
	}
	waitFor(t, "the refusals counted", func() bool {
		usage.Refused = nil
		r := g.get("/api/usage")
		return json.Unmarshal(r.body, &usage) == nil && usage.Total.Refused == 801
	})
	got := map[string]int64{}
	for _, r := range usage.Refused {
		got[r.TenantName+" "+r.Code] = r.Count
	}
	want := map[string]int64{"flooder model_not_found": 5, "flooder rate_limit_exceeded": 496, "unidentified invalid_api_key": 200, "unidentified model_not_found": 100}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(usage.Usage) != 0 {
		t.Fatalf("refusal counts %v, want %v; usage rows %d", got, want, len(usage.Usage))
	}
	var page struct {
		Requests []json.RawMessage `json:"requests"`
	}
	if r := g.get("/api/requests?limit=1000"); json.Unmarshal(r.body, &page) != nil || len(page.Requests) != 0 {
		t.Fatalf("the flood left %d records: %s", len(page.Requests), r.body)
	}
}

// TestUsageAPIPagesAndWindows: /api/usage answers the last seven days
// unless since says otherwise, in pages of limit rows whose next cursor
// goes on exactly where the page ended, with the window's total on every
// page; /api/requests answers the last day by default. Bad limits and
// cursors are 400 naming the parameter.
func TestUsageAPIPagesAndWindows(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC))
	g := startGatewayWith(t, testFile(t, ""), nil, gateway.Options{Clock: clk})
	send := func(n int, prefix string) {
		for i := 0; i < n; i++ {
			if r := g.post("/v1/chat/completions", chatBody("echo", false), "Authorization", fmt.Sprintf("Bearer %s-%d", prefix, i)); r.status != 200 {
				t.Fatalf("request: %d %s", r.status, r.body)
			}
		}
	}
	send(3, "old") // ten days ago, once the clock moves on
	clk.Advance(10 * 24 * time.Hour)
	send(12, "new") // twelve tenants (unconfigured keys) today
	type page struct {
		Usage []struct {
			TenantID string
			Requests int64
		} `json:"usage"`
		Next  string                   `json:"next"`
		Total struct{ Requests int64 } `json:"total"`
	}
	var got page
	waitFor(t, "the log committed", func() bool {
		// The request log commits on a tick of the gateway's clock: move
		// it one commit interval per look (a record is handed over as its
		// request ends, possibly after the answer arrived here).
		clk.Advance(100 * time.Millisecond)
		got = page{}
		return json.Unmarshal(g.get("/api/usage?since=2026-03-01").body, &got) == nil && got.Total.Requests == 15
	})
	var all []string
	q := "/api/usage?limit=5"
	for pages := 0; ; pages++ {
		got = page{}
		r := g.get(q)
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 || len(got.Usage) > 5 || got.Total.Requests != 12 || pages > 3 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		for _, u := range got.Usage {
			all = append(all, u.TenantID)
		}
		if got.Next == "" {
			break
		}
		q = "/api/usage?limit=5&cursor=" + got.Next
	}
	seen := map[string]bool{}
	for _, id := range all {
		seen[id] = true
	}
	if len(all) != 12 || len(seen) != 12 {
		t.Fatalf("the pages gave %d rows (%d tenants), want the 12 of the default window once each", len(all), len(seen))
	}
	var reqs struct {
		Requests []json.RawMessage `json:"requests"`
	}
	if r := g.get("/api/requests?limit=1000"); json.Unmarshal(r.body, &reqs) != nil || len(reqs.Requests) != 12 {
		t.Fatalf("the default window of /api/requests: %d records", len(reqs.Requests))
	}
	if r := g.get("/api/requests?limit=1000&since=2026-03-01"); json.Unmarshal(r.body, &reqs) != nil || len(reqs.Requests) != 15 {
		t.Fatalf("/api/requests since the first: %d records", len(reqs.Requests))
	}
	for q, field := range map[string]string{"limit=0": "limit", "limit=5001": "limit", "cursor=zzz": "cursor", "cursor=WzEsMl0": "cursor"} {
		if r := g.get("/api/usage?" + q); r.status != 400 || jsonField(t, r.body, "error", "field") != field {
			t.Errorf("GET /api/usage?%s: %d %s", q, r.status, r.body)
		}
	}
}
