package transport_test

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway"
)

// addedProviderKey is the API key of the providers the reload tests add
// (TEST_KEY_ADDED): no start-up config names it, and it has no secret
// shape, so only the redactor's list of known values can catch it.
const addedProviderKey = "plain-added-K7Q2W9"

// startSecondMock runs another mock provider process, for a provider a
// reload adds.
func startSecondMock(t *testing.T) (*mockprovider.Process, *mockprovider.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := mockprovider.StartProcess(ctx, "", "--listen", "127.0.0.1:0", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("second mock: %v", err)
		}
	})
	return p, &mockprovider.Client{BaseURL: "http://" + p.Addr}
}

// rawStream reads a whole chat stream and returns its bytes with the
// per-request parts (the completion id's counter, the creation time)
// masked, so two streams of the same model compare byte for byte.
func rawStream(t *testing.T, s *stream) string {
	t.Helper()
	rest, err := io.ReadAll(s.br)
	s.resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return streamMask.ReplaceAllString(s.first+string(rest), "${1}N")
}

var streamMask = regexp.MustCompile(`("id":"chatcmpl-mock-|"created":)[0-9]+`)

// TestReloadAddsProvider: a reload adds a provider (a second mock
// process), its connection and a model on it while a stream runs on the
// old config. The stream finishes byte for byte as a stream begun after
// the reload; the new model is served by the second mock through its
// admission upstream (with its cap) and its connection's token ledger;
// the new target is in health, the quota report, the dashboard snapshot
// and the metrics.
func TestReloadAddsProvider(t *testing.T) {
	resetMock(t)
	second, secondAdmin := startSecondMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-rg-slow": {ChunkCount: 16, ChunkGapMS: 120, Text: "abcdefghABCDEFGH"}})
	if err := secondAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{"m-rg-new": {Text: "from the second mock"}}}); err != nil {
		t.Fatal(err)
	}
	old := `"rg-old": {"targets": [{"connection": "mock/a", "model": "m-rg-slow"}]}`
	g := startFromFile(t, reloadJSON(old, ""), nil)
	if r := g.post("/v1/chat/completions", reloadChat("rg-new", false)); r.status != 404 {
		t.Fatalf("rg-new before the reload: %d", r.status)
	}
	inFlight := openStream(t, g.gwEnv, "rg-old")

	added := `,
    "second": {"base_url": "http://` + second.Addr + `/v1", "apis": ["chat"],
      "connections": {"main": {"api_key_env": "TEST_KEY_ADDED", "limits": {"requests_per_minute": 100}}}}`
	models := old + `, "rg-new": {"targets": [{"connection": "second/main", "model": "m-rg-new", "max_concurrent": 2}]}`
	status, a := g.reload(reloadJSONWith(added, models, ""))
	if status != 200 || !a.Applied || a.Result != "ok" || a.Config.Version != 2 || len(a.NeedsRestart) != 0 {
		t.Fatalf("reload adding a provider: %d %+v", status, a)
	}
	if st := mockStats(t); st.Models["m-rg-slow"].Inflight != 1 {
		t.Fatalf("the stream was not in flight across the reload: %+v", st.Models["m-rg-slow"])
	}

	r := g.post("/v1/chat/completions", reloadChat("rg-new", false))
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "second/main/m-rg-new" || !strings.Contains(string(r.body), "from the second mock") {
		t.Fatalf("rg-new after the reload: %d %s %s", r.status, r.header.Get("X-OmniRoute-Target"), r.body)
	}
	st, err := secondAdmin.Stats()
	if err != nil || st.Models["m-rg-new"].Requests != 1 || mockStats(t).Models["m-rg-new"].Requests != 0 {
		t.Fatalf("the second mock did not serve rg-new alone: %+v %v", st.Models["m-rg-new"], err)
	}
	if rec := st.Bodies[len(st.Bodies)-1]; rec.Headers["authorization"] != "Bearer "+addedProviderKey {
		t.Fatalf("the added connection's key was not sent: %q", rec.Headers["authorization"])
	}

	// The stream begun on the old config ends as one begun on the new.
	got := rawStream(t, inFlight)
	if want := rawStream(t, openStream(t, g.gwEnv, "rg-old")); got != want || !strings.Contains(got, "data: [DONE]") {
		t.Fatalf("the stream across the reload differs from one after it:\n%s\nwant\n%s", got, want)
	}

	// Admission: the new target has its own upstream, with its cap.
	h := g.get("/api/monitoring/health").body
	var up map[string]any
	ups, _ := jsonField(t, h, "adaptiveAdmission", "upstreams").([]any)
	for _, u := range ups {
		if m := u.(map[string]any); m["name"] == "second/main/m-rg-new" {
			up = m
		}
	}
	if up == nil || up["maxConcurrent"] != float64(2) {
		t.Fatalf("the added target's admission upstream: %v in %v", up, ups)
	}
	if !healthHasTarget(t, h, "second/main/m-rg-new") || !healthHasTarget(t, h, "mock/a/m-rg-slow") {
		t.Fatalf("health targets after the reload: %v", jsonField(t, h, "targets", "targets"))
	}
	// The ledger: the added connection's budget counted the request.
	waitFor(t, "the added connection's ledger", func() bool {
		for _, c := range g.quota().Connections {
			if c.ConnectionID == "second/main" && len(c.Ledger) == 1 && c.Ledger[0].TotalRequests == 1 && len(c.Targets) == 1 {
				return true
			}
		}
		return false
	})
	snap := g.get("/api/dashboard/snapshot").body
	if !strings.Contains(string(snap), `"target":"second/main/m-rg-new"`) || jsonField(t, snap, "providerCount") != float64(2) {
		t.Fatalf("dashboard providers after the reload: %v", jsonField(t, snap, "providers"))
	}
	m := scrape(t, g.gwEnv)
	for _, want := range []string{`omniroute_upstream_attempts_total{target="second/main/m-rg-new",outcome="ok"} 1`,
		`omniroute_admission_upstream_limit{upstream="second/main/m-rg-new"}`, `omniroute_quota_polls_total{connection="second/main",outcome="ok"} 0`,
		`omniroute_routing_skips_total{target="second/main/m-rg-new",reason="cooling"} 0`} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, grepLines(m, "second"))
		}
	}
	if strings.Contains(string(h)+string(snap)+m, addedProviderKey) {
		t.Fatal("a view exposes the added connection's key")
	}
}

