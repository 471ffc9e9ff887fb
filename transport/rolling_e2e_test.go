package transport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/ratecheck"
	"github.com/omniroute/gateway/transport/gateway"
)

// ownMock starts a mock provider process of the test's own, with a
// request log (its arrival times are the provider's count), so a long
// test can run beside the package's others, which reset the shared one.
func ownMock(t *testing.T, behavior map[string]mockprovider.Behavior) (*mockprovider.Process, *mockprovider.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := mockprovider.StartProcess(ctx, "", "--listen", "127.0.0.1:0", "--quiet", "--request-log", "100000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	c := &mockprovider.Client{BaseURL: "http://" + p.Addr}
	if err := c.SetBehavior(mockprovider.BehaviorUpdate{Models: behavior}); err != nil {
		t.Fatal(err)
	}
	return p, c
}

// arrivals are the times the mock read requests for model, sorted.
func arrivals(t *testing.T, c *mockprovider.Client, model string) []time.Time {
	t.Helper()
	l, err := c.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if l.Dropped > 0 {
		t.Fatalf("the mock's request log dropped %d records", l.Dropped)
	}
	var out []time.Time
	for _, r := range l.Records {
		if r.Model == model {
			out = append(out, r.Arrived)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// TestConnectionLimitHoldsInAnyMinuteAtTheProvider: a connection limited
// to 60 requests a minute, offered 3 a second for two and a half minutes
// across minute boundaries. Real time (the provider's own clock is the
// judge): about 150 s, run in parallel with the package's other tests.
func TestConnectionLimitHoldsInAnyMinuteAtTheProvider(t *testing.T) {
	t.Parallel()
	p, admin := ownMock(t, map[string]mockprovider.Behavior{"m-roll": {LatencyMS: 5, CompletionTokens: 3}})
	js := `{
  "providers": {"p": {"base_url": "http://` + p.Addr + `/v1", "apis": ["chat"], "auth": "none",
      "connections": {"a": {"limits": {"requests_per_minute": 60}}}}},
  "models": {"roll": {"targets": [{"connection": "p/a", "model": "m-roll"}]}},
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`
	f := fileFrom(t, js)
	// No waiting for the budget: a refusal is answered at once, with its
	// Retry-After.
	g := startGateway(t, f, map[string]string{"OMNIROUTE_ROUTING_MAX_WAIT_MS": "0"})
	const d = 150 * time.Second
	body := `{"model":"roll","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	run := ratecheck.Offer(3, d, []string{g.base}, func(base string) (int, http.Header, error) {
		resp, err := g.hc.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header, nil
	})
	ratecheck.Check(t, run, arrivals(t, admin, "m-roll"), ratecheck.Limit{Requests: 60, Duration: d, Slack: 3500 * time.Millisecond, Grace: 100 * time.Millisecond})
}

// TestTokenWindowBelowARequestIsExplained: a connection whose token
// window is below what a request without max_tokens reserves does not
// start, and the error says what to change; with a smaller default
// output reservation it starts.
func TestTokenWindowBelowARequestIsExplained(t *testing.T) {
	js := `{
  "providers": {"p": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "auth": "none",
      "connections": {"a": {"limits": {"tokens_per_minute": 800, "models": {"m-small": {"tokens_per_day": 500000}}}}}}},
  "models": {"small": {"targets": [{"connection": "p/a", "model": "m-small"}]}},
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`
	f := fileFrom(t, js)
	e := testEnv(t, nil)
	system := testutil.ActorSystem(t)
	_, err := gateway.New(system, gateway.Options{Env: e, File: f, Getenv: testGetenv})
	want := "providers.p.connections.a.limits.tokens_per_minute: 800 is below the 1024 tokens a request without max_tokens reserves"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS") {
		t.Fatalf("start-up error %v; want it to contain %q", err, want)
	}
	g := startGateway(t, f, map[string]string{"OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS": "256"})
	var q struct {
		Connections []struct {
			Ledger []struct {
				Model   string `json:"model"`
				Windows []struct {
					Dimension, Period string
					Limit             int64
				} `json:"windows"`
			} `json:"ledger"`
		} `json:"connections"`
	}
	if r := g.get("/api/omniroute/quota"); r.status != 200 || json.Unmarshal(r.body, &q) != nil {
		t.Fatalf("quota report: %d %s", r.status, r.body)
	}
	w := q.Connections[0].Ledger[0].Windows
	if len(w) != 2 || w[0].Dimension != "tokens" || w[0].Period != rolling.Minute.String() || w[0].Limit != 800 || w[1].Period != "day" || w[1].Limit != 500000 {
		t.Fatalf("the model's windows in the quota report: %+v", w)
	}
}

// TestEachWindowsUseIsShown: a connection's model and a tenant's key with
// several windows each, after a few requests: the quota report, health
// and the dashboard (its snapshot and the page in a browser) show each
// window's use, the tenant's only to management callers.
func TestEachWindowsUseIsShown(t *testing.T) {
	exe := chromiumPath(t)
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-shown": {CompletionTokens: 3}})
	js := `{
  "providers": {"p": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "auth": "none",
      "connections": {"a": {"limits": {"requests_per_minute": 5, "requests_per_day": 100}}}}},
  "models": {"shown": {"targets": [{"connection": "p/a", "model": "m-shown"}]}},
  "tenants": [{"name": "watched", "key_env": "TEST_KEY_A", "requests_per_minute": 4, "tokens_per_day": 1000000}],
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`
	f := fileFrom(t, js)
	g := startGateway(t, f, nil)
	key, _ := testGetenv("TEST_KEY_A")
	for range 2 {
		if r := g.post("/v1/chat/completions", `{"model":"shown","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+key); r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
	}
	type window struct {
		Kind, Budget, Model, Dimension, Period string
		Limit, Used, Remaining, ResetMs        int64
	}
	find := func(ws []window, kind, dim, period string) window {
		t.Helper()
		for _, w := range ws {
			if w.Kind == kind && w.Dimension == dim && w.Period == period {
				return w
			}
		}
		t.Fatalf("no %s %s/%s window in %+v", kind, dim, period, ws)
		return window{}
	}
	var h struct {
		Quota   struct{ Windows []window } `json:"quota"`
		Tenants struct{ Windows []window } `json:"tenants"`
	}
	waitFor(t, "the windows in health", func() bool {
		r := g.get("/api/monitoring/health")
		return json.Unmarshal(r.body, &h) == nil && len(h.Quota.Windows) == 2 && len(h.Tenants.Windows) == 2 &&
			find(h.Quota.Windows, "connection", "requests", "minute").Used == 2 && find(h.Tenants.Windows, "tenant", "requests", "minute").Used == 2
	})
	if w := find(h.Quota.Windows, "connection", "requests", "day"); w.Budget != "p/a" || w.Model != "m-shown" || w.Limit != 100 || w.Used != 2 || w.Remaining != 98 || w.ResetMs <= 0 {
		t.Fatalf("the connection's day window %+v", w)
	}
	if w := find(h.Tenants.Windows, "tenant", "requests", "minute"); w.Budget != "watched" || w.Limit != 4 || w.Used != 2 || w.Remaining != 2 {
		t.Fatalf("the tenant's minute window %+v", w)
	}
	if w := find(h.Tenants.Windows, "tenant", "tokens", "day"); w.Limit != 1000000 || w.Used <= 0 || w.Used > 1100 {
		t.Fatalf("the tenant's token day window %+v (settled at the mock's usage)", w)
	}
	var s struct {
		Limits     []window `json:"limits"`
		LimitCount int      `json:"limitCount"`
	}
	if r := g.get("/api/dashboard/snapshot"); json.Unmarshal(r.body, &s) != nil || s.LimitCount != 4 || len(s.Limits) != 4 {
		t.Fatalf("the dashboard's limits: %s", r.body)
	}
	// The fullest first: the tenant's minute (2 of 4), the connection's
	// minute (2 of 5), ...
	if s.Limits[0].Kind != "tenant" || s.Limits[0].Period != "minute" || s.Limits[1].Kind != "connection" || s.Limits[1].Period != "minute" {
		t.Fatalf("the dashboard's limits are not fullest first: %+v", s.Limits)
	}
	b := openBrowser(t, exe)
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(g.base+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the limits table", `(() => {
		const r = document.querySelector('#limits-table tbody tr[data-budget="connection:p/a/m-shown:requests:day"]');
		return r && r.querySelector(".used").textContent === "2" && r.querySelector(".remaining").textContent === "98" &&
			/h .* min/.test(r.querySelector(".reset").textContent) &&
			document.getElementById("limits-count").textContent === "(4 windows)";
	})()`)
	b.Shot("limits")
}
