package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// The official SDKs as callers of every dialect against providers that
// speak only one dialect each (the mock on chat, messages or responses):
// the same-dialect pair is the raw relay, the others are translated. Each
// pair runs a plain answer, a stream with usage, a tool round trip, an
// upstream error and a stream the provider cuts after its first bytes, and reads them through the SDK's own types.

const (
	pairText  = "Hello from a translated pair"
	pairTool  = "get_weather"
	pairUsage = 7
)

func pairGateway(t *testing.T) *gwEnv {
	t.Helper()
	resetMock(t)
	f := translatedFile(t)
	behaviors := map[string]mockprovider.Behavior{}
	for _, api := range []string{"chat", "messages", "responses"} {
		f.Models["e-"+api] = config.Model{Targets: []config.Target{{Connection: "only-" + api, Model: "err-" + api}}}
		f.Models["cut-"+api] = config.Model{Targets: []config.Target{{Connection: "only-" + api, Model: "cut-" + api}}}
		behaviors["cut-"+api] = mockprovider.Behavior{ChunkCount: 6, Fail: mockprovider.FailSpec{Mode: mockprovider.FailReset, AfterChunks: 2}}
		behaviors["up-"+api] = mockprovider.Behavior{Text: pairText, ChunkCount: 3, CompletionTokens: pairUsage,
			Tool: &mockprovider.ToolScript{Name: pairTool, Arguments: []byte(`{"city":"Paris"}`)}}
		behaviors["err-"+api] = mockprovider.Behavior{Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 400}}
	}
	g := startGateway(t, f, nil)
	setBehavior(t, behaviors)
	return g
}

var upstreams = []string{"chat", "messages", "responses"}

// eachUpstream runs pair once an upstream dialect, as the subtest
// "<caller>-><upstream>", on one pairGateway.
func eachUpstream(t *testing.T, caller string, pair func(t *testing.T, g *gwEnv, up string)) {
	g := pairGateway(t)
	for _, up := range upstreams {
		t.Run(caller+"->"+up, func(t *testing.T) { pair(t, g, up) })
	}
}

func TestSDKPairsOpenAIChat(t *testing.T) {
	eachUpstream(t, "chat", func(t *testing.T, g *gwEnv, up string) {
		client, ctx := g.openai(), context.Background()
		model := "x-" + up
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Choices[0].Message.Content != pairText || resp.Usage.CompletionTokens != pairUsage || resp.Choices[0].FinishReason != "stop" {
			t.Fatalf("completion %+v", resp)
		}

		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		acc, _, err := sdktest.Chat(t, stream)
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if acc.Choices[0].Message.Content != pairText || acc.Usage.CompletionTokens != pairUsage || acc.Usage.PromptTokens == 0 {
			t.Fatalf("stream %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
		}

		params := openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: pairTool, Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}}
		resp, err = client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		calls := resp.Choices[0].Message.ToolCalls
		if resp.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != pairTool || !strings.Contains(calls[0].Function.Arguments, `"Paris"`) {
			t.Fatalf("tool call %+v", resp.Choices[0])
		}
		params.Messages = append(params.Messages, resp.Choices[0].Message.ToParam(), openai.ToolMessage("sunny, 21C", calls[0].ID))
		resp, err = client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != "The tool said: sunny, 21C" {
			t.Fatalf("after the tool result: %q", got)
		}

		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "e-" + up,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Message == "" {
			t.Fatalf("upstream error surfaced as %T %v", err, err)
		}

		cut := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "cut-" + up,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		n := 0
		for cut.Next() {
			n++
		}
		cut.Close()
		if cut.Err() == nil || n == 0 || !strings.Contains(cut.Err().Error(), "stream_interrupted") && !strings.Contains(cut.Err().Error(), "incomplete") {
			t.Fatalf("mid-stream failure after %d chunks: %v", n, cut.Err())
		}
	})
}

