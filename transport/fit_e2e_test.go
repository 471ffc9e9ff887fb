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
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return f
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
