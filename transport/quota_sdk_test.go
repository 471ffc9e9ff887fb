package transport_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// TestSDKDoesNotRetryAfterGatewayFailover: with its default retries on,
// openai-go honours X-Should-Retry: false on the gateway's final 429, so
// the provider sees one request, not three; and an SDK that streams
// without include_usage never sees the usage chunk the gateway asked for.
func TestSDKDoesNotRetryAfterGatewayFailover(t *testing.T) {
	resetMock(t)
	g := startGateway(t, quotaFile(t, `, "limits": {"tokens_per_minute": 1000000}`, `
    "sdk-429": {"targets": [{"connection": "oai/a", "model": "m-sdk-429"}]},
    "sdk-meter": {"targets": [{"connection": "oai/a", "model": "m-sdk-meter"}]}`), map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "100"})
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-sdk-429":   {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "1"}},
		"m-sdk-meter": {Text: "metered answer", ChunkCount: 3},
	})
	client := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey("k"), option.WithHTTPClient(g.hc)) // default retries
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var resp *http.Response
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sdk-429",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("want a 429 API error, got %v", err)
	}
	if n := mockStats(t).Models["m-sdk-429"].Requests; n != 1 {
		t.Fatalf("the provider saw %d requests; the SDK retried despite X-Should-Retry: false", n)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "sdk-meter",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 {
			t.Fatalf("a usage-only chunk reached the SDK: %+v", c)
		}
		acc.AddChunk(c)
		chunks++
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "metered answer" || acc.Usage.TotalTokens != 0 {
		t.Fatalf("stream: %v %q usage %+v after %d chunks", err, acc.Choices[0].Message.Content, acc.Usage, chunks)
	}
}
