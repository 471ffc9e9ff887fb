package transport_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// translatedFile adds one provider per dialect that speaks only it, on the
// mock, and a model on each.
func translatedFile(t *testing.T) *config.File {
	t.Helper()
	providers := ""
	models := ""
	for _, api := range []string{"chat", "messages", "responses"} {
		providers += `,
    "only-` + api + `": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["` + api + `"], "connections": {"k": {"api_key_env": "TEST_KEY_A"}}}`
		models += `,
    "x-` + api + `": {"targets": [{"connection": "only-` + api + `", "model": "up-` + api + `"}]}`
	}
	return testFileWith(t, providers, models)
}

var callerBodies = map[string]struct{ path, body string }{
	"chat":      {"/v1/chat/completions", `{"model":"%s","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]%s}`},
	"messages":  {"/v1/messages", `{"model":"%s","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]%s}`},
	"responses": {"/v1/responses", `{"model":"%s","instructions":"be brief","input":[{"role":"user","content":"hi"}]%s}`},
}

func callerBody(caller, model string, stream bool) (string, string) {
	b := callerBodies[caller]
	extra := ""
	if stream {
		extra = `,"stream":true`
		if caller == "chat" {
			extra += `,"stream_options":{"include_usage":true}`
		}
	}
	return b.path, strings.Replace(strings.Replace(b.body, "%s", model, 1), "%s", extra, 1)
}

