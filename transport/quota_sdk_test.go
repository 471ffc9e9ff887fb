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
	"github.com/omniroute/gateway/internal/testutil/sdktest"
)

// TestSDKRetriesOnlyWhenARetryCanHelp: with its default retries on,
// openai-go retries the gateway's final 429 after a transient rate limit
// (it carries Retry-After and no X-Should-Retry: false), but not a 429
// that says the quota is spent (X-Should-Retry: false: a retry cannot
// help); and an SDK that streams without include_usage never sees the
// usage chunk the gateway asked for.
func TestSDKRetriesOnlyWhenARetryCanHelp(t *testing.T) {
	resetMock(t)
	g := startGateway(t, quotaFile(t, `, "limits": {"tokens_per_minute": 1000000}`, `
    "sdk-429": {"targets": [{"connection": "oai/a", "model": "m-sdk-429"}]},
    "sdk-quota": {"targets": [{"connection": "oai/b", "model": "m-sdk-quota"}]},
    "sdk-meter": {"targets": [{"connection": "oai/a", "model": "m-sdk-meter"}]}`), map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "100"})
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-sdk-429": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "1"}},
		"m-sdk-quota": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429,
			Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`}},
		"m-sdk-meter": {Text: "metered answer", ChunkCount: 3},
	})
	client := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey("k"), option.WithHTTPClient(g.hc)) // default retries
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		model, upstream string
		want            int64
	}{{"sdk-429", "m-sdk-429", 3}, {"sdk-quota", "m-sdk-quota", 1}} {
		var resp *http.Response
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: tc.model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithResponseInto(&resp))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
			t.Fatalf("%s: want a 429 API error, got %v", tc.model, err)
		}
		// The SDK's retries wait out Retry-After (the target's cooldown),
		// so each reaches the provider as the circuit's probe.
		if n := mockStats(t).Models[tc.upstream].Requests; n != tc.want {
			t.Fatalf("%s: the provider saw %d requests, want %d (the SDK's first try and its retries)", tc.model, n, tc.want)
		}
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "sdk-meter",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	acc, chunks, err := sdktest.Chat(t, stream)
	for _, c := range chunks {
		if len(c.Choices) == 0 {
			t.Fatalf("a usage-only chunk reached the SDK: %+v", c)
		}
	}
	if err != nil || acc.Choices[0].Message.Content != "metered answer" || acc.Usage.TotalTokens != 0 {
		t.Fatalf("stream: %v %q usage %+v after %d chunks", err, acc.Choices[0].Message.Content, acc.Usage, len(chunks))
	}
}
