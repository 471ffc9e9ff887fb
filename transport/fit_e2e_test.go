package transport_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// What coding agents send, as the gateway sees it (captured from Claude
// Code 2.1.197 and Codex 0.171.0; the output limit raised to Claude Code's
// largest, 128000).
const (
	claudeCodeShaped = `{"model":%q,"max_tokens":128000,"stream":true,
"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197"},{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
"messages":[{"role":"user","content":[{"type":"text","text":"List the files.","cache_control":{"type":"ephemeral"}}]}],
"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]},"cache_control":{"type":"ephemeral"}},
 {"name":"mcp__db__query","description":"Query the database","input_schema":{"type":"object","properties":{}},"defer_loading":true}],
"metadata":{"user_id":"{\"session_id\":\"s1\"}"},"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},
"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`
	codexShaped = `{"model":%q,"stream":true,"instructions":"You are Codex.",
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>read-only</permissions>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]}],
"tools":[{"type":"function","name":"exec_command","description":"Run a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}},"strict":false}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"high","context":"all_turns"},"store":false,
"include":["reasoning.encrypted_content"],"prompt_cache_key":"conv-1","text":{"verbosity":"low"},"client_metadata":{"session_id":"conv-1"}}`
	chatShaped = `{"model":%q,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":32000,"temperature":0.2}`
)

// fitFile is a gateway with one provider per upstream dialect (all the
// mock, strict for the real model names) and a model per (dialect,
// upstream model): chat-gpt-4o, messages-o4-mini, ….
func fitFile(t *testing.T, extra string) *config.File {
	t.Helper()
	var models []string
	for _, d := range []string{"chat", "messages", "responses"} {
		for _, m := range []string{"gpt-4o", "claude-sonnet-4-5", "o4-mini"} {
			models = append(models, fmt.Sprintf(`%q: {"targets": [{"connection": "p-%s", "model": %q}]}`, d+"-"+m, d, m))
		}
	}
	js := `{"providers": {`
	for i, d := range []string{"chat", "messages", "responses"} {
		if i > 0 {
			js += ","
		}
		js += fmt.Sprintf(`"p-%s": {"base_url": "http://%s/v1", "apis": [%q], "connections": {"k": {"api_key_env": "TEST_KEY_A"}}}`, d, mock.Addr, d)
	}
	js += `}, "models": {` + strings.Join(models, ",") + extra + `}, "auth": {"mode": "loopback", "allow_anonymous": true}}`
	return fileFrom(t, js)
}

func strictMock(t *testing.T, models ...string) {
	t.Helper()
	b := map[string]mockprovider.Behavior{}
	for _, m := range models {
		b[m] = mockprovider.Behavior{Strict: true}
	}
	setBehavior(t, b)
}

