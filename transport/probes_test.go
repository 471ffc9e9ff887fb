package transport_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/mockprovider"
)

type readyBody struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Reason string `json:"reason"`
	} `json:"checks"`
}

func readyz(t *testing.T, g *gwEnv) (int, readyBody) {
	t.Helper()
	r := g.get("/readyz")
	var b readyBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("/readyz %d: not JSON: %s", r.status, r.body)
	}
	if r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("/readyz Content-Type %q", r.header.Get("Content-Type"))
	}
	return r.status, b
}

// TestProbes: /healthz answers while the process serves; /readyz is 200
// while a target is usable, 503 naming the reason when the only target
// cools down, 200 again when its cooldown ends (on the gateway's clock),
// and 503 while draining, when /healthz still answers 200.
func TestProbes(t *testing.T) {
	resetMock(t)
	clk := clock.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, quotaFile(t, "", `"solo": {"targets": [{"connection": "oai/a", "model": "m-probe-solo"}]}`), nil, clk)

	if r := g.get("/healthz"); r.status != 200 || string(r.body) != `{"status":"alive"}` {
		t.Fatalf("/healthz: %d %s", r.status, r.body)
	}
	waitFor(t, "readiness", func() bool { st, _ := readyz(t, g); return st == 200 })
	st, b := readyz(t, g)
	if b.Status != "ready" || len(b.Checks) != 3 {
		t.Fatalf("ready body %+v", b)
	}
	for _, c := range b.Checks {
		if !c.OK || c.Reason != "" {
			t.Fatalf("check %+v on a ready gateway", c)
		}
	}

	setBehavior(t, map[string]mockprovider.Behavior{
		"m-probe-solo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "30", Times: 1}},
	})
	if r := g.post("/v1/chat/completions", `{"model":"solo","messages":[]}`); r.status != 429 {
		t.Fatalf("the failing target answered %d %s", r.status, r.body)
	}
	waitFor(t, "not ready while the only target cools", func() bool { st, _ := readyz(t, g); return st == 503 })
	st, b = readyz(t, g)
	if b.Status != "not_ready" || !strings.HasPrefix(b.Reason, "target_usable: ") {
		t.Fatalf("cooling: %d %+v", st, b)
	}
	if r := g.get("/healthz"); r.status != 200 {
		t.Fatalf("/healthz while not ready: %d", r.status)
	}

	clk.Advance(31 * time.Second)
	waitFor(t, "ready once the cooldown ended", func() bool { st, _ := readyz(t, g); return st == 200 })

	g.gw.MarkDraining()
	st, b = readyz(t, g)
	if st != 503 || !strings.HasPrefix(b.Reason, "not_draining: ") {
		t.Fatalf("draining: %d %+v", st, b)
	}
	if r := g.get("/healthz"); r.status != 200 {
		t.Fatalf("/healthz while draining: %d", r.status)
	}
	if r := g.post("/readyz", `{}`); r.status != 405 {
		t.Fatalf("POST /readyz: %d", r.status)
	}
}
