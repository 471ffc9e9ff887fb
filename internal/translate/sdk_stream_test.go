package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/testutil/sdktest"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// translateStream runs upstream (an SSE byte stream of dialect `to`)
// through a translator set up by the caller's minimal request, as the
// relay will: one Event per upstream event, End at the end of input.
func translateStream(t *testing.T, from, to dialect.ID, upstream string) (*Translator, []byte) {
	t.Helper()
	tr := New(from, to, Options{Model: "upstream-model", Created: 1700000000})
	if _, err := tr.Request(nil, []byte(minimalRequest[from])); err != nil {
		t.Fatalf("request: %v", err)
	}
	rd := sse.NewReader(strings.NewReader(upstream), nil, 0)
	var out []byte
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			var ok bool
			if out, ok = tr.End(out); !ok {
				out = tr.Interrupt(out, &apierror.Error{Status: 502, Code: "stream_interrupted", Message: "cut"}, "req_1")
			}
			return tr, out
		}
		if err != nil {
			t.Fatalf("upstream stream: %v", err)
		}
		if out, err = tr.Event(out, ev); err != nil {
			t.Fatalf("event %q: %v", ev.Data, err)
		}
	}
}

// newEvents splits an SSE byte stream into events (copied).
func newEvents(t *testing.T, stream string) []sse.Event {
	t.Helper()
	out, err := sse.ReadAll(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sseResponse(b []byte) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b))}
}

// decodeStream reads a caller-dialect stream with that dialect's official
// SDK and reports what the SDK understood.
func decodeStream(t *testing.T, from dialect.ID, b []byte) (outcome, error) {
	t.Helper()
	switch from {
	case dialect.Chat:
		return decodeChatSDK(t, b)
	case dialect.Messages:
		return decodeAnthropicSDK(t, b)
	}
	return decodeResponsesSDK(t, b)
}

func decodeChatSDK(t *testing.T, b []byte) (outcome, error) {
	stream := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(b)), nil)
	acc, chunks, err := sdktest.Chat(t, stream)
	var got outcome
	sawUsage := false
	for _, chunk := range chunks {
		if len(chunk.Choices) > 0 {
			var extra struct {
				Choices []struct {
					Delta struct {
						Reasoning string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(chunk.RawJSON()), &extra); err != nil {
				t.Fatal(err)
			}
			got.thinking += extra.Choices[0].Delta.Reasoning
		} else if chunk.Usage.TotalTokens > 0 {
			sawUsage = true
		}
	}
	if err != nil {
		return got, err
	}
	if !bytes.HasSuffix(b, dialect.DoneFrame) {
		t.Errorf("chat stream does not end with [DONE]")
	}
	if !sawUsage {
		t.Errorf("no usage chunk although the caller asked for include_usage")
	}
	if len(acc.Choices) == 0 {
		return got, errors.New("no choices")
	}
	thinking := got.thinking
	got = chatOutcome(&acc.ChatCompletion)
	got.thinking = thinking
	return got, nil
}

// chatOutcome is what a chat completion with at least one choice means.
func chatOutcome(cc *openai.ChatCompletion) outcome {
	var got outcome
	m := cc.Choices[0].Message
	got.text = m.Content
	for _, tc := range m.ToolCalls {
		got.calls = append(got.calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	got.stop = map[string]ir.StopReason{"stop": ir.StopEnd, "length": ir.StopMaxTokens, "tool_calls": ir.StopToolUse}[cc.Choices[0].FinishReason]
	u := cc.Usage
	got.usage = dialect.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Cached: u.PromptTokensDetails.CachedTokens, Reasoning: u.CompletionTokensDetails.ReasoningTokens}
	return got
}

func decodeAnthropicSDK(t *testing.T, b []byte) (outcome, error) {
	stream := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(b)), nil)
	msg, _, err := sdktest.Message(t, stream)
	if err != nil {
		return outcome{}, err
	}
	return anthropicOutcome(&msg), nil
}

// anthropicOutcome is what an Anthropic message means.
func anthropicOutcome(msg *anthropic.Message) outcome {
	var got outcome
	for _, blk := range msg.Content {
		switch blk.Type {
		case "text":
			got.text += blk.Text
		case "thinking":
			got.thinking += blk.Thinking
		case "tool_use":
			got.calls = append(got.calls, call{blk.ID, blk.Name, string(blk.Input)})
		}
	}
	got.stop = map[anthropic.StopReason]ir.StopReason{"end_turn": ir.StopEnd, "max_tokens": ir.StopMaxTokens, "tool_use": ir.StopToolUse}[msg.StopReason]
	u := msg.Usage
	got.usage = dialect.Usage{Input: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens, Output: u.OutputTokens, Cached: u.CacheReadInputTokens}
	return got
}

