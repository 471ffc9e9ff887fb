package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
)

// decodeBody reads a caller-dialect answer body into the SDK's own type
// and reports what it means.
func decodeBody(t *testing.T, from dialect.ID, b []byte) outcome {
	t.Helper()
	var got outcome
	switch from {
	case dialect.Chat:
		var cc openai.ChatCompletion
		mustUnmarshal(t, b, &cc)
		if cc.Object != "chat.completion" || len(cc.Choices) != 1 {
			t.Fatalf("not a chat completion: %s", b)
		}
		got = chatOutcome(&cc)
		var extra struct {
			Choices []struct {
				Message struct {
					Reasoning string `json:"reasoning_content"`
				} `json:"message"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(b, &extra)
		got.thinking = extra.Choices[0].Message.Reasoning
	case dialect.Messages:
		var msg anthropic.Message
		mustUnmarshal(t, b, &msg)
		if msg.Type != "message" || msg.Role != "assistant" {
			t.Fatalf("not a message: %s", b)
		}
		got = anthropicOutcome(&msg)
	default:
		var r responses.Response
		mustUnmarshal(t, b, &r)
		if r.Object != "response" || !strings.HasPrefix(r.ID, "resp_") {
			t.Fatalf("not a response: %s", b)
		}
		got = responsesOutcome(&r)
	}
	return got
}

// TestResponsesThroughSDKTypes translates every documented answer into
// every caller dialect and decodes it into the official SDK's type.
func TestResponsesThroughSDKTypes(t *testing.T) {
	for _, fx := range bodyFixtures {
		for _, from := range dialect.Translated {
			t.Run(fx.name+" to "+from.String(), func(t *testing.T) {
				tr := New(from, fx.upstream, Options{Model: "up", Created: 1700000000})
				out, err := tr.Response(nil, []byte(fx.body))
				if err != nil {
					t.Fatal(err)
				}
				checkAnswer(t, from, fx.upstream, decodeBody(t, from, out), fx.want, true)
				if t.Failed() {
					t.Logf("body: %s", out)
				}
			})
		}
	}
}

// mustUnmarshal decodes b into v, failing the test with v's type and b
// when it is not that JSON.
func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%T: %v\n%s", v, err, b)
	}
}

// rawJSON is the JSON each SDK value was decoded from, to send back as
// the next turn's input exactly as it came.
func rawJSON[T interface{ RawJSON() string }](vs []T) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i] = json.RawMessage(v.RawJSON())
	}
	return out
}

// TestReasoningSurvivesTheCaller: reasoning state an upstream made comes
// back to it, byte for byte, through a caller of another dialect: an
// Anthropic signature through a Responses caller's encrypted_content, an
// OpenAI encrypted reasoning item through an Anthropic caller's thinking
// signature. This is what keeps a tool loop with reasoning working.
func TestReasoningSurvivesTheCaller(t *testing.T) {
	// Anthropic upstream, Responses caller (Codex on Claude).
	tr := New(dialect.Responses, dialect.Messages, Options{Model: "claude"})
	out, err := tr.Response(nil, []byte(bodyFixtures[3].body))
	if err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	mustUnmarshal(t, out, &r)
	items := rawJSON(r.Output)
	next, _ := json.Marshal(map[string]any{"model": "m", "input": items, "reasoning": map[string]any{"effort": "high"}})
	tr.Reset(dialect.Responses, dialect.Messages, Options{Model: "claude"})
	req, err := tr.Request(nil, next)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	mustUnmarshal(t, req, &back)
	first := back.Messages[0].Content[0]
	if first["type"] != "thinking" || first["signature"] != "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve" || first["thinking"] != "I should look up the weather." {
		t.Errorf("thinking block not restored: %s", req)
	}
	if !strings.Contains(string(req), `"thinking":{"type":"enabled"`) {
		t.Errorf("thinking should stay on: the tool loop continues from a real thinking block: %s", req)
	}

	// Responses upstream, Anthropic caller (Claude Code on GPT).
	tr.Reset(dialect.Messages, dialect.Responses, Options{Model: "gpt"})
	out, err = tr.Response(nil, []byte(bodyFixtures[6].body))
	if err != nil {
		t.Fatal(err)
	}
	var msg anthropic.Message
	mustUnmarshal(t, out, &msg)
	content, _ := json.Marshal(rawJSON(msg.Content))
	next = []byte(`{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":` + string(content) + `},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"sunny"}]}]}`)
	tr.Reset(dialect.Messages, dialect.Responses, Options{Model: "gpt"})
	req, err = tr.Request(nil, next)
	if err != nil {
		t.Fatal(err)
	}
	var rreq struct {
		Input []map[string]any `json:"input"`
	}
	mustUnmarshal(t, req, &rreq)
	var found bool
	for _, it := range rreq.Input {
		if it["type"] == "reasoning" {
			found = it["id"] == "rs_1" && it["encrypted_content"] == "gAAAAB=="
		}
	}
	if !found || !strings.Contains(string(req), `"include":["reasoning.encrypted_content"]`) {
		t.Errorf("reasoning item not restored: %s", req)
	}
}

func TestUpstreamErrorsInCallerDialect(t *testing.T) {
	for _, tc := range []struct {
		from, to   dialect.ID
		status     int
		body       string
		wantStatus int
		want       string // a fragment of the caller's body
	}{
		{dialect.Messages, dialect.Chat, 429, `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			429, `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached for gpt-4o","code":"rate_limit_exceeded"}`},
		{dialect.Chat, dialect.Messages, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			503, `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`},
		{dialect.Responses, dialect.Messages, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`,
			400, `"code":"invalid_request_error"`},
		{dialect.Messages, dialect.Responses, 401, `{"error":{"message":"Incorrect API key provided: sk-abc12345678.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			401, `"message":"Incorrect API key provided: [REDACTED]."`},
	} {
		tr := New(tc.from, tc.to, Options{})
		status, body := tr.Error(nil, tc.status, []byte(tc.body), "req_9")
		if status != tc.wantStatus || !strings.Contains(string(body), tc.want) || !json.Valid(body) {
			t.Errorf("%s←%s %d: got %d %s, want %d containing %s", tc.from, tc.to, tc.status, status, body, tc.wantStatus, tc.want)
		}
	}
}

// TestReplyModelNamesTheCallersModel: with ReplyModel set, answers and
// stream events carry it instead of the upstream's model name.
func TestReplyModelNamesTheCallersModel(t *testing.T) {
	tr := New(dialect.Messages, dialect.Chat, Options{Model: "mock-demo", ReplyModel: []byte(`de"mo`)})
	out, err := tr.Response(nil, []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"mock-demo","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	if err != nil || !strings.Contains(string(out), `"model":"de\"mo"`) || strings.Contains(string(out), "mock-demo") {
		t.Fatalf("%v %s", err, out)
	}
	tr = New(dialect.Chat, dialect.Messages, Options{Model: "claude-x", ReplyModel: []byte("demo")})
	ev, err := tr.Event(nil, &sse.Event{Name: []byte("message_start"), Data: []byte(`{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}`)})
	if err != nil || !strings.Contains(string(ev), `"model":"demo"`) || strings.Contains(string(ev), "claude-x") {
		t.Fatalf("%v %s", err, ev)
	}
}
