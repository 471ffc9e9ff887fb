package mockprovider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// sdkText exercises JSON escaping and rune-safe chunk splitting.
const sdkText = "Héllo, \"wörld\"!\nTabs\tand <tags> & ünïcödé ✓"

func (e *testEnv) openai() openai.Client {
	return openai.NewClient(option.WithBaseURL(e.base+"/v1"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0), option.WithHTTPClient(e.hc))
}

func (e *testEnv) anthropic() anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(e.base), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(e.hc))
}

// lastPrompt is P for the most recent request, from the recorded body size.
func (e *testEnv) lastPrompt(t *testing.T) int64 {
	t.Helper()
	b := e.stats(t).Bodies
	if len(b) == 0 {
		t.Fatal("no request recorded")
	}
	return int64((b[len(b)-1].Bytes + 3) / 4)
}

func TestOpenAIChatSDK(t *testing.T) {
	e := newEnv(t, Behavior{Text: sdkText, ChunkCount: 4})
	client := e.openai()
	ctx := context.Background()
	params := func() openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "gpt-mock",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi there")}}
	}

	t.Run("non-stream", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, params())
		if err != nil {
			t.Fatalf("chat completion: %v", err)
		}
		if got := resp.Choices[0].Message.Content; got != sdkText {
			t.Errorf("content = %q, want %q", got, sdkText)
		}
		if resp.Model != "gpt-mock" || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("model %q finish %q", resp.Model, resp.Choices[0].FinishReason)
		}
		p := e.lastPrompt(t)
		if resp.Usage.PromptTokens != p || resp.Usage.CompletionTokens != 4 || resp.Usage.TotalTokens != p+4 {
			t.Errorf("usage = %+v, want prompt %d completion 4", resp.Usage, p)
		}
	})

	for _, includeUsage := range []bool{false, true} {
		name := "stream"
		if includeUsage {
			name = "stream include_usage"
		}
		t.Run(name, func(t *testing.T) {
			p := params()
			if includeUsage {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			acc, all, err := sdktest.Chat(t, client.Chat.Completions.NewStreaming(ctx, p))
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			chunks, usageChunks := len(all), 0
			for _, chunk := range all {
				if len(chunk.Choices) == 0 {
					usageChunks++
				}
			}
			if got := acc.Choices[0].Message.Content; got != sdkText {
				t.Errorf("accumulated content = %q, want %q", got, sdkText)
			}
			wantChunks, wantUsageChunks := 6, 0 // role + 4 deltas + finish
			if includeUsage {
				wantChunks, wantUsageChunks = 7, 1
			}
			if chunks != wantChunks || usageChunks != wantUsageChunks {
				t.Errorf("chunks = %d (usage-only %d), want %d (%d)", chunks, usageChunks, wantChunks, wantUsageChunks)
			}
			if includeUsage {
				prompt := e.lastPrompt(t)
				if acc.Usage.PromptTokens != prompt || acc.Usage.CompletionTokens != 4 || acc.Usage.TotalTokens != prompt+4 {
					t.Errorf("usage = %+v, want prompt %d completion 4", acc.Usage, prompt)
				}
			} else if acc.Usage.TotalTokens != 0 {
				t.Errorf("usage without include_usage = %+v, want none", acc.Usage)
			}
		})
	}
}

func TestOpenAIResponsesSDK(t *testing.T) {
	e := newEnv(t, Behavior{Text: sdkText, ChunkCount: 3, CompletionTokens: 42})
	client := e.openai()
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-mock", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}

	t.Run("non-stream", func(t *testing.T) {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("responses: %v", err)
		}
		if got := resp.OutputText(); got != sdkText {
			t.Errorf("output text = %q, want %q", got, sdkText)
		}
		p := e.lastPrompt(t)
		if resp.Status != "completed" || resp.Usage.InputTokens != p || resp.Usage.OutputTokens != 42 || resp.Usage.TotalTokens != p+42 {
			t.Errorf("status %q usage %+v, want completed, input %d output 42", resp.Status, resp.Usage, p)
		}
	})

	t.Run("stream", func(t *testing.T) {
		events, final, err := sdktest.Responses(client.Responses.NewStreaming(ctx, params))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var types []string
		for i, ev := range events {
			if ev.SequenceNumber != int64(i) {
				t.Errorf("event %d has sequence_number %d", i, ev.SequenceNumber)
			}
			types = append(types, ev.Type)
		}
		if final == nil {
			t.Fatalf("no response.completed among %v", types)
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Errorf("event types = %v, want %v", types, want)
		}
		if text := sdktest.Deltas(events, "response.output_text.delta"); text != sdkText || final.OutputText() != sdkText {
			t.Errorf("deltas %q, final output %q, want %q", text, final.OutputText(), sdkText)
		}
		p := e.lastPrompt(t)
		if final.Usage.InputTokens != p || final.Usage.OutputTokens != 42 || final.Usage.TotalTokens != p+42 {
			t.Errorf("final usage = %+v, want input %d output 42", final.Usage, p)
		}
	})
}