func decodeResponsesSDK(t *testing.T, b []byte) (outcome, error) {
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(b)), nil)
	defer stream.Close()
	var got outcome
	seq := int64(0)
	var final *responses.Response
	deltas := map[string]string{}
	doneItems := map[int64]string{}
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
			deltas[ev.ItemID] += ev.Delta
		case "response.output_text.done":
			if deltas[ev.ItemID] != ev.Text {
				t.Errorf("output_text.done text %q, deltas gave %q", ev.Text, deltas[ev.ItemID])
			}
		case "response.function_call_arguments.done":
			if deltas[ev.ItemID] != ev.Arguments {
				t.Errorf("arguments.done %q, deltas gave %q", ev.Arguments, deltas[ev.ItemID])
			}
		case "response.output_item.done":
			doneItems[ev.OutputIndex] = ev.Item.RawJSON()
		case "response.completed", "response.incomplete":
			r := ev.Response
			final = &r
		case "error", "response.failed":
			return got, errors.New("stream error event: " + ev.Message)
		}
	}
	if err := stream.Err(); err != nil {
		return got, err
	}
	if final == nil {
		return got, errors.New("no response.completed")
	}
	for i, item := range final.Output {
		if doneItems[int64(i)] != item.RawJSON() {
			t.Errorf("output[%d] in response.completed differs from its output_item.done:\n%s\n%s", i, item.RawJSON(), doneItems[int64(i)])
		}
	}
	return responsesOutcome(final), nil
}

// responsesOutcome is what a Responses answer means: each message item's
// text, function calls, reasoning summaries, the stop and the usage.
func responsesOutcome(r *responses.Response) outcome {
	var got outcome
	for _, item := range r.Output {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				got.text += c.Text
			}
		case "function_call":
			got.calls = append(got.calls, call{item.CallID, item.Name, item.Arguments.OfString})
		case "reasoning":
			for _, s := range item.Summary {
				got.thinking += s.Text
			}
		}
	}
	switch {
	case r.Status == "incomplete":
		got.stop = ir.StopMaxTokens
	case len(got.calls) > 0:
		got.stop = ir.StopToolUse
	default:
		got.stop = ir.StopEnd
	}
	u := r.Usage
	got.usage = dialect.Usage{Input: u.InputTokens, Output: u.OutputTokens, Cached: u.InputTokensDetails.CachedTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}
	return got
}

// sameJSON compares two JSON texts by value; empty arguments mean {}.
func sameJSON(a, b string) bool {
	if a == "" {
		a = "{}"
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// checkAnswer compares what a caller's SDK saw with the fixture's meaning.
// Reasoning text is not part of a chat caller's standard answer, and
// Anthropic reports no reasoning token count, so those are compared only
// where both sides carry them.
func checkAnswer(t *testing.T, from, to dialect.ID, got, want outcome, ids bool) {
	t.Helper()
	if got.text != want.text {
		t.Errorf("text %q, want %q", got.text, want.text)
	}
	if got.thinking != want.thinking {
		t.Errorf("thinking %q, want %q", got.thinking, want.thinking)
	}
	if len(got.calls) != len(want.calls) {
		t.Fatalf("calls %v, want %v", got.calls, want.calls)
	}
	for i := range want.calls {
		g, w := got.calls[i], want.calls[i]
		if g.name != w.name || !sameJSON(g.args, w.args) || (ids && g.id != w.id) {
			t.Errorf("call %d = %+v, want %+v", i, g, w)
		}
	}
	if got.stop != want.stop {
		t.Errorf("stop %d, want %d", got.stop, want.stop)
	}
	wu := want.usage
	if from == dialect.Messages || to == dialect.Messages {
		wu.Reasoning = 0
	}
	gu := got.usage
	if from == dialect.Messages {
		gu.Reasoning = 0
	}
	if gu.Input != wu.Input || gu.Output != wu.Output || gu.Cached != wu.Cached || gu.Reasoning != wu.Reasoning {
		t.Errorf("usage %+v, want %+v", gu, wu)
	}
}

// TestStreamsThroughSDKs translates every documented upstream stream into
// every caller dialect and reads the result with that dialect's official
// Go SDK: the bytes are what the SDK's decoder and accumulator expect,
// and they mean what the upstream said.
func TestStreamsThroughSDKs(t *testing.T) {
	for _, fx := range streamFixtures {
		for _, from := range dialect.Translated {
			t.Run(fx.name+" to "+from.String(), func(t *testing.T) {
				_, out := translateStream(t, from, fx.upstream, fx.stream)
				got, err := decodeStream(t, from, out)
				if err != nil {
					t.Fatalf("SDK: %v\nstream:\n%s", err, out)
				}
				checkAnswer(t, from, fx.upstream, got, fx.want, true)
				if t.Failed() {
					t.Logf("stream:\n%s", out)
				}
			})
		}
	}
}
