package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport/gateway"
)

// TestSDKsReadTheWindowsAndTheGatewayAgrees: a key limited to 4 requests
// a minute and 6 a day, driven through the official SDKs on a fake clock.
// What the SDK reads from the raw response headers is what the gateway
// then does: as many more requests pass as x-ratelimit-remaining-requests
// said, the next is refused, and it passes exactly when retry-after-ms
// said; once the day is the tighter window the headers name its limit,
// and again exactly as many pass as they said. The Anthropic SDK reads the
// same windows under its own header names.
func TestSDKsReadTheWindowsAndTheGatewayAgrees(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ten-gpt": {Text: "ok", CompletionTokens: 3}, "m-ten-claude": {Text: "ok", CompletionTokens: 3}})
	t0 := time.Date(2026, 4, 2, 9, 36, 0, 0, time.UTC) // a slot boundary of every window (a day's are 24 minutes)
	clk := clock.NewFake(t0)
	g := startGatewayWith(t, tenantsFile(t), nil, gateway.Options{Clock: clk})
	k := g.createKey(`{"name":"windows","requests_per_minute":4,"requests_per_day":6,"tokens_per_minute":100000}`)
	oc := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey(k.Secret), option.WithMaxRetries(0), option.WithHTTPClient(g.hc))
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "ten-gpt", MaxTokens: openai.Int(16), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	// call makes one request through the SDK and returns its status and
	// the raw headers the SDK read.
	call := func() (int, http.Header) {
		t.Helper()
		var hr *http.Response
		_, err := oc.Chat.Completions.New(ctx, chat, option.WithResponseInto(&hr))
		var oe *openai.Error
		switch {
		case err == nil:
			return 200, hr.Header
		case errors.As(err, &oe):
			return oe.StatusCode, oe.Response.Header
		}
		t.Fatalf("the SDK failed: %v", err)
		return 0, nil
	}
	num := func(h http.Header, name string) int {
		t.Helper()
		v, err := strconv.Atoi(h.Get(name))
		if err != nil {
			t.Fatalf("header %s = %q: %v (all: %v)", name, h.Get(name), err, h)
		}
		return v
	}
	// passes makes requests while the headers say one is left, and
	// checks that each of them passes and the one after is refused.
	passes := func(h http.Header, wantLimit int) http.Header {
		t.Helper()
		if got := num(h, "x-ratelimit-limit-requests"); got != wantLimit {
			t.Fatalf("x-ratelimit-limit-requests %d, want the tightest window's %d", got, wantLimit)
		}
		for left := num(h, "x-ratelimit-remaining-requests"); left > 0; left-- {
			status, next := call()
			if status != 200 {
				t.Fatalf("the headers said %d left, but the request was refused: %d %v", left, status, next)
			}
			if got := num(next, "x-ratelimit-remaining-requests"); got != left-1 {
				t.Fatalf("after a request with %d left the headers say %d", left, got)
			}
			h = next
		}
		status, refused := call()
		if status != 429 {
			t.Fatalf("the headers said none left, but the next request got %d", status)
		}
		if num(refused, "x-ratelimit-remaining-requests") != 0 {
			t.Fatalf("a refusal's headers say %s left", refused.Get("x-ratelimit-remaining-requests"))
		}
		return refused
	}

	status, h := call()
	if status != 200 {
		t.Fatalf("first request: %d", status)
	}
	// The minute (3 of 4 left) is tighter than the day (5 of 6).
	refused := passes(h, 4)
	wait := time.Duration(num(refused, "retry-after-ms")) * time.Millisecond
	if wait != 62*time.Second || refused.Get("Retry-After") != "62" || refused.Get("x-ratelimit-reset-requests") != "1m2s" {
		t.Fatalf("the refusal's wait: retry-after-ms %v, Retry-After %s, reset %s; want the 62 s until the first second leaves the rolling minute",
			wait, refused.Get("Retry-After"), refused.Get("x-ratelimit-reset-requests"))
	}
	clk.Set(t0.Add(wait - time.Millisecond))
	if status, _ := call(); status != 429 {
		t.Fatalf("a millisecond before retry-after-ms: %d", status)
	}
	clk.Set(t0.Add(wait))
	status, h = call()
	if status != 200 {
		t.Fatalf("at retry-after-ms: %d", status)
	}
	// Five of the day's six are used: the day (1 left) is now tighter
	// than the minute (3 left), and the headers say so.
	refused = passes(h, 6)
	if refused.Get("x-ratelimit-limit-requests") != "6" || num(refused, "retry-after-ms") != int((24*time.Hour+48*time.Minute-wait)/time.Millisecond) {
		t.Fatalf("the day's refusal: %v", refused)
	}

	// The Anthropic SDK reads the same windows under its names.
	k2 := g.createKey(`{"name":"windows-2","requests_per_minute":3,"tokens_per_minute":50000}`)
	ac := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey(k2.Secret), aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.hc))
	params := anthropic.MessageNewParams{Model: "ten-claude", MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	var ar *http.Response
	for want := 2; want >= 0; want-- {
		if _, err := ac.Messages.New(ctx, params, aoption.WithResponseInto(&ar)); err != nil {
			t.Fatal(err)
		}
		if got := num(ar.Header, "anthropic-ratelimit-requests-remaining"); got != want || ar.Header.Get("anthropic-ratelimit-requests-limit") != "3" {
			t.Fatalf("anthropic-ratelimit-requests-remaining %d, want %d", got, want)
		}
	}
	reset, err := time.Parse(time.RFC3339, ar.Header.Get("anthropic-ratelimit-requests-reset"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ac.Messages.New(ctx, params, aoption.WithResponseInto(&ar))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 {
		t.Fatalf("the fourth request: %v", err)
	}
	clk.Set(reset)
	if _, err := ac.Messages.New(ctx, params); err != nil {
		t.Fatalf("at anthropic-ratelimit-requests-reset (%s) the window has room again: %v", reset, err)
	}
}
