package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// TestBrokenStreamsReachSDKsAsErrors: a stream cut after its first events
// (the gateway's Interrupt) and an upstream's in-band error event both
// surface as an error in each caller's SDK, never as a silently short
// answer.
func TestBrokenStreamsReachSDKsAsErrors(t *testing.T) {
	cuts := []struct {
		name     string
		upstream dialect.ID
		stream   string
		want     string // in the SDK's error text
	}{
		{"chat cut", dialect.Chat, strings.Join(strings.SplitAfter(streamFixtures[0].stream, "\n\n")[:2], ""), "cut"},
		{"messages cut", dialect.Messages, strings.Join(strings.SplitAfter(streamFixtures[3].stream, "\n\n")[:4], ""), "cut"},
		{"responses cut", dialect.Responses, strings.Join(strings.SplitAfter(streamFixtures[6].stream, "\n\n")[:5], ""), "cut"},
		{"chat error event", dialect.Chat, sseFrames(
			data(chatChunkHead+`[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`),
			data(`{"error":{"message":"Rate limit reached","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)), "Rate limit reached"},
		{"messages error event", dialect.Messages, sseFrames(
			named("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":1,"output_tokens":1}}}`),
			named("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), "Overloaded"},
		{"responses failed", dialect.Responses, sseFrames(
			named("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","model":"gpt"}}`),
			named("response.failed", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model crashed"}}}`)), "The model crashed"},
	}
	for _, tc := range cuts {
		for _, from := range dialect.Translated {
			t.Run(tc.name+" to "+from.String(), func(t *testing.T) {
				tr, out := translateStream(t, from, tc.upstream, tc.stream)
				if !tr.Done() {
					t.Fatalf("stream not ended:\n%s", out)
				}
				_, err := decodeStream(t, from, out)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("SDK error %v, want one saying %q\n%s", err, tc.want, out)
				}
			})
		}
	}
}

