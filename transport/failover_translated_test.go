package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// echoedKeyBody is an OpenAI-shaped provider error that echoes the key it
// was sent, as some providers do.
const echoedKeyBody = `{"error":{"message":"server overloaded for key upstream-key-a, try later","type":"server_error","code":"overloaded"}}`

// TestSDKAnthropicFailoverErrorTranslated: an Anthropic SDK caller whose
// model is served by chat-only providers (translated) and whose every
// target fails sees, after failover runs out, the error in its own
// dialect: an *anthropic.Error of the Anthropic error type for the
// status, with the provider's message redacted, never the provider's
// OpenAI-shaped body. That holds when the last target tried was of
// another dialect and could not be reached at all (the error kept is the
// chat provider's).
func TestSDKAnthropicFailoverErrorTranslated(t *testing.T) {
	resetMock(t)
	f := translatedFile(t)
	f.Providers["dead-responses"] = config.Provider{BaseURL: "http://127.0.0.1:1/v1", APIs: []string{"responses"},
		Connections: map[string]config.Connection{"k": {APIKeyEnv: "TEST_KEY_A"}}}
	f.Models["fo-chat"] = config.Model{Targets: []config.Target{{Connection: "only-chat", Model: "fo-a"}, {Connection: "only-chat", Model: "fo-b"}}}
	f.Models["fo-limited"] = config.Model{Targets: []config.Target{{Connection: "only-chat", Model: "fo-rl"}}}
	f.Models["fo-mixed"] = config.Model{Targets: []config.Target{{Connection: "only-chat", Model: "fo-c"}, {Connection: "dead-responses", Model: "m-dead"}}}
	g := startGateway(t, f, nil)
	overloaded := mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503, Body: echoedKeyBody}
	setBehavior(t, map[string]mockprovider.Behavior{
		"fo-a": {Fail: overloaded}, "fo-b": {Fail: overloaded}, "fo-c": {Fail: overloaded},
		"fo-rl": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 429, RetryAfter: "120"}},
	})
	client := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc))
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}

	for _, tc := range []struct {
		model    string
		status   int
		errType  string
		fallback string
	}{
		{"fo-chat", 503, "overloaded_error", "2"}, // two targets, then the one retry of the last
		{"fo-mixed", 503, "overloaded_error", "2"},
		{"fo-limited", 429, "rate_limit_error", "0"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			var hdr *http.Response
			_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 64, Messages: msgs},
				aoption.WithResponseInto(&hdr))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("surfaced as %T %v", err, err)
			}
			raw := apiErr.RawJSON()
			if apiErr.StatusCode != tc.status || string(apiErr.Type()) != tc.errType || apiErr.RequestID == "" {
				t.Fatalf("status %d type %q request id %q, want %d %s: %s", apiErr.StatusCode, apiErr.Type(), apiErr.RequestID, tc.status, tc.errType, raw)
			}
			if !strings.HasPrefix(raw, `{"type":"error"`) || strings.Contains(raw, "server_error") {
				t.Fatalf("not the Anthropic error shape: %s", raw)
			}
			if strings.Contains(raw, "upstream-key-a") {
				t.Fatalf("the provider's key reached the caller: %s", raw)
			}
			if tc.status == 503 && !strings.Contains(apiErr.Message, "server overloaded") {
				t.Fatalf("message %q lost the provider's explanation", apiErr.Message)
			}
			if got := hdr.Header.Get("X-Omniroute-Translated"); got != "messages->chat" {
				t.Errorf("X-OmniRoute-Translated %q, want messages->chat", got)
			}
			if got := hdr.Header.Get("X-Omniroute-Fallbacks"); got != tc.fallback {
				t.Errorf("X-OmniRoute-Fallbacks %q, want %s", got, tc.fallback)
			}
			if tc.status == 429 && hdr.Header.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
		})
	}
}