func TestSDKPairsOpenAIResponses(t *testing.T) {
	eachUpstream(t, "responses", func(t *testing.T, g *gwEnv, up string) {
		client, ctx := g.openai(), context.Background()
		model := "x-" + up
		input := responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: input})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OutputText() != pairText || resp.Usage.OutputTokens != pairUsage || resp.Status != "completed" {
			t.Fatalf("response %q %+v %s", resp.OutputText(), resp.Usage, resp.Status)
		}

		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: input})
		events, final, err := sdktest.Responses(stream)
		if err != nil {
			t.Fatal(err)
		}
		text := sdktest.Deltas(events, "response.output_text.delta")
		if final == nil {
			t.Fatalf("stream %q: no response.completed event", text)
		}
		if text != pairText || final.OutputText() != pairText || final.Usage.OutputTokens != pairUsage {
			t.Fatalf("stream %q final %q usage %+v", text, final.OutputText(), final.Usage)
		}

		tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: pairTool,
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
		items := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser)}
		resp, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools, Store: openai.Bool(false),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
		if err != nil {
			t.Fatal(err)
		}
		var call responses.ResponseFunctionToolCall
		for _, o := range resp.Output {
			if o.Type == "function_call" {
				call = o.AsFunctionCall()
			}
		}
		if call.Name != pairTool || !strings.Contains(call.Arguments, `"Paris"`) || call.CallID == "" {
			t.Fatalf("tool call %+v in %+v", call, resp.Output)
		}
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny, 21C")
		out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		items = append(items, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
		resp, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools, Store: openai.Bool(false),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.OutputText(); got != "The tool said: sunny, 21C" {
			t.Fatalf("after the tool result: %q", got)
		}

		_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "e-" + up, Input: input})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Message == "" {
			t.Fatalf("upstream error surfaced as %T %v", err, err)
		}

		cut := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "cut-" + up, Input: input})
		completed, failed := false, false
		for cut.Next() {
			switch cut.Current().Type {
			case "response.completed":
				completed = true
			case "response.failed", "error":
				failed = true
			}
		}
		cut.Close()
		if completed || (!failed && cut.Err() == nil) {
			t.Fatalf("mid-stream failure: completed %v failed %v err %v", completed, failed, cut.Err())
		}
	})
}

func TestSDKPairsAnthropic(t *testing.T) {
	eachUpstream(t, "messages", func(t *testing.T, g *gwEnv, up string) {
		client, ctx := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc)), context.Background()
		model := anthropic.Model("x-" + up)
		msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
		var hdr *http.Response
		resp, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs}, aoption.WithResponseInto(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Content) != 1 || resp.Content[0].Text != pairText || resp.Usage.OutputTokens != pairUsage || resp.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("message %+v", resp)
		}
		if rid := hdr.Header.Get("request-id"); rid == "" || rid != hdr.Header.Get("X-Request-Id") {
			t.Fatalf("request-id %q", rid)
		}

		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs})
		acc, _, err := sdktest.Message(t, stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != pairText || acc.Usage.OutputTokens != pairUsage {
			t.Fatalf("stream %+v", acc)
		}

		tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: pairTool,
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
		msgs = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))}
		resp, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		var use anthropic.ToolUseBlock
		for _, b := range resp.Content {
			if b.Type == "tool_use" {
				use = b.AsToolUse()
			}
		}
		if resp.StopReason != anthropic.StopReasonToolUse || use.Name != pairTool || !strings.Contains(string(use.Input), `"Paris"`) {
			t.Fatalf("tool use %+v", resp)
		}
		msgs = append(msgs, resp.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 21C", false)))
		resp, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Content) == 0 || resp.Content[0].Text != "The tool said: sunny, 21C" {
			t.Fatalf("after the tool result: %+v", resp.Content)
		}

		_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model("e-" + up), MaxTokens: 64, Messages: msgs[:1]})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.RequestID == "" {
			t.Fatalf("upstream error surfaced as %T %v", err, err)
		}

		cut := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model("cut-" + up), MaxTokens: 64, Messages: msgs[:1]})
		n := 0
		for cut.Next() {
			n++
		}
		cut.Close()
		if cut.Err() == nil || n == 0 || !strings.Contains(cut.Err().Error(), "stream_interrupted") {
			t.Fatalf("mid-stream failure after %d events: %v", n, cut.Err())
		}
	})
}