// answerText pulls the assistant's text out of a non-stream answer of the
// caller's dialect.
func answerText(t *testing.T, caller string, body []byte) string {
	t.Helper()
	var v struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Content []struct{ Type, Text string } `json:"content"`
		Output  []struct {
			Type    string                        `json:"type"`
			Content []struct{ Type, Text string } `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s answer is not JSON: %s", caller, body)
	}
	switch caller {
	case "chat":
		if len(v.Choices) == 1 {
			return v.Choices[0].Message.Content
		}
	case "messages":
		for _, c := range v.Content {
			if c.Type == "text" {
				return c.Text
			}
		}
	case "responses":
		for _, o := range v.Output {
			for _, c := range o.Content {
				if c.Type == "output_text" {
					return c.Text
				}
			}
		}
	}
	return ""
}

// streamText joins the text deltas of a stream of the caller's dialect and
// reports whether it ended with the dialect's terminal event.
func streamText(t *testing.T, caller string, body []byte) (string, bool) {
	t.Helper()
	var text strings.Builder
	done := false
	for _, ev := range sseEvents(body) {
		switch caller {
		case "chat":
			if ev[1] == "[DONE]" {
				done = true
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev[1]), &c); err != nil {
				t.Fatalf("chat chunk not JSON: %s", ev[1])
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		case "messages":
			if ev[0] == "message_stop" {
				done = true
			}
			if ev[0] == "content_block_delta" {
				if s, _ := jsonField(t, []byte(ev[1]), "delta", "text").(string); s != "" {
					text.WriteString(s)
				}
			}
		case "responses":
			if ev[0] == "response.completed" {
				done = true
			}
			if ev[0] == "response.output_text.delta" {
				s, _ := jsonField(t, []byte(ev[1]), "delta").(string)
				text.WriteString(s)
			}
		}
	}
	return text.String(), done
}

// TestTranslatedPairs: every caller dialect reaches a provider of every
// other dialect, non-stream and stream, and the answer comes back in the
// caller's dialect with the provider's text.
func TestTranslatedPairs(t *testing.T) {
	resetMock(t)
	g := startGateway(t, translatedFile(t), nil)
	const want = "Hello from the OmniRoute mock provider. This reply is deterministic and arrives in chunks."
	for _, caller := range []string{"chat", "messages", "responses"} {
		for _, up := range []string{"chat", "messages", "responses"} {
			if caller == up {
				continue
			}
			t.Run(caller+"->"+up, func(t *testing.T) {
				path, body := callerBody(caller, "x-"+up, false)
				r := g.post(path, body)
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				if got := answerText(t, caller, r.body); got != want {
					t.Fatalf("text %q in %s", got, r.body)
				}
				if h := r.header.Get("X-Omniroute-Translated"); h != caller+"->"+up {
					t.Fatalf("X-OmniRoute-Translated %q", h)
				}
				path, body = callerBody(caller, "x-"+up, true)
				r = g.post(path, body)
				if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("stream: %d %s", r.status, r.body)
				}
				got, done := streamText(t, caller, r.body)
				if got != want || !done {
					t.Fatalf("stream text %q, terminal %v:\n%s", got, done, r.body)
				}
			})
		}
	}
}

// TestTranslatedErrors: an upstream error comes back with the status the
// caller's dialect uses and a body in its error shape; a mid-stream
// failure ends with the caller's in-band error frame; a failure before the
// first byte fails over to the next target.
func TestTranslatedErrors(t *testing.T) {
	resetMock(t)
	f := translatedFile(t)
	// One failover model per stream mode: a failed target cools down, and
	// the second request would skip it instead of failing over.
	f.Models["x-failover"] = config.Model{Targets: []config.Target{{Connection: "only-chat", Model: "up-first"}, {Connection: "only-responses", Model: "up-second"}}}
	f.Models["x-failover-stream"] = config.Model{Targets: []config.Target{{Connection: "only-chat", Model: "up-first-s"}, {Connection: "only-responses", Model: "up-second"}}}
	g := startGateway(t, f, nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"up-chat":      {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 400, Code: "context_length_exceeded"}},
		"up-messages":  {Fail: mockprovider.FailSpec{Mode: mockprovider.FailErrorEvent, AfterChunks: 2}},
		"up-responses": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailTruncate, AfterChunks: 2}},
		"up-first":     {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}},
		"up-first-s":   {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}},
	})
	// 400 from a chat upstream to a Messages caller: Anthropic error body.
	path, body := callerBody("messages", "x-chat", false)
	r := g.post(path, body)
	if r.status != 400 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "invalid_request_error" {
		t.Fatalf("messages caller, chat 400: %d %s", r.status, r.body)
	}
	// The same to a Responses caller: OpenAI error body.
	path, body = callerBody("responses", "x-chat", false)
	r = g.post(path, body)
	if r.status != 400 || jsonField(t, r.body, "error", "message") == nil {
		t.Fatalf("responses caller, chat 400: %d %s", r.status, r.body)
	}
	// Mid-stream upstream error event (Messages upstream) to a chat caller:
	// chat's in-band error chunk, after some text.
	path, body = callerBody("chat", "x-messages", true)
	r = g.post(path, body)
	evs := sseEvents(r.body)
	if r.status != 200 || len(evs) < 2 || !strings.Contains(evs[len(evs)-1][1], `"error"`) {
		t.Fatalf("chat caller, messages error event: %d %s", r.status, r.body)
	}
	// Truncated Responses upstream to a Messages caller: Anthropic error event.
	path, body = callerBody("messages", "x-responses", true)
	r = g.post(path, body)
	evs = sseEvents(r.body)
	if r.status != 200 || len(evs) < 2 || evs[len(evs)-1][0] != "error" || !strings.Contains(evs[len(evs)-1][1], "stream_interrupted") {
		t.Fatalf("messages caller, truncated responses upstream: %d %s", r.status, r.body)
	}
	// Failover before the first byte across upstream dialects.
	for _, stream := range []bool{false, true} {
		model := "x-failover"
		if stream {
			model = "x-failover-stream"
		}
		path, body = callerBody("messages", model, stream)
		r = g.post(path, body)
		if r.status != 200 || r.header.Get("X-Omniroute-Fallbacks") != "1" || r.header.Get("X-Omniroute-Translated") != "messages->responses" {
			t.Fatalf("failover (stream %v): %d %v %s", stream, r.status, r.header, r.body)
		}
	}
}

// TestTranslationRefusals: what the upstream dialect cannot carry is a 400
// naming the field, in the caller's dialect.
func TestTranslationRefusals(t *testing.T) {
	resetMock(t)
	g := startGateway(t, translatedFile(t), nil)
	r := g.post("/v1/responses", `{"model":"x-chat","previous_response_id":"resp_1","input":"hi"}`)
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "previous_response_not_supported" ||
		!strings.Contains(string(r.body), "previous_response_id") {
		t.Fatalf("previous_response_id: %d %s", r.status, r.body)
	}
	if n := mockStats(t).Totals.Requests; n != 0 {
		t.Fatalf("a refused request reached the provider (%d requests)", n)
	}
}

// TestAnthropicBetaPolicy: a provider's anthropic_beta policy filters the
// caller's anthropic-beta values; other providers get them unchanged, and
// a translated call to an OpenAI-dialect provider gets none.
func TestAnthropicBetaPolicy(t *testing.T) {
	resetMock(t)
	f := translatedFile(t)
	p := f.Providers["only-messages"]
	p.AnthropicBeta = &config.BetaPolicy{Mode: config.BetaAllow, List: []string{"tools-1"}}
	f.Providers["only-messages"] = p
	g := startGateway(t, f, nil)
	for _, model := range []string{"x-messages", "claude", "x-chat"} {
		path, body := callerBody("messages", model, false)
		if r := g.post(path, body, "Anthropic-Beta", "tools-1, secret-beta"); r.status != 200 {
			t.Fatalf("%s: %d %s", model, r.status, r.body)
		}
	}
	got := map[string]string{}
	for _, rec := range mockStats(t).Bodies {
		got[rec.Model] = rec.Headers["anthropic-beta"]
	}
	if got["up-messages"] != "tools-1" || got["m-claude"] != "tools-1, secret-beta" || got["up-chat"] != "" {
		t.Fatalf("anthropic-beta upstream: %q", got)
	}
}