// healthHasTarget reports whether the health report's targets section
// lists name.
func healthHasTarget(t *testing.T, health []byte, name string) bool {
	t.Helper()
	list, _ := jsonField(t, health, "targets", "targets").([]any)
	for _, e := range list {
		if e.(map[string]any)["target"] == name {
			return true
		}
	}
	return false
}

// TestReloadRemovesPolledConnection: a reload removes a connection whose
// provider has a usage API (the mock's DeepSeek balance endpoint); its
// poller stops. The clock is the other poller (OpenRouter's key endpoint
// on the same one-second interval): while it polls twice more, the
// removed one would have polled too. The connection leaves health and the
// quota report; its model is gone. A reload that brings it back finds its
// id and state: it polls and serves again.
func TestReloadRemovesPolledConnection(t *testing.T) {
	resetMock(t)
	polled := `,
    "dsk": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "quota_api": {"kind": "deepseek", "interval_ms": 1000},
      "connections": {"main": {"api_key_env": "TEST_KEY_A"}}},
    "orr": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "quota_api": {"kind": "openrouter", "interval_ms": 1000},
      "connections": {"main": {"api_key_env": "TEST_KEY_B"}}}`
	kept := `,
    "orr": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "quota_api": {"kind": "openrouter", "interval_ms": 1000},
      "connections": {"main": {"api_key_env": "TEST_KEY_B"}}}`
	models := `"rm-ds": {"targets": [{"connection": "dsk/main", "model": "m-rm-ds"}]},
    "rm-or": {"targets": [{"connection": "orr/main", "model": "m-rm-or"}]}`
	g := startFromFile(t, reloadJSONWith(polled, models, ""), nil)
	quotaAPI := func() mockprovider.QuotaAPIStats {
		s, err := mockAdmin.QuotaAPIs()
		if err != nil {
			t.Fatal(err)
		}
		return s.Requests
	}
	waitFor(t, "both pollers", func() bool { q := quotaAPI(); return q.Balance >= 1 && q.Key >= 1 })
	if r := g.post("/v1/chat/completions", reloadChat("rm-ds", false)); r.status != 200 {
		t.Fatalf("rm-ds before the reload: %d %s", r.status, r.body)
	}

	status, a := g.reload(reloadJSONWith(kept, `"rm-or": {"targets": [{"connection": "orr/main", "model": "m-rm-or"}]}`, ""))
	if status != 200 || !a.Applied {
		t.Fatalf("reload removing dsk: %d %+v", status, a)
	}
	// The kept poller's next poll starts the count: by then any request
	// of the removed one has long arrived.
	waitPolls := func(n int64) {
		from := quotaAPI().Key
		deadline := time.Now().Add(15 * time.Second)
		for quotaAPI().Key < from+n {
			if time.Now().After(deadline) {
				t.Fatalf("the kept poller did not poll %d times", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitPolls(1)
	stopped := quotaAPI().Balance
	waitPolls(2)
	if n := quotaAPI().Balance; n != stopped {
		t.Fatalf("the removed connection's poller polled %d times after the reload", n-stopped)
	}

	if r := g.post("/v1/chat/completions", reloadChat("rm-ds", false)); r.status != 404 {
		t.Fatalf("the removed connection's model: %d", r.status)
	}
	h := g.get("/api/monitoring/health").body
	if healthHasTarget(t, h, "dsk/main/m-rm-ds") || !healthHasTarget(t, h, "orr/main/m-rm-or") {
		t.Fatalf("health targets after the reload: %v", jsonField(t, h, "targets", "targets"))
	}
	for _, c := range g.quota().Connections {
		if c.ConnectionID == "dsk/main" {
			t.Fatalf("the quota report still lists the removed connection: %+v", c)
		}
	}
	snap := g.get("/api/dashboard/snapshot").body
	if strings.Contains(string(snap), "dsk/main") {
		t.Fatal("the dashboard snapshot still shows the removed connection")
	}
	if strings.Contains(string(g.get("/api/monitoring/health").body), `"name":"dsk/main/m-rm-ds"`) {
		t.Fatal("the admission snapshot still shows the removed target's upstream")
	}

	// The connection comes back under its id: it polls and serves again,
	// with the state its target kept (one request before the removal).
	if status, a := g.reload(reloadJSONWith(polled, models, "")); status != 200 || !a.Applied {
		t.Fatalf("reload bringing dsk back: %d %+v", status, a)
	}
	waitFor(t, "the returning connection's poll", func() bool { return quotaAPI().Balance > stopped })
	if r := g.post("/v1/chat/completions", reloadChat("rm-ds", false)); r.status != 200 || r.header.Get("X-OmniRoute-Target") != "dsk/main/m-rm-ds" {
		t.Fatalf("rm-ds back: %d %s", r.status, r.body)
	}
	h = g.get("/api/monitoring/health").body
	if !healthHasTarget(t, h, "dsk/main/m-rm-ds") || !strings.Contains(string(h), `"name":"dsk/main/m-rm-ds"`) {
		t.Fatalf("the returning target is not in health: %s", h)
	}
	if m := scrape(t, g.gwEnv); !strings.Contains(m, `omniroute_upstream_attempts_total{target="dsk/main/m-rm-ds",outcome="ok"} 2`) {
		t.Fatalf("the returning target's counters did not carry over:\n%s", grepLines(m, "dsk/main"))
	}
}

// TestReloadRedactsAddedKey: a provider error that echoes a key no
// connection has passes through as it is, and a log line holding it (a
// request panic whose value carries it) logs it; once a reload adds a
// provider with that key, the same error is redacted in the answer and
// the same log line in the log, while the start-up keys stay redacted.
func TestReloadRedactsAddedKey(t *testing.T) {
	resetMock(t)
	var logs testutil.SyncBuffer
	restore := transport.SetPanicProbe(func(where string) {
		if where == "handler" && panicNext.CompareAndSwap(true, false) {
			panic("upstream said " + addedProviderKey)
		}
	})
	defer restore()
	echo := `{"error":{"message":"Incorrect API key provided: ` + addedProviderKey + ` (start-up key upstream-key-a)","type":"invalid_request_error","code":"bad_request"}}`
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-rr-echo":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 400, Body: echo, Headers: map[string]string{"X-Echo-Key": addedProviderKey}}},
		"m-rr-added": {Fail: mockprovider.FailSpec{Mode: "status", Status: 400, Body: echo}},
	})
	models := `"rr-echo": {"targets": [{"connection": "mock/a", "model": "m-rr-echo"}]}`
	path := testutil.WriteConfig(t, reloadJSON(models, ""))
	g := &reloadEnv{gwEnv: startGatewayWith(t, readConfig(t, path), map[string]string{"OMNIROUTE_CONFIG": path},
		gateway.Options{Logger: logging.New("json", "debug", &logs)}), path: path}
	logPanic := func() {
		t.Helper()
		panicNext.Store(true)
		if r := g.post("/v1/chat/completions", reloadChat("rr-echo", false)); r.status != 500 {
			t.Fatalf("the planted panic answered %d %s", r.status, r.body)
		}
	}

	before := g.post("/v1/chat/completions", reloadChat("rr-echo", false))
	if before.status != 400 || !strings.Contains(string(before.body), addedProviderKey) || strings.Contains(string(before.body), "upstream-key-a") {
		t.Fatalf("before the reload the error should carry the unknown key only: %d %s", before.status, before.body)
	}
	logPanic()
	if !strings.Contains(logs.String(), "upstream said "+addedProviderKey) {
		t.Fatal("the panic's log line did not carry the value before the reload: the log half of this test covers nothing")
	}
	mark := len(logs.String())

	added := `,
    "added": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat"], "connections": {"main": {"api_key_env": "TEST_KEY_ADDED"}}}`
	status, a := g.reload(reloadJSONWith(added, models+`, "rr-added": {"targets": [{"connection": "added/main", "model": "m-rr-added"}]}`, ""))
	if status != 200 || !a.Applied {
		t.Fatalf("reload adding a provider: %d %+v", status, a)
	}
	for _, model := range []string{"rr-echo", "rr-added"} {
		r := g.post("/v1/chat/completions", reloadChat(model, false))
		if r.status != 400 || !strings.Contains(string(r.body), "[REDACTED]") {
			t.Fatalf("%s after the reload: %d %s", model, r.status, r.body)
		}
		for _, key := range []string{addedProviderKey, "upstream-key-a"} {
			if strings.Contains(string(r.body), key) || strings.Contains(r.header.Get("X-Echo-Key"), key) {
				t.Fatalf("%s: the answer holds %q: %v %s", model, key, r.header, r.body)
			}
		}
	}
	logPanic()
	g.stop()
	after := logs.String()[mark:]
	if strings.Contains(after, addedProviderKey) || !strings.Contains(after, "upstream said [REDACTED]") || !strings.Contains(after, "config reloaded") {
		t.Fatalf("after the reload the log holds the added key, or lacks the redacted panic line or the reload:\n%s", grepLines(after, "upstream said"))
	}
}

// TestReloadChangesConnection: a reload moves a connection to another
// endpoint (a second mock process) with another key. A stream in flight
// on the old endpoint finishes there; new requests go to the new
// endpoint with the new key, which is redacted from then on; the old key
// stays redacted. Nothing is reported as needing a restart.
func TestReloadChangesConnection(t *testing.T) {
	resetMock(t)
	second, secondAdmin := startSecondMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-rc": {ChunkCount: 12, ChunkGapMS: 120, Text: "abcdefABCDEF"}})
	echo := `{"error":{"message":"keys ` + addedProviderKey + ` and upstream-key-a","type":"invalid_request_error","code":"bad_request"}}`
	if err := secondAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{
		"m-rc":      {Text: "from the new endpoint"},
		"m-rc-echo": {Fail: mockprovider.FailSpec{Mode: "status", Status: 400, Body: echo}}}}); err != nil {
		t.Fatal(err)
	}
	provider := func(addr, keyEnv string) string {
		return `,
    "moved": {"base_url": "http://` + addr + `/v1", "apis": ["chat"], "connections": {"main": {"api_key_env": "` + keyEnv + `"}}}`
	}
	models := `"rc": {"targets": [{"connection": "moved/main", "model": "m-rc"}]},
    "rc-echo": {"targets": [{"connection": "moved/main", "model": "m-rc-echo"}]}`
	g := startFromFile(t, reloadJSONWith(provider(mock.Addr, "TEST_KEY_A"), models, ""), nil)
	inFlight := openStream(t, g.gwEnv, "rc")

	status, a := g.reload(reloadJSONWith(provider(second.Addr, "TEST_KEY_ADDED"), models, ""))
	if status != 200 || !a.Applied || len(a.NeedsRestart) != 0 {
		t.Fatalf("reload moving a connection: %d %+v", status, a)
	}
	if text := inFlight.finish(t); text != "abcdefABCDEF" {
		t.Fatalf("the stream on the old endpoint: %q", text)
	}
	r := g.post("/v1/chat/completions", reloadChat("rc", false))
	if r.status != 200 || !strings.Contains(string(r.body), "from the new endpoint") {
		t.Fatalf("rc after the reload: %d %s", r.status, r.body)
	}
	st, err := secondAdmin.Stats()
	if err != nil || len(st.Bodies) == 0 || st.Bodies[len(st.Bodies)-1].Headers["authorization"] != "Bearer "+addedProviderKey {
		t.Fatalf("the new endpoint did not get the new key: %+v %v", st.Bodies, err)
	}
	r = g.post("/v1/chat/completions", reloadChat("rc-echo", false))
	if r.status != 400 || strings.Contains(string(r.body), addedProviderKey) || strings.Contains(string(r.body), "upstream-key-a") {
		t.Fatalf("the error echoing the new and the old key: %d %s", r.status, r.body)
	}
}

