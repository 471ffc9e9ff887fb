package transport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// TestSingleTargetRetriesATransientFailureOnce: a model with one target
// retries a 5xx once (nothing else is left and a retry may cure it); the
// retry is the circuit's probe, so its success puts the target back at
// once for everyone. A failure that persists reaches the caller without
// X-Should-Retry: false, so the SDK may retry it after Retry-After.
func TestSingleTargetRetriesATransientFailureOnce(t *testing.T) {
	resetMock(t)
	g := startGateway(t, quotaFile(t, "", `
    "once": {"targets": [{"connection": "oai/a", "model": "m-once"}]},
    "storm": {"targets": [{"connection": "oai/a", "model": "m-storm"}]}`), map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "100"})
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-once":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 503, Times: 1}},
		"m-storm": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503}},
	})
	r := g.post("/v1/chat/completions", `{"model":"once","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" || mockStats(t).Models["m-once"].Requests != 2 {
		t.Fatalf("one 503 then a retry: %d %v, provider saw %d", r.status, r.header, mockStats(t).Models["m-once"].Requests)
	}
	// The retry's success closed the circuit: the next request goes
	// straight through.
	if r = g.post("/v1/chat/completions", `{"model":"once","messages":[]}`); r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "0" {
		t.Fatalf("after the retry closed the circuit: %d %v", r.status, r.header)
	}
	r = g.post("/v1/chat/completions", `{"model":"storm","messages":[]}`)
	if r.status != 503 || r.header.Get("X-Should-Retry") != "" || mockStats(t).Models["m-storm"].Requests != 2 {
		t.Fatalf("a 503 storm: %d %v, provider saw %d", r.status, r.header, mockStats(t).Models["m-storm"].Requests)
	}
	if m := scrape(t, g); !strings.Contains(m, `omniroute_routing_retries_total{route="chat"} 2`) {
		t.Fatalf("retries metric:\n%s", grepLines(m, "omniroute_routing_retries"))
	}
}

// TestCallerDeadlineBoundsTheRoutingWait: a request whose stated deadline
// ends before its only target recovers is refused at once instead of
// waiting (the gateway's clock is frozen here, so a wait would never end),
// and a malformed x-omniroute-timeout-ms is a 400.
func TestCallerDeadlineBoundsTheRoutingWait(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, quotaFile(t, "", `
    "dl": {"targets": [{"connection": "oai/a", "model": "m-dl"}]}`), map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "10000"}, clk)
	setBehavior(t, map[string]mockprovider.Behavior{"m-dl": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "5", Times: 1}}})
	if r := g.post("/v1/chat/completions", `{"model":"dl","messages":[]}`); r.status != 429 {
		t.Fatalf("first 429: %d %s", r.status, r.body)
	}
	waitFor(t, "the cooldown", func() bool {
		for _, c := range g.quota().Connections {
			for _, tg := range c.Targets {
				if tg.Target == "oai/a/m-dl" && tg.CooldownUntil != nil {
					return true
				}
			}
		}
		return false
	})
	for _, h := range [][]string{{"X-Stainless-Timeout", "1"}, {"X-Omniroute-Timeout-Ms", "2000"}} {
		r := g.post("/v1/chat/completions", `{"model":"dl","messages":[]}`, h...)
		if r.status != 429 || jsonField(t, r.body, "error", "code") != "targets_exhausted" || r.header.Get("Retry-After") != "5" {
			t.Fatalf("%s: %d %v %s", h[0], r.status, r.header, r.body)
		}
	}
	for _, v := range []string{"0", "-5", "1.5", "soon"} {
		r := g.post("/v1/chat/completions", `{"model":"dl","messages":[]}`, "X-Omniroute-Timeout-Ms", v)
		if r.status != 400 || jsonField(t, r.body, "error", "code") != "invalid_timeout" {
			t.Fatalf("timeout %q: %d %s", v, r.status, r.body)
		}
	}
	if n := mockStats(t).Models["m-dl"].Requests; n != 1 {
		t.Fatalf("the provider saw %d requests, want only the first", n)
	}
}