func splitHeader(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// TestAgentRequestsFitStrictProviders is the matrix of the issue: a Claude
// Code-shaped request, a Codex-shaped one and a chat request with
// max_tokens, each to gpt-4o, claude-sonnet-4-5 and o4-mini behind each
// upstream dialect, against a mock that refuses what the real providers
// refuse. Each succeeds, and the headers and the request log say what was
// changed; with X-OmniRoute-Strict each that needed a change is refused
// with a 400 naming the field, before any provider is asked.
func TestAgentRequestsFitStrictProviders(t *testing.T) {
	resetMock(t)
	strictMock(t, "gpt-4o", "claude-sonnet-4-5", "o4-mini")
	g := startGateway(t, fitFile(t, ""), nil)
	type shape struct {
		name, path, body, done string
		// adjusted and dropped are changes the answer must name, per
		// upstream model (every dialect); strict the fields a strict
		// refusal may name, per model and upstream dialect ("" accepts).
		adjusted, dropped map[string][]string
		strict            map[string]map[string][]string
	}
	all := func(fields ...string) map[string][]string {
		return map[string][]string{"chat": fields, "messages": fields, "responses": fields}
	}
	shapes := []shape{
		{"Claude Code", "/v1/messages", claudeCodeShaped, "event: message_stop",
			map[string][]string{"gpt-4o": {"max_tokens=128000->16384"}, "claude-sonnet-4-5": {"max_tokens=128000->64000"}, "o4-mini": {"max_tokens=128000->100000"}},
			map[string][]string{"gpt-4o": {"thinking"}},
			map[string]map[string][]string{"gpt-4o": all("max_tokens"), "claude-sonnet-4-5": all("max_tokens"), "o4-mini": all("max_tokens")}},
		{"Codex", "/v1/responses", codexShaped, "event: response.completed",
			map[string][]string{},
			map[string][]string{"gpt-4o": {"reasoning.effort|reasoning", "text.verbosity|verbosity"}, "o4-mini": {"text.verbosity|verbosity"}},
			map[string]map[string][]string{
				"gpt-4o":            {"chat": {"reasoning.effort"}, "messages": {"reasoning.effort"}, "responses": {"reasoning"}},
				"claude-sonnet-4-5": all(""),
				"o4-mini":           {"chat": {"text.verbosity"}, "messages": {""}, "responses": {"text.verbosity"}}}},
		{"chat", "/v1/chat/completions", chatShaped, `"finish_reason":"stop"`,
			map[string][]string{"gpt-4o": {"max_tokens=32000->16384"}},
			map[string][]string{"o4-mini": {"temperature"}},
			map[string]map[string][]string{
				"gpt-4o":            all("max_tokens"),
				"claude-sonnet-4-5": all(""),
				"o4-mini":           {"chat": {"max_tokens"}, "messages": {"temperature"}, "responses": {"temperature"}}}},
	}
	for _, s := range shapes {
		for _, d := range []string{"chat", "messages", "responses"} {
			for _, m := range []string{"gpt-4o", "claude-sonnet-4-5", "o4-mini"} {
				name := d + "-" + m
				t.Run(s.name+" to "+name, func(t *testing.T) {
					body := fmt.Sprintf(s.body, name)
					before := mockStats(t).Models[m]
					r := g.post(s.path, body)
					if r.status != 200 || !strings.Contains(string(r.body), s.done) {
						t.Fatalf("%d %s\n%v", r.status, r.body, r.header)
					}
					after := mockStats(t).Models[m]
					if after.Requests != before.Requests+1 || after.Failed != before.Failed {
						t.Fatalf("the strict provider saw %d requests and refused %d", after.Requests-before.Requests, after.Failed-before.Failed)
					}
					adjusted, dropped := splitHeader(r.header.Get("X-OmniRoute-Adjusted")), splitHeader(r.header.Get("X-OmniRoute-Dropped"))
					t.Logf("adjusted %q, dropped %q", adjusted, dropped)
					for _, a := range s.adjusted[m] {
						if !slices.Contains(adjusted, a) {
							t.Errorf("X-OmniRoute-Adjusted %q lacks %q", adjusted, a)
						}
					}
					for _, a := range s.dropped[m] { // a|b: either name
						found := false
						for _, alt := range strings.Split(a, "|") {
							found = found || slices.Contains(dropped, alt)
						}
						if !found {
							t.Errorf("X-OmniRoute-Dropped %q lacks %q", dropped, a)
						}
					}
					if slices.Equal(s.strict[m][d], []string{""}) && len(adjusted) > 0 {
						t.Errorf("a request that fits was adjusted: %q", adjusted)
					}
					// Strict: refused naming a field, before the provider.
					want := s.strict[m][d]
					sr := g.post(s.path, body, "X-OmniRoute-Strict", "true")
					if slices.Equal(want, []string{""}) {
						if sr.status != 200 {
							t.Fatalf("strict: a request that fits was refused: %d %s", sr.status, sr.body)
						}
						return
					}
					// OpenAI callers get the field in param, Anthropic
					// callers at the head of the message.
					param, _ := jsonField(t, sr.body, "error", "param").(string)
					if param == "" {
						msg, _ := jsonField(t, sr.body, "error", "message").(string)
						param, _, _ = strings.Cut(msg, ":")
					}
					if sr.status != 400 || jsonField(t, sr.body, "error", "code") != "unsupported_parameter" || !slices.Contains(want, param) {
						t.Fatalf("strict: %d %s; want 400 naming one of %q", sr.status, sr.body, want)
					}
					if n := mockStats(t).Models[m].Requests; n != after.Requests {
						t.Fatalf("a strict refusal reached the provider")
					}
				})
			}
		}
	}
	// The request log says what was changed, as the headers did.
	waitFor(t, "the log to have the Claude Code request to chat-gpt-4o", func() bool {
		var page struct {
			Requests []struct {
				Model   string `json:"model"`
				Status  int    `json:"status"`
				Changes string `json:"changes"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(g.get("/api/requests?model=chat-gpt-4o").body, &page); err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Requests {
			if rec.Status == 200 && strings.Contains(rec.Changes, "adjusted=max_tokens=128000->16384") && strings.Contains(rec.Changes, "dropped=") &&
				strings.Contains(rec.Changes, "thinking") {
				return true
			}
		}
		return false
	})
}

// TestProviderOutageIs503 : every target failing at its provider is
// answered with the provider's 5xx and Retry-After, then, while they cool
// down, 503 targets_unavailable with Retry-After (not the caller's 429);
// the caller's own rate limit is still 429.
func TestProviderOutageIs503(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFileWith(t, "", `,
    "down": {"targets": [{"connection": "mock/a", "model": "m-down-a"}, {"connection": "mock/b", "model": "m-down-b"}]}`),
		map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "1", "OMNIROUTE_COOLDOWN_BASE_MS": "10000"})
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-down-a": {Fail: mockprovider.FailSpec{Mode: "status", Status: 500}},
		"m-down-b": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503}},
	})
	r := g.post("/v1/chat/completions", `{"model":"down","messages":[{"role":"user","content":"hi"}]}`)
	if r.status < 500 || r.header.Get("Retry-After") == "" {
		t.Fatalf("outage, first request: %d %v %s", r.status, r.header, r.body)
	}
	waitFor(t, "both targets to cool", func() bool {
		n := 0
		for _, c := range g.quota().Connections {
			for _, tg := range c.Targets {
				if strings.HasSuffix(tg.Target, "m-down-a") || strings.HasSuffix(tg.Target, "m-down-b") {
					if tg.CooldownUntil != nil {
						n++
					}
				}
			}
		}
		return n == 2
	})
	before := mockStats(t).Totals.Requests
	for _, c := range []struct{ path, body, errType string }{
		{"/v1/chat/completions", `{"model":"down","messages":[{"role":"user","content":"hi"}]}`, "server_error"},
		{"/v1/messages", `{"model":"down","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "overloaded_error"},
	} {
		r = g.post(c.path, c.body)
		if r.status != 503 || jsonField(t, r.body, "error", "code") != "targets_unavailable" || jsonField(t, r.body, "error", "type") != c.errType ||
			r.header.Get("Retry-After") == "" || r.header.Get("Retry-After") == "0" {
			t.Fatalf("%s while every target cools after failing: %d %v %s", c.path, r.status, r.header, r.body)
		}
	}
	if n := mockStats(t).Totals.Requests; n != before {
		t.Fatalf("the provider was asked %d times while every target cooled", n-before)
	}

	// The caller's own limit: 429, as before.
	k := g.createKey(`{"name":"slow","requests_per_minute":1}`)
	auth := []string{"Authorization", "Bearer " + k.Secret}
	if r := g.post("/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`, auth...); r.status != 200 {
		t.Fatalf("the key's first request: %d %s", r.status, r.body)
	}
	r = g.post("/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`, auth...)
	if r.status != 429 || jsonField(t, r.body, "error", "code") != "rate_limit_exceeded" || r.header.Get("Retry-After") == "" {
		t.Fatalf("the key's own limit: %d %s", r.status, r.body)
	}
}

// TestConversationsKeepTheirConnection: a round-robin model over two
// connections; ten conversations of five turns (Claude Code-shaped with
// its session header, Codex-shaped with prompt_cache_key), their turns
// interleaved. The mock's own record of each request (by its request id)
// shows every turn of a conversation on one connection, and the
// conversations on both; when one connection fails, its conversations
// move to the other and stay there, and the others stay where they were.
func TestConversationsKeepTheirConnection(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "aff": {"strategy": "round-robin", "targets": [{"connection": "mock/a", "model": "m-aff-a"}, {"connection": "mock/b", "model": "m-aff-b"}]}`), nil)
	type conv struct {
		id        string
		path      string
		history   []string
		upstreams []string // the mock's model for each turn
	}
	var convs []*conv
	for i := 0; i < 5; i++ {
		convs = append(convs, &conv{id: fmt.Sprintf("cc-%d-%08x", i, i*2654435761), path: "/v1/messages"},
			&conv{id: fmt.Sprintf("cx-%d-%08x", i, i*40503), path: "/v1/responses"})
	}
	body := func(c *conv) (string, []string) {
		if c.path == "/v1/messages" {
			msgs := strings.Join(c.history, ",")
			return `{"model":"aff","max_tokens":256,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"messages":[` + msgs + `]}`,
				[]string{"X-Claude-Code-Session-Id", c.id}
		}
		return `{"model":"aff","store":false,"prompt_cache_key":"` + c.id + `","input":[` + strings.Join(c.history, ",") + `]}`, nil
	}
	turn := func(c *conv, k int) response {
		if c.path == "/v1/messages" {
			c.history = append(c.history, fmt.Sprintf(`{"role":"user","content":"turn %d of %s"}`, k, c.id))
		} else {
			c.history = append(c.history, fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"turn %d of %s"}]}`, k, c.id))
		}
		b, h := body(c)
		r := g.post(c.path, b, h...)
		if r.status != 200 {
			t.Fatalf("%s turn %d: %d %s", c.id, k, r.status, r.body)
		}
		if c.path == "/v1/messages" {
			c.history = append(c.history, `{"role":"assistant","content":"ok"}`)
		} else {
			c.history = append(c.history, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}`)
		}
		// What the provider saw of this request, by its id.
		rid := r.header.Get("X-Request-Id")
		model := ""
		for _, rec := range mockStats(t).Bodies {
			if rec.Headers["x-request-id"] == rid && !strings.HasPrefix(rec.Path, "/_mock") {
				model = rec.Model // the last attempt's, after any failover
			}
		}
		if model == "" {
			t.Fatalf("%s turn %d: the mock has no record of request %s", c.id, k, rid)
		}
		c.upstreams = append(c.upstreams, model)
		return r
	}
	// Each round starts one conversation later, so a plain rotation would
	// move every conversation between connections from round to round.
	for k := 0; k < 5; k++ {
		for j := range convs {
			turn(convs[(j+k)%len(convs)], k)
		}
	}
	on := map[string]int{}
	for _, c := range convs {
		for _, u := range c.upstreams {
			if u != c.upstreams[0] {
				t.Fatalf("conversation %s moved between connections: %v", c.id, c.upstreams)
			}
		}
		on[c.upstreams[0]]++
	}
	if on["m-aff-a"] == 0 || on["m-aff-b"] == 0 {
		t.Fatalf("the conversations did not spread over both connections: %v", on)
	}
	if st := mockStats(t); st.Models["m-aff-a"].Requests+st.Models["m-aff-b"].Requests != 50 {
		t.Fatalf("the mock counted %d and %d requests, want 50 in all", st.Models["m-aff-a"].Requests, st.Models["m-aff-b"].Requests)
	}
	t.Logf("conversations per connection: %v", on)

	// Connection a fails: its conversations move to b and stay; b's stay.
	setBehavior(t, map[string]mockprovider.Behavior{"m-aff-a": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503}}})
	for k := 5; k < 8; k++ {
		for _, c := range convs {
			r := turn(c, k)
			if got := r.header.Get("X-OmniRoute-Target"); got != "mock/b/m-aff-b" {
				t.Fatalf("%s turn %d served by %s while a fails", c.id, k, got)
			}
		}
	}
	for _, c := range convs {
		if tail := c.upstreams[5:]; tail[0] != "m-aff-b" || tail[1] != "m-aff-b" || tail[2] != "m-aff-b" {
			t.Fatalf("conversation %s after a failed: %v", c.id, c.upstreams)
		}
	}
}

// TestRequestFallbacks: a body's models (OpenRouter) or fallbacks
// (LiteLLM) list is tried after the requested model's targets failed; the
// answer names the model that served; the list never reaches a provider
// (the strict mock would refuse it); a name the key may not use is 403
// naming it, an unknown one 404, a non-string 400; provider/model names
// resolve.
func TestRequestFallbacks(t *testing.T) {
	resetMock(t)
	f := testFile(t, `,
    "primary": {"targets": [{"connection": "mock/a", "model": "gpt-4o"}]},
    "backup": {"targets": [{"connection": "mock/b", "model": "o4-mini"}]},
    "other": {"targets": [{"connection": "mock/a", "model": "m-other"}]}`)
	g := startGateway(t, f, nil)
	strictMock(t, "gpt-4o", "o4-mini")
	setBehavior(t, map[string]mockprovider.Behavior{"gpt-4o": {Strict: true, Fail: mockprovider.FailSpec{Mode: "status", Status: 503}}, "o4-mini": {Strict: true}})
	for _, field := range []string{`"models":["primary","backup"]`, `"fallbacks":["backup"]`} {
		before := mockStats(t).Models["o4-mini"]
		r := g.post("/v1/chat/completions", `{"model":"primary",`+field+`,"messages":[{"role":"user","content":"hi"}],"max_tokens":100}`)
		if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "mock/b/o4-mini" || jsonField(t, r.body, "model") != "backup" {
			t.Fatalf("%s: %d %v %s", field, r.status, r.header, r.body)
		}
		if st := mockStats(t).Models["o4-mini"]; st.Requests != before.Requests+1 || st.Failed != before.Failed {
			t.Fatalf("%s: the strict backup refused the request (the fallback fields reached it?)", field)
		}
	}
	for _, c := range []struct {
		field, code string
		status      int
	}{
		{`"fallbacks":["nope-model"]`, "model_not_found", 404},
		{`"fallbacks":[42]`, "invalid_field", 400},
		{`"fallbacks":"backup"`, "invalid_field", 400},
		{`"fallbacks":["echo","same-name","failover","backup","other"]`, "invalid_field", 400}, // at most four
	} {
		r := g.post("/v1/chat/completions", `{"model":"primary",`+c.field+`,"messages":[{"role":"user","content":"hi"}]}`)
		if r.status != c.status || jsonField(t, r.body, "error", "code") != c.code {
			t.Fatalf("%s: %d %s", c.field, r.status, r.body)
		}
	}
	// The key's allowed_models apply to each fallback.
	k := g.createKey(`{"name":"scoped","allowed_models":["primary","other"]}`)
	r := g.post("/v1/chat/completions", `{"model":"primary","models":["primary","backup"],"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+k.Secret)
	if r.status != 403 || jsonField(t, r.body, "error", "code") != "model_not_allowed" || jsonField(t, r.body, "error", "param") != "models[1]" {
		t.Fatalf("a fallback the key may not use: %d %s", r.status, r.body)
	}
	// provider/model: the provider's targets of a model or upstream model.
	for name, target := range map[string]string{"mock/backup": "mock/b/o4-mini", "mock/o4-mini": "mock/b/o4-mini", "mock/other": "mock/a/m-other"} {
		r := g.post("/v1/chat/completions", `{"model":"`+name+`","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":10}`)
		if r.status != 200 || r.header.Get("X-OmniRoute-Target") != target || jsonField(t, r.body, "model") != name {
			t.Fatalf("%s: %d %v %s", name, r.status, r.header.Get("X-OmniRoute-Target"), r.body)
		}
	}
}

// TestContextWindowSkipsATarget: a prompt above a target's window skips
// it for one whose window holds it; above every window it is a 400 that
// says so, before any provider is asked. GET /v1/models/{id} shows what
// the gateway believes about each target.
func TestContextWindowSkipsATarget(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "win": {"targets": [{"connection": "mock/a", "model": "m-small", "model_info": {"context_window": 1000, "max_output": 500}},
                        {"connection": "mock/b", "model": "m-large", "model_info": {"context_window": 100000}}]},
    "tiny": {"targets": [{"connection": "mock/a", "model": "m-tiny", "model_info": {"context_window": 500}}]}`), nil)
	long := strings.Repeat("word ", 2000) // about 2500 tokens by the estimate
	r := g.post("/v1/chat/completions", `{"model":"win","messages":[{"role":"user","content":"`+long+`"}]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "mock/b/m-large" {
		t.Fatalf("a long prompt: %d %v", r.status, r.header)
	}
	if r = g.post("/v1/chat/completions", `{"model":"win","messages":[{"role":"user","content":"short"}],"max_tokens":900}`); r.status != 200 ||
		r.header.Get("X-OmniRoute-Target") != "mock/a/m-small" || r.header.Get("X-OmniRoute-Adjusted") != "max_tokens=900->500" {
		t.Fatalf("a short prompt: %d %v", r.status, r.header)
	}
	before := mockStats(t).Totals.Requests
	r = g.post("/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"`+long+`"}]}`)
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "context_length_exceeded" || mockStats(t).Totals.Requests != before {
		t.Fatalf("a prompt above every window: %d %s", r.status, r.body)
	}
	var m struct {
		Strict  bool `json:"strict"`
		Targets []struct {
			Target        string `json:"target"`
			UpstreamModel string `json:"upstream_model"`
			ModelInfo     struct {
				ContextWindow int64    `json:"context_window"`
				MaxOutput     int64    `json:"max_output"`
				Sources       []string `json:"sources"`
			} `json:"model_info"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(g.get("/v1/models/win").body, &m); err != nil || len(m.Targets) != 2 ||
		m.Targets[0].ModelInfo.ContextWindow != 1000 || m.Targets[0].ModelInfo.MaxOutput != 500 || m.Targets[1].UpstreamModel != "m-large" ||
		!slices.Contains(m.Targets[0].ModelInfo.Sources, "target") {
		t.Fatalf("GET /v1/models/win: %v %+v", err, m)
	}
	var real struct {
		Targets []struct {
			ModelInfo struct {
				Family    string `json:"family"`
				MaxOutput int64  `json:"max_output"`
				Reasoning struct {
					Kind string `json:"kind"`
				} `json:"reasoning"`
			} `json:"model_info"`
			Price *struct {
				Input float64 `json:"input"`
			} `json:"price"`
		} `json:"targets"`
	}
	g2 := startGateway(t, testFile(t, `, "o4": {"targets": [{"connection": "mock/a", "model": "o4-mini"}]}`), nil)
	if err := json.Unmarshal(g2.get("/v1/models/o4").body, &real); err != nil || len(real.Targets) != 1 || real.Targets[0].ModelInfo.Family != "openai" ||
		real.Targets[0].ModelInfo.MaxOutput != 100000 || real.Targets[0].ModelInfo.Reasoning.Kind != "effort" || real.Targets[0].Price == nil || real.Targets[0].Price.Input != 1.10 {
		t.Fatalf("GET /v1/models/o4: %v %+v", err, real)
	}
}
