package transport_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/transport/gateway"
)

type dashSnap struct {
	Status   string `json:"status"`
	Overview struct {
		RequestsPerSecond *float64 `json:"requestsPerSecond"`
		P99Seconds        *float64 `json:"p99Seconds"`
		Inflight          int64    `json:"inflight"`
		ByTarget          []struct {
			Name              string  `json:"name"`
			AttemptsPerSecond float64 `json:"attemptsPerSecond"`
		} `json:"byTarget"`
		ByModel []struct {
			Name string `json:"name"`
		} `json:"byModel"`
	} `json:"overview"`
	Admission struct {
		Mode    string `json:"mode"`
		Limit   int64  `json:"limit"`
		History struct {
			T     []int64 `json:"t"`
			Limit []int64 `json:"limit"`
		} `json:"history"`
		Lanes []struct {
			Upstream, Tenant string
			QueuedCount      int64 `json:"queuedCount"`
		} `json:"lanes"`
		Ingest struct {
			MaxInflightBytes int64 `json:"maxInflightBytes"`
		} `json:"ingest"`
	} `json:"admission"`
	Providers []struct {
		Target  string `json:"target"`
		Circuit string `json:"circuit"`
	} `json:"providers"`
	ProviderCount int `json:"providerCount"`
	Services      []struct {
		Tool, State string
	} `json:"services"`
}

func snapshot(t *testing.T, g *gwEnv, headers ...string) dashSnap {
	t.Helper()
	r := g.send("GET", "/api/dashboard/snapshot", "", headers...)
	if r.status != 200 {
		t.Fatalf("snapshot: %d %s", r.status, r.body)
	}
	var s dashSnap
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("snapshot not JSON: %v %s", err, r.body)
	}
	return s
}

// TestDashboardAssetsAndSnapshot: the page and its assets are served from
// the binary with a strict content security policy; the snapshot has the
// history, the targets and the figures after traffic.
func TestDashboardAssetsAndSnapshot(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	for path, ctype := range map[string]string{"/dashboard": "text/html", "/dashboard/app.js": "text/javascript", "/dashboard/app.css": "text/css"} {
		r := g.get(path)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) || len(r.body) < 100 {
			t.Fatalf("%s: %d %q %d bytes", path, r.status, r.header.Get("Content-Type"), len(r.body))
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
	}
	page := string(g.get("/dashboard").body)
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Fatal("the page references another origin")
	}
	if r := g.get("/dashboard/nope.js"); r.status != 404 {
		t.Fatalf("unknown asset: %d", r.status)
	}
	if r := g.post("/api/dashboard/snapshot", `{}`); r.status != 405 {
		t.Fatalf("POST snapshot: %d", r.status)
	}
	// Traffic goes on while the test polls: the rates cover the last ten
	// seconds, however slow the machine is.
	var s dashSnap
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := g.post("/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`); r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
		s = snapshot(t, g)
		if len(s.Admission.History.T) >= 2 && s.Overview.RequestsPerSecond != nil && *s.Overview.RequestsPerSecond > 0 &&
			len(s.Overview.ByTarget) > 0 && len(s.Overview.ByModel) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no history and rates after 30 s of traffic: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s.Overview.ByTarget[0].Name != "mock/a/m-echo" || s.Overview.ByTarget[0].AttemptsPerSecond <= 0 || s.Overview.ByModel[0].Name != "echo" {
		t.Fatalf("by target %+v, by model %+v", s.Overview.ByTarget, s.Overview.ByModel)
	}
	if s.Status != "ok" || s.Admission.Mode != "enforce" || s.Admission.Ingest.MaxInflightBytes <= 0 || s.Overview.P99Seconds == nil {
		t.Fatalf("snapshot %+v", s)
	}
	if len(s.Admission.History.T) != len(s.Admission.History.Limit) || s.Admission.History.Limit[len(s.Admission.History.Limit)-1] <= 0 {
		t.Fatalf("history %+v", s.Admission.History)
	}
	if s.ProviderCount != len(s.Providers) || s.ProviderCount < 4 {
		t.Fatalf("providers %d of %d", len(s.Providers), s.ProviderCount)
	}
}

// TestDashboardGuard: with OMNIROUTE_MANAGEMENT_KEY set the snapshot needs
// the key, like /api/services; a cross-site request is refused.
func TestDashboardGuard(t *testing.T) {
	g := startGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_MANAGEMENT_KEY": "mgmt-key-0123456789"})
	if r := g.get("/api/dashboard/snapshot"); r.status != 401 {
		t.Fatalf("without the key: %d %s", r.status, r.body)
	}
	if r := g.send("GET", "/api/dashboard/snapshot", "", "Authorization", "Bearer wrong"); r.status != 401 {
		t.Fatalf("wrong key: %d", r.status)
	}
	snapshot(t, g, "Authorization", "Bearer mgmt-key-0123456789")
	if r := g.send("GET", "/api/dashboard/snapshot", "", "Authorization", "Bearer mgmt-key-0123456789", "Sec-Fetch-Site", "cross-site"); r.status != 403 {
		t.Fatalf("cross-site: %d %s", r.status, r.body)
	}
	if r := g.send("GET", "/api/dashboard/snapshot", "", "Authorization", "Bearer mgmt-key-0123456789", "Origin", "http://evil.example"); r.status != 403 {
		t.Fatalf("foreign origin: %d %s", r.status, r.body)
	}
	// The page itself carries no data: a loopback browser loads it and
	// then asks for the key.
	if r := g.get("/dashboard"); r.status != 200 {
		t.Fatalf("page: %d", r.status)
	}
}

// TestDashboardCapsProviders: with 120 targets the snapshot lists 100 and
// says how many there are.
func TestDashboardCapsProviders(t *testing.T) {
	var models strings.Builder
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&models, `, "cap-%d": {"targets": [{"connection": "mock/a", "model": "m-cap-%d"}]}`, i, i)
	}
	g := startGateway(t, testFile(t, models.String()), nil)
	s := snapshot(t, g)
	if len(s.Providers) != 100 || s.ProviderCount < 120 {
		t.Fatalf("providers %d of %d; want 100 listed", len(s.Providers), s.ProviderCount)
	}
}

// BenchmarkDashboardSnapshot measures one poll of the dashboard over HTTP
// (GET /api/dashboard/snapshot: built from the published snapshots,
// encoded, sent) at the scale the page must stand: 100 targets and 1,000
// tenant lanes, every lane with a queued request (FillLanes).
//
//	go test ./transport -run '^$' -bench BenchmarkDashboardSnapshot -benchmem
func BenchmarkDashboardSnapshot(b *testing.B) {
	g := startGatewayWith(b, scaleFile(b, 100), scaleEnv, gateway.Options{})
	release := g.gw.FillLanes(1000)
	defer release()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		r := g.get("/api/dashboard/snapshot")
		if r.status != 200 {
			b.Fatalf("snapshot %d", r.status)
		}
		n = len(r.body)
	}
	b.ReportMetric(float64(n), "bytes/snapshot")
}