// TestReloadFailedRegistrationNeedsRestart: when an actor refuses to
// register a new target (here the admission actors, stopped), the reload
// answers 409 config_needs_restart with the reason, the running config
// stays, and every later reload is refused the same way (the per-target
// tables may no longer agree with the ids).
func TestReloadFailedRegistrationNeedsRestart(t *testing.T) {
	resetMock(t)
	models := `"rf-a": {"targets": [{"connection": "mock/a", "model": "m-rf-a"}]}`
	g := startFromFile(t, reloadJSON(models, ""), nil)
	g.gw.Lanes().Stop()
	grown := reloadJSON(models+`, "rf-b": {"targets": [{"connection": "mock/b", "model": "m-rf-b"}]}`, "")
	for i := 0; i < 2; i++ {
		status, a := g.reload(grown)
		if status != 409 || a.Applied || a.Error == nil || a.Error.Code != "config_needs_restart" || len(a.Errors) != 1 ||
			!strings.Contains(a.Errors[0], "restart the gateway") || a.Config.Version != 1 {
			t.Fatalf("reload %d with a stopped admission actor: %d %+v", i+1, status, a)
		}
	}
	if m := scrape(t, g.gwEnv); !strings.Contains(m, `omniroute_config_reloads_total{result="needs_restart"} 2`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "config_reloads"))
	}
}
