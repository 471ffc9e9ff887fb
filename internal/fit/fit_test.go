package fit

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/modelinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func info(name string) *modelinfo.Info {
	i := modelinfo.Shipped().Lookup(name)
	return &i
}

// fitCase is one rule from a provider's documentation: a request in the
// upstream's dialect to a model, what reaches the provider (the fields
// that differ; "-" means absent) and the changes reported.
type fitCase struct {
	name    string
	d       dialect.ID
	model   string
	body    string
	want    map[string]string // top-level field → JSON value, "-" absent
	changes []string          // Change.String()s, in order
}

// The cases cite what each provider documents or answers:
//   - OpenAI, gpt-4o: "max_tokens is too large: 128000. This model supports at most 16384
//     completion tokens"; "Unrecognized request argument supplied: reasoning_effort";
//     "Unsupported parameter: 'reasoning.effort' is not supported with this model."
//   - OpenAI reasoning models (o-series, GPT-5 and later): "Unsupported parameter:
//     'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.";
//     "Unsupported value: 'temperature' does not support 0.7 with this model. Only the
//     default (1) value is supported."; effort levels per model page.
//   - Anthropic: "max_tokens: 128000 > 64000, which is the maximum allowed number of output
//     tokens for claude-sonnet-4-5"; budget_tokens ≥ 1024 and < max_tokens; with thinking,
//     temperature 1 only, top_p ≥ 0.95, no top_k; Sonnet 5 takes neither manual thinking nor
//     non-default sampling; "Extra inputs are not permitted".
//   - xAI grok-4: reasoning effort cannot be specified; presence/frequency penalty and stop
//     are refused. Z.ai GLM: thinking.type. DashScope Qwen: enable_thinking. DeepSeek: max_tokens.
var fitCases = []fitCase{
	{"Claude Code to gpt-4o (translated to chat)", dialect.Chat, "gpt-4o",
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":128000,"reasoning_effort":"high","stream":true,"stream_options":{"include_usage":true}}`,
		map[string]string{"max_tokens": "16384", "reasoning_effort": "-", "stream": "true"},
		[]string{"max_tokens=128000->16384", "reasoning_effort"}},
	{"chat caller to a reasoning model", dialect.Chat, "o4-mini",
		`{"model":"o4-mini","messages":[],"max_tokens":32000,"temperature":0.2,"top_p":0.9,"reasoning_effort":"xhigh"}`,
		map[string]string{"max_tokens": "-", "max_completion_tokens": "32000", "temperature": "-", "top_p": "-", "reasoning_effort": `"high"`},
		[]string{"max_tokens=max_tokens->max_completion_tokens", "reasoning_effort=xhigh->high", "temperature", "top_p"}},
	{"reasoning model's own limit and default effort", dialect.Chat, "o4-mini",
		`{"model":"o4-mini","messages":[],"max_completion_tokens":250000,"presence_penalty":0.5}`,
		map[string]string{"max_completion_tokens": "100000", "presence_penalty": "-"},
		[]string{"max_completion_tokens=250000->100000", "presence_penalty"}},
	{"GPT-5.1 takes temperature with effort none (its default)", dialect.Chat, "gpt-5.1",
		`{"model":"gpt-5.1","messages":[],"temperature":0.2}`, nil, nil},
	{"GPT-5.1 refuses temperature with reasoning on", dialect.Chat, "gpt-5.1",
		`{"model":"gpt-5.1","messages":[],"temperature":0.2,"reasoning_effort":"low"}`,
		map[string]string{"temperature": "-", "reasoning_effort": `"low"`},
		[]string{"temperature"}},
	{"GPT-5 has no none: minimal is its lowest", dialect.Chat, "gpt-5",
		`{"model":"gpt-5","messages":[],"reasoning_effort":"none","verbosity":"low"}`,
		map[string]string{"reasoning_effort": `"minimal"`, "verbosity": `"low"`},
		[]string{"reasoning_effort=none->minimal"}},
	{"GPT-6 never turns a minimal effort off", dialect.Chat, "gpt-6.2-sol",
		`{"model":"gpt-6.2-sol","messages":[],"reasoning_effort":"minimal"}`,
		map[string]string{"reasoning_effort": `"low"`},
		[]string{"reasoning_effort=minimal->low"}},
	{"an undocumented field to OpenAI", dialect.Chat, "gpt-4o",
		`{"model":"gpt-4o","messages":[],"thinking":{"type":"enabled"},"verbosity":"low","metadata":{"a":"b"}}`,
		map[string]string{"thinking": "-", "verbosity": "-", "metadata": `{"a":"b"}`},
		[]string{"thinking", "verbosity"}},
	{"DeepSeek knows max_tokens only", dialect.Chat, "deepseek-chat",
		`{"model":"deepseek-chat","messages":[],"max_completion_tokens":20000,"reasoning_effort":"low","enable_thinking":true}`,
		map[string]string{"max_tokens": "8192", "max_completion_tokens": "-", "reasoning_effort": "-", "enable_thinking": "true"},
		[]string{"max_completion_tokens=20000->8192", "max_completion_tokens=max_completion_tokens->max_tokens", "reasoning_effort"}},
	{"GLM switches thinking by thinking.type", dialect.Chat, "glm-4.6",
		`{"model":"glm-4.6","messages":[],"reasoning_effort":"high"}`,
		map[string]string{"reasoning_effort": "-", "thinking": `{"type":"enabled"}`},
		[]string{"reasoning_effort=high->thinking:true"}},
	{"Qwen switches thinking by enable_thinking", dialect.Chat, "qwen-plus",
		`{"model":"qwen-plus","messages":[],"reasoning_effort":"none"}`,
		map[string]string{"reasoning_effort": "-", "enable_thinking": "false"},
		[]string{"reasoning_effort=none->enable_thinking:false"}},
	{"grok-4 reasons always and refuses stop", dialect.Chat, "grok-4",
		`{"model":"grok-4","messages":[],"reasoning_effort":"high","stop":["x"]}`,
		map[string]string{"reasoning_effort": "-", "stop": "-"},
		[]string{"reasoning_effort", "stop"}},

	{"Codex to gpt-4o (Responses)", dialect.Responses, "gpt-4o",
		`{"model":"gpt-4o","input":[],"reasoning":{"effort":"low","context":"all_turns"},"text":{"verbosity":"low"},"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","parallel_tool_calls":false,"store":false,"client_metadata":{"session_id":"s"}}`,
		map[string]string{"reasoning": "-", "text": "-", "include": "-", "prompt_cache_key": `"k"`, "parallel_tool_calls": "false", "client_metadata": `{"session_id":"s"}`},
		[]string{"reasoning", "include[reasoning.encrypted_content]", "text.verbosity"}},
	{"Codex to o4-mini (Responses)", dialect.Responses, "o4-mini",
		`{"model":"o4-mini","input":[],"reasoning":{"effort":"xhigh","summary":"auto"},"text":{"verbosity":"low","format":{"type":"text"}},"include":["reasoning.encrypted_content","message.output_text.logprobs"],"max_output_tokens":200000,"temperature":0.5}`,
		map[string]string{"reasoning": `{"effort":"high","summary":"auto"}`, "text": `{"format":{"type":"text"}}`,
			"include": `["reasoning.encrypted_content"]`, "max_output_tokens": "100000", "temperature": "-"},
		[]string{"max_output_tokens=200000->100000", "reasoning.effort=xhigh->high", "text.verbosity", "temperature", "include[message.output_text.logprobs]"}},
	{"Codex to its own model passes", dialect.Responses, "gpt-6.2-sol",
		`{"model":"gpt-6.2-sol","input":[],"reasoning":{"effort":"low","context":"all_turns"},"text":{"verbosity":"low"},"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{}}`,
		nil, nil},

	{"Claude Code to claude-sonnet-4-5", dialect.Messages, "claude-sonnet-4-5",
		`{"model":"claude-sonnet-4-5","messages":[],"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"max_tokens":128000,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"metadata":{"user_id":"u"},"context_management":{"edits":[]},"stream":true}`,
		map[string]string{"max_tokens": "64000", "thinking": `{"type":"enabled","budget_tokens":24576}`, "output_config": "-",
			"metadata": `{"user_id":"u"}`, "context_management": `{"edits":[]}`},
		[]string{"max_tokens=128000->64000", "output_config.effort", "thinking=adaptive->enabled:24576"}},
	{"a budget at max_tokens is cut to three quarters", dialect.Messages, "claude-sonnet-4-5",
		`{"model":"claude-sonnet-4-5","messages":[],"max_tokens":128000,"thinking":{"type":"enabled","budget_tokens":127999},"temperature":0.5,"top_k":5,"top_p":0.99}`,
		map[string]string{"max_tokens": "64000", "thinking": `{"type":"enabled","budget_tokens":48000}`, "temperature": "-", "top_k": "-", "top_p": "0.99"},
		[]string{"max_tokens=128000->64000", "thinking.budget_tokens=127999->48000", "temperature", "top_k"}},
	{"a budget to an adaptive model", dialect.Messages, "claude-opus-4-8",
		`{"model":"claude-opus-4-8","messages":[],"max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999}}`,
		map[string]string{"thinking": `{"type":"adaptive"}`, "output_config": `{"effort":"high"}`},
		[]string{"thinking=enabled->adaptive", "output_config.effort=->high"}},
	{"thinking to a model that does not reason", dialect.Messages, "claude-3-5-haiku",
		`{"model":"claude-3-5-haiku","messages":[],"max_tokens":20000,"thinking":{"type":"enabled","budget_tokens":4000},"output_config":{"effort":"low","format":{"type":"json_schema"}}}`,
		map[string]string{"max_tokens": "8192", "thinking": "-", "output_config": `{"format":{"type":"json_schema"}}`},
		[]string{"max_tokens=20000->8192", "thinking", "output_config.effort"}},
	{"Sonnet 5 thinks adaptively and takes no sampling settings", dialect.Messages, "claude-sonnet-5",
		`{"model":"claude-sonnet-5","messages":[],"max_tokens":1000,"thinking":{"type":"enabled","budget_tokens":2000},"temperature":0.3}`,
		map[string]string{"thinking": `{"type":"adaptive"}`, "output_config": `{"effort":"low"}`, "temperature": "-"},
		[]string{"thinking=enabled->adaptive", "output_config.effort=->low", "temperature"}},
	{"Fable always thinks: a budget becomes its effort", dialect.Messages, "claude-fable-5-1",
		`{"model":"claude-fable-5-1","messages":[],"max_tokens":30000,"thinking":{"type":"enabled","budget_tokens":24000}}`,
		map[string]string{"thinking": "-", "output_config": `{"effort":"high"}`},
		[]string{"thinking", "output_config.effort=->high"}},
	{"Fable takes adaptive thinking as it is", dialect.Messages, "claude-fable-5-1",
		`{"model":"claude-fable-5-1","messages":[],"max_tokens":1000,"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}}`, nil, nil},
	{"a budget below Anthropic's minimum", dialect.Messages, "claude-sonnet-4-5",
		`{"model":"claude-sonnet-4-5","messages":[],"max_tokens":1200,"thinking":{"type":"enabled","budget_tokens":900}}`,
		map[string]string{"thinking": "-"},
		[]string{"thinking"}},
	{"Anthropic requires max_tokens", dialect.Messages, "claude-sonnet-4-5",
		`{"model":"claude-sonnet-4-5","messages":[],"thinking":{"type":"enabled","budget_tokens":2000}}`,
		map[string]string{"max_tokens": "6096", "thinking": `{"type":"enabled","budget_tokens":2000}`},
		[]string{"max_tokens=->6096"}},
	{"an undocumented field to Anthropic", dialect.Messages, "claude-sonnet-4-5",
		`{"model":"claude-sonnet-4-5","messages":[],"max_tokens":100,"reasoning_effort":"high","n":2}`,
		map[string]string{"reasoning_effort": "-", "n": "-"},
		[]string{"reasoning_effort", "n"}},

	{"a model nothing is known about passes", dialect.Chat, "mock-demo",
		`{"model":"mock-demo","messages":[],"max_tokens":999999,"reasoning_effort":"high","anything":1}`, nil, nil},
	{"within every limit nothing changes", dialect.Chat, "gpt-4o",
		`{"model":"gpt-4o","messages":[],"max_tokens":1000,"temperature":0.2,"tools":[]}`, nil, nil},
}