// TestCustomToolThroughChat: Codex's free-form apply_patch tool, sent to a
// chat upstream as a function taking {"input": …}, comes back to the
// Responses caller as a custom_tool_call with the raw input, streaming and
// not.
func TestCustomToolThroughChat(t *testing.T) {
	req := `{"model":"gpt-6.2-sol","stream":true,"input":"patch it","tools":[{"type":"custom","name":"apply_patch","description":"Apply a patch"}]}`
	patch := "*** Begin Patch\n*** Update File: a.go\n+\tfmt.Println(\"x\")\n*** End Patch"
	args, _ := json.Marshal(map[string]string{"input": patch})
	argsLit, _ := json.Marshal(string(args))
	// The arguments arrive in two deltas, cut inside the input string.
	first, _ := json.Marshal(string(args[:len(args)/2]))
	second, _ := json.Marshal(string(args[len(args)/2:]))
	upstream := sseFrames(
		data(chatChunkHead+`[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_p","type":"function","function":{"name":"apply_patch","arguments":""}}]},"finish_reason":null}]}`),
		data(chatChunkHead+`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+string(first)+`}}]},"finish_reason":null}]}`),
		data(chatChunkHead+`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+string(second)+`}}]},"finish_reason":null}]}`),
		data(chatChunkHead+`[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`),
		data(`[DONE]`))
	tr := New(dialect.Responses, dialect.Chat, Options{Model: "m"})
	body, err := tr.Request(nil, []byte(req))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"name":"apply_patch","description":"Apply a patch","parameters":{"type":"object","properties":{"input"`) {
		t.Fatalf("custom tool not sent as a function: %s", body)
	}
	rd := newEvents(t, upstream)
	var out []byte
	for _, ev := range rd {
		if out, err = tr.Event(out, &ev); err != nil {
			t.Fatal(err)
		}
	}
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(out)), nil)
	events, final, err := sdktest.Responses(stream)
	if err != nil || final == nil {
		t.Fatalf("stream: %v\n%s", err, out)
	}
	input, done := sdktest.Deltas(events, "response.custom_tool_call_input.delta"), ""
	for _, ev := range events {
		if ev.Type == "response.custom_tool_call_input.done" {
			done = ev.Input
		}
	}
	if input != patch || done != patch || len(final.Output) != 1 || final.Output[0].Type != "custom_tool_call" || final.Output[0].Input != patch || final.Output[0].CallID != "call_p" {
		t.Fatalf("custom call: deltas %q done %q final %s", input, done, final.RawJSON())
	}
	// Non-stream.
	tr.Reset(dialect.Responses, dialect.Chat, Options{Model: "m"})
	if _, err := tr.Request(nil, []byte(req)); err != nil {
		t.Fatal(err)
	}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_p","type":"function","function":{"name":"apply_patch","arguments":` + string(argsLit) + `}}]},"finish_reason":"tool_calls"}]}`
	resp, err := tr.Response(nil, []byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	if err := json.Unmarshal(resp, &r); err != nil || len(r.Output) != 1 || r.Output[0].Type != "custom_tool_call" || r.Output[0].Input != patch {
		t.Fatalf("non-stream custom call: %v %s", err, resp)
	}
}

// TestPooledTranslatorsForget: a translator reused through the pool for
// streams of other pairs produces exactly what a fresh one does.
func TestPooledTranslatorsForget(t *testing.T) {
	fresh := map[string][]byte{}
	for _, fx := range streamFixtures {
		for _, from := range dialect.Translated {
			_, out := translateStream(t, from, fx.upstream, fx.stream)
			fresh[fx.name+from.String()] = out
		}
	}
	tr := Get(dialect.Chat, dialect.Chat, Options{})
	defer Put(tr)
	for round := 0; round < 2; round++ {
		for i := len(streamFixtures) - 1; i >= 0; i-- {
			fx := streamFixtures[i]
			for _, from := range dialect.Translated {
				tr.Reset(from, fx.upstream, Options{Model: "upstream-model", Created: 1700000000})
				if _, err := tr.Request(nil, []byte(minimalRequest[from])); err != nil {
					t.Fatal(err)
				}
				var out []byte
				for _, ev := range newEvents(t, fx.stream) {
					var err error
					if out, err = tr.Event(out, &ev); err != nil {
						t.Fatal(err)
					}
				}
				out, _ = tr.End(out)
				if !bytes.Equal(out, fresh[fx.name+from.String()]) {
					t.Fatalf("%s to %s differs after reuse:\n%s\nfresh:\n%s", fx.name, from, out, fresh[fx.name+from.String()])
				}
			}
		}
	}
}

// TestChatUsageChunkOnlyWhenAsked: a chat caller that did not ask for
// include_usage gets no usage chunk (some clients index choices[0] of
// every chunk), though the upstream was asked for one.
func TestChatUsageChunkOnlyWhenAsked(t *testing.T) {
	tr := New(dialect.Chat, dialect.Messages, Options{Model: "m"})
	up, err := tr.Request(nil, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(up), `"stream":true`) {
		t.Fatalf("upstream not streaming: %s", up)
	}
	var out []byte
	for _, ev := range newEvents(t, streamFixtures[3].stream) {
		if out, err = tr.Event(out, &ev); err != nil {
			t.Fatal(err)
		}
	}
	stream := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(out)), nil)
	_, chunks, err := sdktest.Chat(t, stream)
	for _, c := range chunks {
		if len(c.Choices) == 0 {
			t.Errorf("usage chunk sent to a caller that did not ask: %s", c.RawJSON())
		}
	}
	if err != nil || bytes.Contains(out, []byte(`"usage"`)) {
		t.Errorf("err %v; stream:\n%s", err, out)
	}
	// And the translator still knows the usage, for the gateway's meter.
	if u := tr.Usage(); u.Input != 35 || u.Output != 15 {
		t.Errorf("usage %+v", u)
	}
}

// TestAnthropicErrorFrameIsAnAPIError: the in-band error an Anthropic
// caller gets carries the mapped type and the provider's message.
func TestAnthropicErrorFrameIsAnAPIError(t *testing.T) {
	_, out := translateStream(t, dialect.Messages, dialect.Chat, sseFrames(
		data(chatChunkHead+`[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`),
		data(`{"error":{"message":"Too many requests","type":"requests","code":"rate_limit_exceeded"}}`)))
	stream := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(out)), nil)
	for stream.Next() {
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "rate_limit_error") || !strings.Contains(err.Error(), "Too many requests") {
		t.Fatalf("error %v (%T), want a rate_limit_error\n%s", err, err, out)
	}
}
