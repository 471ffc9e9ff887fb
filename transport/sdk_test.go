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
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// The official SDKs are the black-box clients: if they parse the gateway's
// answers, streams and errors, coding agents built on them will too.

const sdkKey = "sdk-tenant-key"

// sdkGateway serves the SDK tests' models to tenant sdkKey, on a
// freshly reset mock.
func sdkGateway(t *testing.T) *gwEnv {
	t.Helper()
	resetMock(t)
	f := testFile(t, `,
    "gpt": {"targets": [{"connection": "mock/a", "model": "m-sdk"}]},
    "gpt-broken": {"targets": [{"connection": "mock/a", "model": "m-sdk-broken"}]},
    "claude-broken": {"targets": [{"connection": "anth", "model": "m-sdk-broken"}]}`)
	f.Auth.Mode, f.Auth.AllowAnonymous = "keys", false
	f.Tenants = append(f.Tenants, tenantWithSHA("sdk", sdkKey))
	g := startGateway(t, f, nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-sdk":        {Text: "Hello from the gateway test", ChunkCount: 4, CompletionTokens: 9},
		"m-claude":     {Text: "Hello from the gateway test", ChunkCount: 4, CompletionTokens: 9},
		"m-sdk-broken": {ChunkCount: 6, Fail: mockprovider.FailSpec{Mode: "reset", AfterChunks: 2}},
	})
	return g
}

func (g *gwEnv) openai() openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey(sdkKey),
		option.WithMaxRetries(0), option.WithHTTPClient(g.hc))
}

func TestSDKOpenAIChat(t *testing.T) {
	g := sdkGateway(t)
	client := g.openai()
	ctx := context.Background()
	var hdr *http.Response
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithResponseInto(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello from the gateway test" || resp.Usage.CompletionTokens != 9 {
		t.Fatalf("completion %+v", resp)
	}
	if hdr.Header.Get("X-OmniRoute-Target") != "mock/a/m-sdk" {
		t.Fatalf("target header %q", hdr.Header.Get("X-OmniRoute-Target"))
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc, _, err := sdktest.Chat(t, stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if acc.Choices[0].Message.Content != "Hello from the gateway test" || acc.Usage.CompletionTokens != 9 || acc.Usage.PromptTokens == 0 {
		t.Fatalf("accumulated %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
}

func TestSDKOpenAIResponsesStreaming(t *testing.T) {
	g := sdkGateway(t)
	client := g.openai()
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	events, final, err := sdktest.Responses(stream)
	if err != nil {
		t.Fatal(err)
	}
	text := sdktest.Deltas(events, "response.output_text.delta")
	if final == nil {
		t.Fatalf("no response.completed event after %q", text)
	}
	if text != "Hello from the gateway test" || final.OutputText() != text || final.Usage.OutputTokens != 9 {
		t.Fatalf("text %q final %q usage %+v", text, final.OutputText(), final.Usage)
	}
}

func TestSDKAnthropicStreamingBothAuthHeaders(t *testing.T) {
	g := sdkGateway(t)
	params := anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
	auths := map[string][]aoption.RequestOption{
		"bearer":    {aoption.WithAPIKey(sdkKey)},
		"x-api-key": {aoption.WithoutEnvironmentDefaults(), aoption.WithHeader("X-Api-Key", sdkKey)},
	}
	for name, auth := range auths {
		t.Run(name, func(t *testing.T) {
			opts := append([]aoption.RequestOption{aoption.WithBaseURL(g.base), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc)}, auth...)
			client := anthropic.NewClient(opts...)
			stream := client.Messages.NewStreaming(context.Background(), params)
			msg, _, err := sdktest.Message(t, stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the gateway test" || msg.Usage.OutputTokens != 9 || msg.StopReason != "end_turn" {
				t.Fatalf("message %+v", msg)
			}
			// The anthropic-version the SDK sent reached the provider.
			st := mockStats(t)
			if v := st.Bodies[len(st.Bodies)-1].Headers["anthropic-version"]; v == "" {
				t.Fatal("anthropic-version was not passed through")
			}
		})
	}
}

func TestSDKMidStreamFailureIsAnError(t *testing.T) {
	g := sdkGateway(t)
	oc := g.openai()
	stream := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-broken",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer stream.Close()
	chunks := 0
	for stream.Next() {
		chunks++
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "stream_interrupted") && !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("openai stream error = %v after %d chunks; want the gateway's in-band error", err, chunks)
	}
	if chunks < 2 {
		t.Fatalf("only %d chunks arrived before the failure", chunks)
	}

	client := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey(sdkKey), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc))
	as := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-broken", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	defer as.Close()
	for as.Next() {
	}
	var aerr *anthropic.Error
	if err := as.Err(); err == nil || (errors.As(err, &aerr) && !strings.Contains(aerr.RawJSON(), "stream_interrupted")) {
		t.Fatalf("anthropic stream error = %v; want the gateway's in-band error", err)
	}
}