func TestAnthropicMessagesSDK(t *testing.T) {
	e := newEnv(t, Behavior{Text: sdkText, ChunkCount: 5, CompletionTokens: 17})
	client := e.anthropic()
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "claude-mock", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}

	t.Run("non-stream", func(t *testing.T) {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != sdkText {
			t.Errorf("content = %+v, want one text block %q", msg.Content, sdkText)
		}
		p := e.lastPrompt(t)
		if msg.StopReason != "end_turn" || msg.Usage.InputTokens != p || msg.Usage.OutputTokens != 17 {
			t.Errorf("stop %q usage %+v, want end_turn input %d output 17", msg.StopReason, msg.Usage, p)
		}
		hdrs := e.stats(t).Bodies[len(e.stats(t).Bodies)-1].Headers
		if hdrs["authorization"] == "" && hdrs["x-api-key"] == "" {
			t.Errorf("recorded headers carry no API key: %v", hdrs)
		}
	})

	t.Run("stream", func(t *testing.T) {
		msg, events, err := sdktest.Message(t, client.Messages.NewStreaming(ctx, params))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		// start, block start, 5 deltas, block stop, message delta, stop; the
		// SDK swallows the ping.
		if events != 10 {
			t.Errorf("events = %d, want 10", events)
		}
		p := e.lastPrompt(t)
		if len(msg.Content) != 1 || msg.Content[0].Text != sdkText {
			t.Errorf("accumulated content = %+v, want %q", msg.Content, sdkText)
		}
		if msg.StopReason != "end_turn" || msg.Usage.InputTokens != p || msg.Usage.OutputTokens != 17 {
			t.Errorf("stop %q usage %+v, want end_turn input %d output 17", msg.StopReason, msg.Usage, p)
		}
	})
}

// TestErrorEventSDK checks that an in-band stream error surfaces as an SDK
// error (chat, Anthropic) or a typed error event (Responses), after the
// configured number of content deltas.
func TestErrorEventSDK(t *testing.T) {
	e := newEnv(t, Behavior{ChunkCount: 5, Fail: FailSpec{Mode: FailErrorEvent, AfterChunks: 2}})
	ctx := context.Background()
	oc, ac := e.openai(), e.anthropic()

	t.Run("chat", func(t *testing.T) {
		stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		defer stream.Close() // the SDK stops at the terminal event; closing frees the connection
		deltas := 0
		for stream.Next() {
			if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				deltas++
			}
		}
		if stream.Err() == nil {
			t.Fatal("stream ended without error")
		}
		if deltas != 2 {
			t.Errorf("content deltas before the error = %d, want 2", deltas)
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		defer stream.Close() // the SDK stops at the terminal event; closing frees the connection
		for stream.Next() {
		}
		err := stream.Err()
		var apiErr *anthropic.Error
		if err == nil {
			t.Fatal("stream ended without error")
		}
		if errors.As(err, &apiErr) && !strings.Contains(apiErr.RawJSON(), "overloaded_error") {
			t.Errorf("error = %s, want overloaded_error", apiErr.RawJSON())
		}
	})

	t.Run("responses", func(t *testing.T) {
		events, _, err := sdktest.Responses(oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var last responses.ResponseStreamEventUnion
		n := len(events)
		if n > 0 {
			last = events[n-1]
		}
		if last.Type != "error" || last.Code == "" || last.SequenceNumber != int64(n-1) {
			t.Errorf("last event = %q code %q seq %d, want an error event with seq %d", last.Type, last.Code, last.SequenceNumber, n-1)
		}
		if n != 4+2+1 {
			t.Errorf("events = %d, want 4 opening + 2 deltas + error", n)
		}
	})

	st := e.stats(t)
	if st.Totals.Failed != 3 || st.Totals.Completed != 0 {
		t.Errorf("totals = %+v, want 3 failed", st.Totals)
	}
}

// TestStatusErrorSDK checks that family error bodies decode as SDK errors.
func TestStatusErrorSDK(t *testing.T) {
	e := newEnv(t, Behavior{Fail: FailSpec{Mode: FailStatus, Status: 429, Code: "insufficient_quota"}})
	oc, ac := e.openai(), e.anthropic()
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 429 || oerr.Code != "insufficient_quota" || oerr.Type != "insufficient_quota" {
		t.Errorf("openai error = %v, want 429 insufficient_quota", err)
	}
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 429 {
		t.Errorf("anthropic error = %v, want 429", err)
	}
}
