package mockprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// The scripted behaviour, set through the admin API as a user would.
const toolBehavior = `{"models":{"tool-mock":{"chunk_count":3,"tool":{"name":"get_weather","arguments":{"city":"Paris","unit":"°C"},"reply":"Weather: {result}"}}}}`

func scriptedEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newEnv(t, Behavior{Text: "plain answer"})
	r := e.mustPost(t, "/_mock/behavior", toolBehavior)
	if r.status != http.StatusOK {
		t.Fatalf("set behavior: %d %s", r.status, r.body)
	}
	return e
}

func sameArgs(t *testing.T, got string) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil || v["city"] != "Paris" || v["unit"] != "°C" || len(v) != 2 {
		t.Errorf("tool arguments %q, want {\"city\":\"Paris\",\"unit\":\"°C\"}", got)
	}
}

func TestToolScriptChat(t *testing.T) {
	e := scriptedEnv(t)
	client := e.openai()
	ctx := context.Background()
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"}})}
	first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "tool-mock", Messages: first, Tools: tools}
			msg, finish := chatTurn(t, client, ctx, params, stream)
			if finish != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" {
				t.Fatalf("first turn: finish %q, message %+v", finish, msg)
			}
			sameArgs(t, msg.ToolCalls[0].Function.Arguments)
			params.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, first...), msg.ToParam(),
				openai.ToolMessage("18 degrees, sunny", msg.ToolCalls[0].ID))
			msg, finish = chatTurn(t, client, ctx, params, stream)
			if finish != "stop" || msg.Content != "Weather: 18 degrees, sunny" {
				t.Errorf("second turn: finish %q content %q", finish, msg.Content)
			}
		})
	}
	// Without the tool on offer the behaviour answers as usual.
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tool-mock", Messages: first})
	if err != nil || resp.Choices[0].Message.Content == "" || len(resp.Choices[0].Message.ToolCalls) != 0 {
		t.Errorf("no tool offered: %v %+v", err, resp)
	}
	// Two loops (one per mode): each one call and one reply; the request
	// without the tool counts in neither.
	st := e.stats(t)
	if m := st.Models["tool-mock"]; m.ToolCalls != 2 || m.ToolResults != 2 || m.Requests != 5 {
		t.Errorf("tool-mock counters %+v, want 5 requests, 2 tool calls, 2 tool results", m)
	}
	if st.Totals.ToolCalls != 2 || st.Totals.ToolResults != 2 {
		t.Errorf("totals %+v, want 2 tool calls and 2 tool results", st.Totals)
	}
}

func chatTurn(t *testing.T, client openai.Client, ctx context.Context, params openai.ChatCompletionNewParams, stream bool) (openai.ChatCompletionMessage, string) {
	t.Helper()
	if !stream {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message, resp.Choices[0].FinishReason
	}
	acc, _, err := sdktest.Chat(t, client.Chat.Completions.NewStreaming(ctx, params))
	if err != nil {
		t.Fatal(err)
	}
	return acc.Choices[0].Message, acc.Choices[0].FinishReason
}

func TestToolScriptMessages(t *testing.T) {
	e := scriptedEnv(t)
	client := e.anthropic()
	ctx := context.Background()
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{}}}}
	first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			params := anthropic.MessageNewParams{Model: "tool-mock", MaxTokens: 100, Messages: first, Tools: tools}
			msg := anthropicTurn(t, client, ctx, params, stream)
			if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" {
				t.Fatalf("first turn: %+v", msg)
			}
			sameArgs(t, string(msg.Content[0].Input))
			params.Messages = append(append([]anthropic.MessageParam{}, first...), msg.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "18 degrees, sunny", false)))
			msg = anthropicTurn(t, client, ctx, params, stream)
			if msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "Weather: 18 degrees, sunny" {
				t.Errorf("second turn: %+v", msg)
			}
		})
	}
}

func anthropicTurn(t *testing.T, client anthropic.Client, ctx context.Context, params anthropic.MessageNewParams, stream bool) anthropic.Message {
	t.Helper()
	if !stream {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		return *msg
	}
	msg, _, err := sdktest.Message(t, client.Messages.NewStreaming(ctx, params))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestToolScriptResponses(t *testing.T) {
	e := scriptedEnv(t)
	client := e.openai()
	ctx := context.Background()
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}}
	user := responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser)
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			params := responses.ResponseNewParams{Model: "tool-mock", Tools: tools, Store: openai.Bool(false),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{user}}}
			resp := responsesTurn(t, client, ctx, params, stream)
			if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" || resp.Output[0].Name != "get_weather" {
				t.Fatalf("first turn: %s", resp.RawJSON())
			}
			sameArgs(t, resp.Output[0].Arguments.OfString)
			output := responses.ResponseInputItemParamOfFunctionCallOutput("18 degrees, sunny")
			output.OfFunctionCallOutput.CallID = openai.String(resp.Output[0].CallID)
			params.Input.OfInputItemList = responses.ResponseInputParam{user,
				responses.ResponseInputItemParamOfFunctionCall(resp.Output[0].Arguments.OfString, resp.Output[0].CallID, "get_weather"),
				output}
			resp = responsesTurn(t, client, ctx, params, stream)
			if got := resp.OutputText(); got != "Weather: 18 degrees, sunny" || resp.Status != "completed" {
				t.Errorf("second turn: %q %s", got, resp.Status)
			}
		})
	}
}

func responsesTurn(t *testing.T, client openai.Client, ctx context.Context, params responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	if !stream {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	events, final, err := sdktest.Responses(client.Responses.NewStreaming(ctx, params))
	if err != nil {
		t.Fatal(err)
	}
	if final == nil {
		t.Fatal("no response.completed")
	}
	if args := sdktest.Deltas(events, "response.function_call_arguments.delta"); len(final.Output) > 0 && final.Output[0].Type == "function_call" && args != final.Output[0].Arguments.OfString {
		t.Errorf("argument deltas %q, final arguments %q", args, final.Output[0].Arguments.OfString)
	}
	return final
}

func TestToolScriptValidation(t *testing.T) {
	for _, bad := range []string{
		`{"tool":{"arguments":{}}}`,
		`{"tool":{"name":"f","arguments":[1]}}`,
		`{"tool":{"name":"f","argument":{}}}`,
	} {
		if _, err := ParseBehavior([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	b, err := ParseBehavior([]byte(`{"tool":{"name":"f"}}`))
	if err != nil || b.Tool == nil || b.Tool.Name != "f" {
		t.Fatalf("minimal script: %+v %v", b, err)
	}
	if ct := compileTool(b.Tool, 5); string(ct.args) != "{}" || len(ct.pieces) != 2 {
		t.Errorf("empty arguments compile to %q in %d pieces", ct.args, len(ct.pieces))
	}
}
