package transport_test

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// countFile adds models for count_tokens routing: two Anthropic-dialect
// targets (the first scripted to fail by its model name), and a chat-only
// target in front of an Anthropic-dialect one.
func countFile(t *testing.T) *config.File {
	t.Helper()
	return testFileWith(t, `,
    "anth2": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["messages"], "connections": {"k": {"api_key_env": "TEST_KEY_B"}}},
    "chatty": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["chat"], "connections": {"k": {"api_key_env": "TEST_KEY_A"}}}`, `,
    "count-pair": {"targets": [{"connection": "anth2", "model": "m-count-bad"}, {"connection": "anth", "model": "m-count-good"}]},
    "count-caller": {"targets": [{"connection": "anth2", "model": "m-count-400"}, {"connection": "anth", "model": "m-count-ok"}]},
    "count-mixed": {"targets": [{"connection": "chatty", "model": "m-count-chat"}, {"connection": "anth", "model": "m-count-fine"}]}`)
}

// countCalls is how many count_tokens requests the mock got for model.
func countCalls(t *testing.T, model string) int {
	t.Helper()
	n := 0
	for _, b := range mockStats(t).Bodies {
		if b.Path == "/v1/messages/count_tokens" && b.Model == model {
			n++
		}
	}
	return n
}

const countPrompt = `"messages":[{"role":"user","content":"Count the tokens of this sentence, please."}]}`

// TestCountTokensFailover: a count is routed like a model call over real
// loopback to the mock: a target failing on the provider's side (503) is
// failed over to the next Anthropic-dialect target, whose own count
// answers; the lanes admitted it (its priority class is on the answer).
// When every Anthropic-dialect target fails, the local estimate answers,
// marked as such and never 0; a chat-only target is never asked to count;
// the caller's own error (a 400 from the provider) is passed through in
// the Anthropic shape, not failed over.
func TestCountTokensFailover(t *testing.T) {
	resetMock(t)
	g := startGateway(t, countFile(t), nil)
	body := `{"model":"count-pair",` + countPrompt
	setBehavior(t, map[string]mockprovider.Behavior{"m-count-bad": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}}})

	r := g.post("/v1/messages/count_tokens", body, "Anthropic-Version", "2023-06-01")
	if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != "" {
		t.Fatalf("failover: %d %v %s", r.status, r.header, r.body)
	}
	good := strings.Replace(body, `"count-pair"`, `"m-count-good"`, 1)
	if got := jsonField(t, r.body, "input_tokens"); got != float64(len(good)/4+1) {
		t.Fatalf("input_tokens %v, want the working provider's count %d", got, len(good)/4+1)
	}
	if !strings.HasSuffix(r.header.Get("X-Omniroute-Target"), "m-count-good") {
		t.Errorf("served by %q, want the second target", r.header.Get("X-Omniroute-Target"))
	}
	if r.header.Get("X-Omniroute-Fallbacks") != "1" {
		t.Errorf("X-OmniRoute-Fallbacks %q, want 1", r.header.Get("X-Omniroute-Fallbacks"))
	}
	if r.header.Get("X-Omniroute-Priority") == "" {
		t.Error("no X-OmniRoute-Priority: the count skipped lane admission")
	}
	if r.header.Get("Request-Id") == "" {
		t.Error("no request-id on an Anthropic-dialect answer")
	}
	if countCalls(t, "m-count-bad") < 1 || countCalls(t, "m-count-good") != 1 {
		t.Fatalf("mock counts: bad %d good %d, want the failing one tried, then the working one once",
			countCalls(t, "m-count-bad"), countCalls(t, "m-count-good"))
	}
	// The count succeeded on the second target but is no latency sample:
	// its TTFB average stays unset.
	var st targets.Stats
	waitFor(t, "the count's success in the targets' snapshot", func() bool {
		for _, s := range g.gw.Targets().Snapshot().Targets {
			if strings.HasSuffix(s.Target, "m-count-good") {
				st = s
				return s.Successes == 1
			}
		}
		return false
	})
	if st.TTFBEWMAMillis != 0 {
		t.Errorf("a count fed the target's TTFB average: %v ms", st.TTFBEWMAMillis)
	}
	// Nor is it in the TTFB histogram, which charts model calls.
	for _, line := range strings.Split(string(g.get("/metrics").body), "\n") {
		if strings.HasPrefix(line, `omniroute_upstream_ttfb_seconds_count{target="`+st.Target+`"}`) && !strings.HasSuffix(line, " 0") {
			t.Errorf("a count is in the TTFB histogram: %s", line)
		}
	}

	// Every Anthropic-dialect target fails: the estimate answers.
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-count-bad":  {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503}},
		"m-count-good": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 529}},
	})
	r = g.post("/v1/messages/count_tokens", body)
	if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != "estimate" {
		t.Fatalf("all failing: %d %v %s", r.status, r.header, r.body)
	}
	if n, _ := jsonField(t, r.body, "input_tokens").(float64); n < 5 {
		t.Fatalf("estimate %v for a sentence, want at least 5", n)
	}

	// A chat-only target cannot count: skipped, the next one counts.
	resetMock(t)
	mixed := `{"model":"count-mixed",` + countPrompt
	r = g.post("/v1/messages/count_tokens", mixed)
	if r.status != 200 || r.header.Get("X-Omniroute-Token-Count") != "" || !strings.HasSuffix(r.header.Get("X-Omniroute-Target"), "m-count-fine") {
		t.Fatalf("mixed: %d %v %s", r.status, r.header, r.body)
	}
	for _, b := range mockStats(t).Bodies {
		if b.Model == "m-count-chat" {
			t.Fatalf("the chat-only target was sent %s", b.Path)
		}
	}

	// The caller's own error is not failed over.
	setBehavior(t, map[string]mockprovider.Behavior{"m-count-400": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 400}}})
	r = g.post("/v1/messages/count_tokens", `{"model":"count-caller",`+countPrompt)
	if r.status != 400 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "invalid_request_error" {
		t.Fatalf("caller error: %d %s", r.status, r.body)
	}
	if countCalls(t, "m-count-400") != 1 || countCalls(t, "m-count-ok") != 0 {
		t.Fatal("a 400 was failed over")
	}
}

// TestCountTokensRefusesStream: a count with "stream": true is refused
// before any provider is asked (count_tokens takes no stream member, and a
// count is answered whole), with a 400 in the Anthropic shape that says
// what to remove.
func TestCountTokensRefusesStream(t *testing.T) {
	resetMock(t)
	g := startGateway(t, countFile(t), nil)
	r := g.post("/v1/messages/count_tokens", `{"model":"count-pair","stream":true,`+countPrompt, "Anthropic-Version", "2023-06-01")
	if r.status != 400 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "invalid_request_error" ||
		!strings.Contains(jsonField(t, r.body, "error", "message").(string), `/v1/messages/count_tokens does not stream; remove "stream"`) {
		t.Fatalf("a streamed count: %d %s", r.status, r.body)
	}
	if n := countCalls(t, "m-count-bad") + countCalls(t, "m-count-good"); n != 0 {
		t.Fatalf("the provider was asked %d times", n)
	}
	// Without it the same count is served.
	if r := g.post("/v1/messages/count_tokens", `{"model":"count-pair","stream":false,`+countPrompt); r.status != 200 {
		t.Fatalf("stream false: %d %s", r.status, r.body)
	}
}
