package transport_test

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// routedFile is testFile with aliases, patterns and a default model, as
// README's example config sets them for Claude Code and Codex.
func routedFile(t *testing.T, withDefault bool) *config.File {
	t.Helper()
	f := testFile(t, "")
	f.Aliases = map[string]string{"claude-opus-4-8": "claude", "gpt-6.2-sol": "echo"}
	f.ModelPatterns = []config.ModelPattern{{Match: "claude-*", Model: "claude"}, {Match: "gpt-*", Model: "same-name"}}
	if withDefault {
		f.DefaultModel = "echo"
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestModelRouting: a requested name reaches the configured model it
// resolves to (exact, alias, pattern in order, default), and the provider
// sees the configured model's upstream name, never the alias.
func TestModelRouting(t *testing.T) {
	resetMock(t)
	g := startGateway(t, routedFile(t, true), nil)
	gNoDefault := startGateway(t, routedFile(t, false), nil)
	cases := []struct {
		name, path, model string
		gw                *gwEnv
		status            int
		upstream          string // the model the provider answered for
	}{
		{"exact", "/v1/chat/completions", "echo", g, 200, "m-echo"},
		{"alias", "/v1/chat/completions", "gpt-6.2-sol", g, 200, "m-echo"},
		{"alias to anthropic", "/v1/messages", "claude-opus-4-8", g, 200, "m-claude"},
		{"pattern claude-*", "/v1/messages", "claude-sonnet-9", g, 200, "m-claude"},
		{"pattern gpt-* keeps no alias name upstream", "/v1/chat/completions", "gpt-5-mini", g, 200, "same-name"},
		{"pattern matches across slashes", "/v1/chat/completions", "gpt-x/y", g, 200, "same-name"},
		{"default", "/v1/chat/completions", "anything-else", g, 200, "m-echo"},
		{"no default: unknown", "/v1/chat/completions", "anything-else", gNoDefault, 404, ""},
		{"patterns are case sensitive", "/v1/chat/completions", "GPT-5", gNoDefault, 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","messages":[{"role":"user","content":"hi"}]}`
			if tc.path == "/v1/messages" {
				body = `{"model":"` + tc.model + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
			}
			r := tc.gw.post(tc.path, body)
			if r.status != tc.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if tc.status != 200 {
				if c := jsonField(t, r.body, "error", "code"); c != "model_not_found" {
					t.Fatalf("code %v in %s", c, r.body)
				}
				return
			}
			st := mockStats(t)
			if got := st.Bodies[len(st.Bodies)-1].Model; got != tc.upstream {
				t.Fatalf("the provider was asked for model %v, want %s", got, tc.upstream)
			}
			if got := jsonField(t, r.body, "model"); got != tc.model {
				t.Fatalf("the answer names model %v, want the caller's %s: %s", got, tc.model, r.body)
			}
		})
	}
}

func TestModelRoutingConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		set  func(f *config.File)
		want string
	}{
		{"alias to nothing", func(f *config.File) { f.Aliases = map[string]string{"x": "nope"} }, `aliases.x: "nope" is not a configured model`},
		{"alias shadows a model", func(f *config.File) { f.Aliases = map[string]string{"echo": "claude"} }, `aliases.echo: "echo" is already a model`},
		{"bad alias name", func(f *config.File) { f.Aliases = map[string]string{"a b": "echo"} }, `aliases.a b: alias name`},
		{"pattern to nothing", func(f *config.File) { f.ModelPatterns = []config.ModelPattern{{Match: "x-*", Model: "nope"}} }, `model_patterns[0].model: "nope"`},
		{"bad pattern", func(f *config.File) { f.ModelPatterns = []config.ModelPattern{{Match: "x[*", Model: "echo"}} }, `model_patterns[0].match: model pattern "x[*"`},
		{"empty pattern", func(f *config.File) { f.ModelPatterns = []config.ModelPattern{{Model: "echo"}} }, `model_patterns[0].match: empty model pattern`},
		{"default to nothing", func(f *config.File) { f.DefaultModel = "nope" }, `default_model: "nope" is not a configured model`},
		{"beta mode", func(f *config.File) {
			p := f.Providers["anth"]
			p.AnthropicBeta = &config.BetaPolicy{Mode: "some"}
			f.Providers["anth"] = p
		}, `providers.anth.anthropic_beta.mode: "some" is not a mode`},
		{"beta list", func(f *config.File) {
			p := f.Providers["anth"]
			p.AnthropicBeta = &config.BetaPolicy{Mode: "drop", List: []string{"a,b"}}
			f.Providers["anth"] = p
		}, `providers.anth.anthropic_beta.list[0]: "a,b" is not one beta name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := testFile(t, "")
			tc.set(f)
			err := f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestModelsEndpoints: the list holds models and aliases; /v1/models/{id}
// resolves like a request does; both dialects, errors in each.
func TestModelsEndpoints(t *testing.T) {
	g := startGateway(t, routedFile(t, false), nil)
	av := []string{"Anthropic-Version", "2023-06-01"}
	cases := []struct {
		name    string
		path    string
		headers []string
		status  int
		checks  map[string]any // top-level JSON field → value
		has     []string
	}{
		{"openai list", "/v1/models", nil, 200, map[string]any{"object": "list"}, []string{`"id":"echo"`, `"id":"claude-opus-4-8","object":"model"`, `"alias_of":"claude"`}},
		{"anthropic list", "/v1/models", av, 200, map[string]any{"has_more": false, "first_id": "claude"}, []string{`"type":"model","id":"claude-opus-4-8"`}},
		{"openai one", "/v1/models/echo", nil, 200, map[string]any{"id": "echo", "object": "model"}, nil},
		{"openai alias", "/v1/models/gpt-6.2-sol", nil, 200, map[string]any{"id": "gpt-6.2-sol", "alias_of": "echo"}, nil},
		{"anthropic pattern", "/v1/models/claude-haiku-7", av, 200, map[string]any{"id": "claude-haiku-7", "type": "model"}, nil},
		{"openai unknown", "/v1/models/nope", nil, 404, nil, []string{`"code":"model_not_found"`}},
		{"anthropic unknown", "/v1/models/nope", av, 404, map[string]any{"type": "error"}, []string{`"type":"not_found_error"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := g.getWith(tc.path, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			for k, v := range tc.checks {
				if got := jsonField(t, r.body, k); got != v {
					t.Fatalf("%s = %v, want %v: %s", k, got, v, r.body)
				}
			}
			for _, s := range tc.has {
				if !strings.Contains(string(r.body), s) {
					t.Fatalf("body lacks %s: %s", s, r.body)
				}
			}
			anth := len(tc.headers) > 0
			if rid := r.header.Get("X-Request-Id"); rid == "" || (anth && r.header.Get("Request-Id") != rid) || (!anth && r.header.Get("Request-Id") != "") {
				t.Fatalf("request ids: X-Request-Id %q, request-id %q", rid, r.header.Get("Request-Id"))
			}
		})
	}
}

