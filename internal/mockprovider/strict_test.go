package mockprovider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/fit"
	"github.com/omniroute/gateway/internal/modelinfo"
)

// strictCases are requests the real providers refuse, with the status and
// words of their answer (each provider's documented or observed error),
// and requests they take.
var strictCases = []struct {
	name  string
	ep    endpoint
	model string
	body  string
	want  string // "" accepted; else a fragment of the error message
	param string // OpenAI's param, when it names one
}{
	{"gpt-4o output limit", endpointChat, "gpt-4o", `{"model":"gpt-4o","messages":[],"max_tokens":128000}`,
		"max_tokens is too large: 128000. This model supports at most 16384 completion tokens", "max_tokens"},
	{"gpt-4o reasoning_effort", endpointChat, "gpt-4o", `{"model":"gpt-4o","messages":[],"reasoning_effort":"high"}`,
		"Unrecognized request argument supplied: reasoning_effort", ""},
	{"an unknown field to OpenAI", endpointChat, "gpt-4o", `{"model":"gpt-4o","messages":[],"thinking":{"type":"enabled"}}`,
		"Unrecognized request argument supplied: thinking", ""},
	{"max_tokens to a reasoning model", endpointChat, "o4-mini", `{"model":"o4-mini","messages":[],"max_tokens":100}`,
		"Use 'max_completion_tokens' instead", "max_tokens"},
	{"temperature to a reasoning model", endpointChat, "o4-mini", `{"model":"o4-mini","messages":[],"temperature":0.2}`,
		"Only the default (1) value is supported", "temperature"},
	{"an effort the model lacks", endpointChat, "o4-mini", `{"model":"o4-mini","messages":[],"reasoning_effort":"xhigh"}`,
		"does not support 'xhigh' with this model", "reasoning_effort"},
	{"a reasoning model within bounds", endpointChat, "o4-mini", `{"model":"o4-mini","messages":[],"max_completion_tokens":1000,"reasoning_effort":"high","temperature":1}`, "", ""},
	{"gpt-4o within bounds", endpointChat, "gpt-4o", `{"model":"gpt-4o","messages":[],"max_tokens":1000,"temperature":0.3,"metadata":{"a":"b"}}`, "", ""},
	{"Responses: reasoning to gpt-4o", endpointResponses, "gpt-4o", `{"model":"gpt-4o","input":[],"reasoning":{"effort":"low"}}`,
		"Unsupported parameter: 'reasoning.effort' is not supported with this model.", "reasoning.effort"},
	{"Responses: encrypted reasoning from gpt-4o", endpointResponses, "gpt-4o", `{"model":"gpt-4o","input":[],"include":["reasoning.encrypted_content"]}`,
		"Encrypted content is not supported", "include"},
	{"Responses: verbosity to gpt-4o", endpointResponses, "gpt-4o", `{"model":"gpt-4o","input":[],"text":{"verbosity":"low"}}`,
		"'text.verbosity' is not supported", "text.verbosity"},
	{"Responses: an unknown field", endpointResponses, "gpt-4o", `{"model":"gpt-4o","input":[],"verbosity":"low"}`,
		"Unknown parameter: 'verbosity'.", "verbosity"},
	{"Responses: Codex to its model", endpointResponses, "gpt-6.2-sol",
		`{"model":"gpt-6.2-sol","input":[],"reasoning":{"effort":"low","context":"all_turns"},"text":{"verbosity":"low"},"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{}}`, "", ""},
	{"Anthropic output limit", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[],"max_tokens":128000}`,
		"max_tokens: 128000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5", ""},
	{"Anthropic without max_tokens", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[]}`,
		"max_tokens: Field required", ""},
	{"Anthropic extra input", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[],"max_tokens":10,"reasoning_effort":"low"}`,
		"reasoning_effort: Extra inputs are not permitted", ""},
	{"a budget at max_tokens", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[],"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000}}`,
		"`max_tokens` must be greater than `thinking.budget_tokens`", ""},
	{"adaptive thinking to a budget model", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[],"max_tokens":2000,"thinking":{"type":"adaptive"}}`,
		"adaptive thinking is not supported", ""},
	{"temperature with thinking", endpointMessages, "claude-sonnet-4-5", `{"model":"claude-sonnet-4-5","messages":[],"max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":2000},"temperature":0.5}`,
		"temperature may only be set to 1 when thinking is enabled", ""},
	{"Claude Code to its model", endpointMessages, "claude-opus-4-8",
		`{"model":"claude-opus-4-8","messages":[],"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"max_tokens":64000,"thinking":{"type":"adaptive"},"context_management":{"edits":[]},"output_config":{"effort":"high"},"metadata":{"user_id":"u"},"stream":true}`, "", ""},
	{"a model the table does not know", endpointChat, "mock-demo", `{"model":"mock-demo","max_tokens":99999999,"anything":1}`, "", ""},
}

func TestStrictRefusesWhatProvidersRefuse(t *testing.T) {
	for _, c := range strictCases {
		e, ok := strictCheck(c.ep, []byte(c.body), c.model)
		if c.want == "" {
			if !ok {
				t.Errorf("%s: refused: %+v", c.name, e)
			}
			continue
		}
		if ok || e.status != 400 || !strings.Contains(e.msg, c.want) || e.param != c.param {
			t.Errorf("%s: %v %+v, want 400 %q param %q", c.name, ok, e, c.want, c.param)
		}
	}
}

// TestStrictTakesWhatTheGatewayFitted holds the mock's rules, written
// from the providers' errors, against the gateway's fitting: every
// refused request of the table, fitted for its model, is taken.
func TestStrictTakesWhatTheGatewayFitted(t *testing.T) {
	var f fit.Fitter
	for _, c := range strictCases {
		d := map[endpoint]dialect.ID{endpointChat: dialect.Chat, endpointMessages: dialect.Messages, endpointResponses: dialect.Responses}[c.ep]
		info := modelinfo.Shipped().Lookup(c.model)
		out, changed, err := f.Fit(nil, []byte(c.body), nil, d, &info, &fit.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !changed {
			out = []byte(c.body)
		}
		if e, ok := strictCheck(c.ep, out, c.model); !ok {
			t.Errorf("%s: the fitted request %s is refused: %s", c.name, out, e.msg)
		}
	}
}

// TestStrictSwitch: strict is a behaviour (per model or the default),
// off unless asked; a refusal has the provider's shape and counts as a
// failed request.
func TestStrictSwitch(t *testing.T) {
	e := newEnv(t, Behavior{})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":128000}`
	if r := e.mustPost(t, chatPath, body); r.status != 200 {
		t.Fatalf("not strict: %d %s", r.status, r.body)
	}
	e.setModels(t, map[string]Behavior{"gpt-4o": {Strict: true}})
	r := e.mustPost(t, chatPath, body)
	var er struct {
		Error struct{ Message, Type, Param string }
	}
	if err := json.Unmarshal(r.body, &er); err != nil || r.status != 400 || er.Error.Type != "invalid_request_error" || er.Error.Param != "max_tokens" ||
		!strings.Contains(er.Error.Message, "max_tokens is too large") {
		t.Fatalf("strict gpt-4o: %d %s", r.status, r.body)
	}
	r = e.mustPost(t, "/v1/messages", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"top_k":3}`)
	if r.status != 200 {
		t.Fatalf("gpt-4o on the messages endpoint takes what Anthropic's API documents: %d %s", r.status, r.body)
	}
	if st := e.stats(t); st.Models["gpt-4o"].Failed != 1 {
		t.Fatalf("the refusal was not counted as a failed request: %+v", st.Models["gpt-4o"])
	}
}