// topLevel decodes a body's top-level members as raw JSON.
func topLevel(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

func compact(t *testing.T, raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestFitRules(t *testing.T) {
	var f Fitter
	for _, c := range fitCases {
		t.Run(c.name, func(t *testing.T) {
			out, changed, err := f.Fit(nil, []byte(c.body), nil, c.d, info(c.model), &Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range f.Changes() {
				got = append(got, ch.String())
			}
			if !reflect.DeepEqual(got, c.changes) {
				t.Errorf("changes %q, want %q", got, c.changes)
			}
			if changed != (c.want != nil) {
				t.Fatalf("changed = %v, want %v (%s)", changed, c.want != nil, out)
			}
			if !changed {
				return
			}
			before, after := topLevel(t, []byte(c.body)), topLevel(t, out)
			for k, v := range before { // everything not named passes unchanged
				if _, named := c.want[k]; !named && compact(t, after[k]) != compact(t, v) {
					t.Errorf("%s changed: %s -> %s", k, v, after[k])
				}
			}
			for k, want := range c.want {
				v, ok := after[k]
				switch {
				case want == "-" && ok:
					t.Errorf("%s still sent: %s", k, v)
				case want != "-" && (!ok || compact(t, v) != compact(t, json.RawMessage(want))):
					t.Errorf("%s = %s, want %s", k, v, want)
				}
			}
			// Fitting is idempotent: what was fitted needs nothing more.
			if again, changed, err := f.Fit(nil, out, nil, c.d, info(c.model), &Options{}); err != nil || changed {
				t.Errorf("fitting the fitted body changed it again (%v): %s -> %s, %v", err, out, again, f.Changes())
			}
		})
	}
}

// TestStrictRefusesNamingTheField: in strict mode the first change is a
// refusal naming the field and what the model takes; a request that
// fits passes.
func TestStrictRefusesNamingTheField(t *testing.T) {
	var f Fitter
	for _, c := range fitCases {
		_, _, err := f.Fit(nil, []byte(c.body), nil, c.d, info(c.model), &Options{Strict: true})
		var r *Refusal
		if len(c.changes) == 0 {
			if err != nil {
				t.Errorf("%s: a fitting request refused: %v", c.name, err)
			}
			continue
		}
		if !errors.As(err, &r) {
			t.Errorf("%s: strict mode did not refuse: %v", c.name, err)
			continue
		}
		field, _, _ := strings.Cut(c.changes[0], "=")
		if r.Field != field || !strings.Contains(r.Message, "strict") {
			t.Errorf("%s: refused %q %q; want the field %q", c.name, r.Field, r.Message, field)
		}
	}
	_, _, err := f.Fit(nil, []byte(`{"model":"gpt-4o","messages":[],"max_tokens":128000}`), nil, dialect.Chat, info("gpt-4o"), &Options{Strict: true})
	if err == nil || !strings.Contains(err.Error(), "max_tokens: 128000 does not fit the model (it generates at most 16384 output tokens") {
		t.Fatalf("strict refusal: %v", err)
	}
}

// TestPlumbing: the gateway's own edits (the upstream model name, the
// usage request, its fallbacks fields) apply to every model and are not
// changes of the caller's request, strict or not.
func TestPlumbing(t *testing.T) {
	var f Fitter
	for _, model := range []string{"mock-demo", "gpt-4o"} {
		out, changed, err := f.Fit(nil, []byte(`{"model":"alias","models":["a","b"],"stream":true,"stream_options":{"include_usage":false,"x":1},"messages":[]}`),
			nil, dialect.Chat, info(model), &Options{Strict: true, Model: model, IncludeUsage: true, Consume: []string{"models", "fallbacks"}})
		if err != nil || !changed || len(f.Changes()) != 0 {
			t.Fatalf("%s: %v %v %v", model, err, changed, f.Changes())
		}
		want := `{"model":"` + model + `","stream":true,"stream_options":{"x":1,"include_usage":true},"messages":[]}`
		if string(out) != want {
			t.Fatalf("%s: %s\nwant %s", model, out, want)
		}
	}
	out, _, _ := f.Fit(nil, []byte(`{"model":"m","stream":true,"messages":[]}`), nil, dialect.Chat, info("mock-demo"), &Options{IncludeUsage: true})
	if string(out) != `{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}` {
		t.Fatalf("usage asked for: %s", out)
	}
}

// TestFitWithScannedMembers: the members jsonscan found while reading the
// body serve as well as a scan of Fit's own, and a request that needs
// nothing costs no allocation.
func TestFitWithScannedMembers(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":128000,"temperature":0.2}`)
	var r jsonscan.Request
	if err := jsonscan.ScanRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	var f Fitter
	a, _, _ := f.Fit(nil, body, r.Members, dialect.Chat, info("gpt-4o"), &Options{})
	b, _, _ := f.Fit(nil, body, nil, dialect.Chat, info("gpt-4o"), &Options{})
	if string(a) != string(b) || !strings.Contains(string(a), `"max_tokens":16384`) {
		t.Fatalf("%s\n%s", a, b)
	}
	fits := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"temperature":0.2}`)
	if err := jsonscan.ScanRequest(fits, &r); err != nil {
		t.Fatal(err)
	}
	in := info("gpt-4o")
	o := &Options{}
	if n := testing.AllocsPerRun(100, func() { f.Fit(nil, fits, r.Members, dialect.Chat, in, o) }); n != 0 {
		t.Fatalf("fitting a request that fits allocated %.0f times", n)
	}
}

// TestModelInfoKindsAreAllFitted: every reasoning kind the config may
// name has rules here (a new kind without them would pass requests
// unchanged).
func TestModelInfoKindsAreAllFitted(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range fitCases {
		seen[info(c.model).Reasoning.Kind] = true
	}
	for _, k := range config.ReasoningKinds {
		if !seen[k] {
			t.Errorf("no rule case for reasoning kind %s", k)
		}
	}
}

// FuzzFit: whatever the body, a fitted request is a JSON object the
// dialect's scan accepts, and fitting it again changes nothing.
func FuzzFit(f *testing.F) {
	var models []string
	for i, c := range fitCases {
		models = append(models, c.model)
		f.Add(uint8(c.d), uint8(i), c.body)
	}
	f.Fuzz(func(t *testing.T, d, mi uint8, body string) {
		id := dialect.ID(d%3 + 1)
		model := models[int(mi)%len(models)]
		var r jsonscan.Request
		if jsonscan.ScanRequest([]byte(body), &r) != nil {
			return
		}
		in := info(model)
		var fi Fitter
		out, changed, err := fi.Fit(nil, []byte(body), r.Members, id, in, &Options{})
		if err != nil {
			t.Fatalf("fitting a valid body failed: %v", err)
		}
		if !changed {
			return
		}
		if err := jsonscan.ScanRequest(out, &r); err != nil {
			t.Fatalf("fitted body is not a valid request (%v): %s", err, out)
		}
		if _, again, _ := fi.Fit(nil, out, nil, id, in, &Options{}); again {
			t.Fatalf("fitting is not idempotent: %s -> %v", out, fi.Changes())
		}
	})
}

// TestCallerName: a translated call's changes are told by the caller's
// names of the fields.
func TestCallerName(t *testing.T) {
	for _, c := range []struct {
		field    string
		up, from dialect.ID
		want     string
	}{
		{"reasoning_effort", dialect.Chat, dialect.Messages, "thinking"},
		{"max_completion_tokens", dialect.Chat, dialect.Responses, "max_output_tokens"},
		{"output_config.effort", dialect.Messages, dialect.Responses, "reasoning.effort"},
		{"thinking", dialect.Messages, dialect.Chat, "reasoning_effort"},
		{"verbosity", dialect.Chat, dialect.Responses, "text.verbosity"},
		{"max_tokens", dialect.Chat, dialect.Chat, "max_tokens"},
		{"temperature", dialect.Chat, dialect.Messages, "temperature"},
		{"verbosity", dialect.Chat, dialect.Messages, ""},
		{"include[reasoning.encrypted_content]", dialect.Responses, dialect.Messages, ""},
		{"include[reasoning.encrypted_content]", dialect.Responses, dialect.Responses, "include[reasoning.encrypted_content]"},
	} {
		if got := CallerName(c.field, c.up, c.from); got != c.want {
			t.Errorf("%s (%s upstream, %s caller) = %q, want %q", c.field, c.up, c.from, got, c.want)
		}
	}
}

// TestFittedRequestsPassTheStrictMock: every rule case, fitted, is taken
// by the mock provider's strict mode, whose rules are written from the
// providers' errors apart from these.
func TestFittedRequestsPassTheStrictMock(t *testing.T) {
	var f Fitter
	for _, c := range fitCases {
		out, changed, err := f.Fit(nil, []byte(c.body), nil, c.d, info(c.model), &Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !changed {
			out = []byte(c.body)
		}
		if msg, refused := mockprovider.StrictRefusal(c.d, out, c.model); refused {
			t.Errorf("%s: the strict mock refuses the fitted request %s: %s", c.name, out, msg)
		}
		if msg, refused := mockprovider.StrictRefusal(c.d, []byte(c.body), c.model); refused != (len(c.changes) > 0) {
			t.Errorf("%s: the strict mock refused the request as sent: %v (%s), want %v", c.name, refused, msg, len(c.changes) > 0)
		}
	}
}

// TestStrictIgnoresWhatTheTranslationAdded: a translated body's change to
// a field the caller's dialect does not have is no refusal; one to a
// field it has is, by the caller's name.
func TestStrictIgnoresWhatTheTranslationAdded(t *testing.T) {
	var f Fitter
	body := []byte(`{"model":"gpt-4o","input":[],"include":["reasoning.encrypted_content"]}`)
	if _, changed, err := f.Fit(nil, body, nil, dialect.Responses, info("gpt-4o"), &Options{Strict: true, Caller: dialect.Messages}); err != nil || !changed {
		t.Fatalf("an include the translation added: %v %v", err, changed)
	}
	body = []byte(`{"model":"gpt-4o","input":[],"reasoning":{"effort":"high"}}`)
	_, _, err := f.Fit(nil, body, nil, dialect.Responses, info("gpt-4o"), &Options{Strict: true, Caller: dialect.Messages})
	var r *Refusal
	if !errors.As(err, &r) || r.Field != "thinking" {
		t.Fatalf("reasoning the caller asked for: %v", err)
	}
}

// TestOwnLimitIsFittedSilently: an output limit the gateway wrote (a
// translation's default) is clamped without being a change of the
// caller's request: not reported, not refused in strict mode.
func TestOwnLimitIsFittedSilently(t *testing.T) {
	var f Fitter
	out, changed, err := f.Fit(nil, []byte(`{"model":"gpt-4o","messages":[],"max_tokens":28672}`), nil, dialect.Messages, info("gpt-4o"), &Options{Strict: true, OwnLimit: true})
	if err != nil || !changed || len(f.Changes()) != 0 || !strings.Contains(string(out), `"max_tokens":16384`) {
		t.Fatalf("%v %v %v %s", err, changed, f.Changes(), out)
	}
}