// TestDialectOfUnknownPathsAndRequestID: a path no route serves answers
// 404 in the dialect its prefix (or anthropic-version) implies; Anthropic
// answers carry request-id; ?beta=true on /v1/messages is accepted.
func TestDialectOfUnknownPathsAndRequestID(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	cases := []struct {
		name      string
		method    string
		path      string
		headers   []string
		status    int
		anthropic bool
	}{
		{"openai unknown", "GET", "/v1/nope", nil, 404, false},
		{"anthropic prefix", "POST", "/v1/messages/batches", nil, 404, true},
		{"anthropic header", "GET", "/v1/files", []string{"Anthropic-Version", "2023-06-01"}, 404, true},
		{"messages ok", "POST", "/v1/messages", nil, 200, true},
		{"messages beta=true", "POST", "/v1/messages?beta=true", nil, 200, true},
		{"messages error", "POST", "/v1/messages?beta=true", []string{"X-Bad", "1"}, 404, true},
		{"chat ok", "POST", "/v1/chat/completions", nil, 200, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			model := "claude"
			if tc.status == 404 && tc.method == "POST" && strings.HasPrefix(tc.path, "/v1/messages?") {
				model = "nope"
			}
			if tc.path == "/v1/chat/completions" {
				model = "echo"
			}
			if tc.method == "GET" {
				r = g.getWith(tc.path, tc.headers...)
			} else {
				r = g.post(tc.path, `{"model":"`+model+`","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, tc.headers...)
			}
			if r.status != tc.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			rid := r.header.Get("X-Request-Id")
			if tc.anthropic {
				if r.header.Get("Request-Id") != rid || rid == "" {
					t.Fatalf("request-id %q, X-Request-Id %q", r.header.Get("Request-Id"), rid)
				}
				if r.status != 200 && (jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "request_id") != rid) {
					t.Fatalf("not an Anthropic error body: %s", r.body)
				}
				return
			}
			if r.header.Get("Request-Id") != "" {
				t.Fatal("request-id on an OpenAI-dialect answer")
			}
			if r.status != 200 && jsonField(t, r.body, "error", "code") != "not_found" {
				t.Fatalf("not an OpenAI error body: %s", r.body)
			}
		})
	}
}

// TestCountTokens: passed through to an Anthropic-dialect provider (the
// mock counts a token per 4 body bytes, the upstream model name written
// in), else a local estimate marked as such, never 0; errors in the
// Anthropic shape.
func TestCountTokens(t *testing.T) {
	resetMock(t)
	g := startGateway(t, translatedFile(t), nil)
	body := `{"model":"claude","messages":[{"role":"user","content":"Count the tokens of this sentence, please."}]}`
	r := g.post("/v1/messages/count_tokens", body, "Anthropic-Version", "2023-06-01")
	if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != "" || r.header.Get("Request-Id") == "" {
		t.Fatalf("pass-through: %d %v %s", r.status, r.header, r.body)
	}
	upstreamBody := strings.Replace(body, `"claude"`, `"m-claude"`, 1)
	if got := jsonField(t, r.body, "input_tokens"); got != float64(len(upstreamBody)/4+1) {
		t.Fatalf("input_tokens %v, want the provider's count of the rewritten body", got)
	}
	var rec *mockprovider.BodyRecord
	for i, b := range mockStats(t).Bodies {
		if b.Path == "/v1/messages/count_tokens" {
			rec = &mockStats(t).Bodies[i]
		}
	}
	if rec == nil || rec.Headers["x-api-key"] != "upstream-key-a" || rec.Headers["anthropic-version"] != "2023-06-01" {
		t.Fatalf("upstream request %+v", rec)
	}
	for _, tc := range []struct {
		name, body string
		min        float64
	}{
		{"estimate", strings.Replace(body, `"claude"`, `"x-chat"`, 1), 5},
		{"estimate of a tiny prompt is not 0", `{"model":"x-chat","messages":[{"role":"user","content":"a"}]}`, 1},
	} {
		r = g.post("/v1/messages/count_tokens", tc.body)
		if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != "estimate" {
			t.Fatalf("%s: %d %v %s", tc.name, r.status, r.header, r.body)
		}
		if n, _ := jsonField(t, r.body, "input_tokens").(float64); n < tc.min {
			t.Fatalf("%s: input_tokens %v, want at least %v", tc.name, n, tc.min)
		}
	}
	for _, tc := range []struct {
		name, method, body string
		status             int
		errType            string
	}{
		{"unknown model", "POST", `{"model":"nope","messages":[]}`, 404, "not_found_error"},
		{"no model", "POST", `{"messages":[]}`, 400, "invalid_request_error"},
		{"bad json", "POST", `{"model":`, 400, "invalid_request_error"},
		{"method", "GET", ``, 405, "invalid_request_error"},
	} {
		if tc.method == "GET" {
			r = g.get("/v1/messages/count_tokens")
		} else {
			r = g.post("/v1/messages/count_tokens", tc.body)
		}
		if r.status != tc.status || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != tc.errType {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
}
