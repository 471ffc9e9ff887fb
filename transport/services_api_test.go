package transport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/transport"
)

type svcStatus struct {
	Tool      string  `json:"tool"`
	State     string  `json:"state"`
	Health    string  `json:"health"`
	PID       *int    `json:"pid"`
	Port      int     `json:"port"`
	LastError *string `json:"lastError"`
	AutoStart bool    `json:"autoStart"`
	Installed bool    `json:"installed"`
}

func decodeStatus(t *testing.T, r response) svcStatus {
	t.Helper()
	var st svcStatus
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("status body %d %s: %v", r.status, r.body, err)
	}
	return st
}

// mgmtError checks the management error shape and returns its code.
func mgmtError(t *testing.T, r response, status int, typ, code string) string {
	t.Helper()
	var e struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != status || e.Error.Type != typ || e.Error.Code != code ||
		e.Error.Message == "" || e.RequestID == "" || e.RequestID != r.header.Get("X-Request-Id") {
		t.Fatalf("got %d %s; want %d type %q code %q with a message and requestId = X-Request-Id", r.status, r.body, status, typ, code)
	}
	return e.Error.Message
}

func TestServicesAPILifecycle(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{})
	if st := decodeStatus(t, g.get("/api/services/svc/status")); st.State != "stopped" || st.PID != nil || !st.Installed {
		t.Fatalf("initial %+v", st)
	}
	r := g.do("POST", "/api/services/svc/start", "")
	st := decodeStatus(t, r)
	if r.status != 200 || st.State != "running" || st.Health != "healthy" || st.PID == nil {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	first := *st.PID
	if again := decodeStatus(t, g.do("POST", "/api/services/svc/start", "")); *again.PID != first {
		t.Fatal("a second start spawned another process")
	}
	st = decodeStatus(t, g.do("POST", "/api/services/svc/restart", ""))
	if st.State != "running" || st.PID == nil || *st.PID == first || pidAlive(first) {
		t.Fatalf("restart: %+v (old pid alive %v)", st, pidAlive(first))
	}
	second := *st.PID
	for i := 0; i < 2; i++ { // stop is idempotent
		r = g.do("POST", "/api/services/svc/stop", "")
		if st := decodeStatus(t, r); r.status != 200 || st.State != "stopped" || st.PID != nil {
			t.Fatalf("stop %d: %d %s", i, r.status, r.body)
		}
	}
	if pidAlive(second) {
		t.Fatal("stop left the process running")
	}
	if st := decodeStatus(t, g.do("POST", "/api/services/svc/uninstall", "")); st.State != "not_installed" {
		t.Fatalf("uninstall %+v", st)
	}
	for _, action := range []string{"start", "restart"} {
		msg := mgmtError(t, g.do("POST", "/api/services/svc/"+action, ""), 409, "conflict", "not_installed")
		if !strings.Contains(msg, "POST /api/services/svc/install") {
			t.Fatalf("409 message %q", msg)
		}
	}
	if st := decodeStatus(t, g.do("POST", "/api/services/svc/install", "")); st.State != "stopped" || !st.Installed {
		t.Fatalf("install %+v", st)
	}
	mgmtError(t, g.get("/api/services/nope/status"), 404, "not_found", "service_not_found")
	mgmtError(t, g.get("/api/services/nope/logs"), 404, "not_found", "service_not_found")
	mgmtError(t, g.do("POST", "/api/services/svc/explode", ""), 404, "not_found", "not_found")
	r = g.do("POST", "/api/services/svc/status", "")
	mgmtError(t, r, 405, "invalid_request", "method_not_allowed")
	if r.header.Get("Allow") != "GET" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	mgmtError(t, g.get("/api/services/svc/start"), 405, "invalid_request", "method_not_allowed")
	var list struct {
		Services []svcStatus `json:"services"`
	}
	if r := g.get("/api/services"); r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Services) != 1 || list.Services[0].Tool != "svc" {
		t.Fatalf("list %d %s", r.status, r.body)
	}
}

func TestServicesAutoStartBody(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{})
	for _, tc := range []struct{ body, code string }{
		{"", "invalid_json"},
		{"{", "invalid_json"},
		{`{"enabled":"yes"}`, "invalid_body"},
		{`{"enabled":true,"extra":1}`, "invalid_body"},
		{`{}`, "invalid_body"},
		{`{"enabled":true} {"enabled":false}`, "invalid_body"},
		{`{"enabled":true` + strings.Repeat(" ", 5000) + `}`, "invalid_body"},
	} {
		mgmtError(t, g.do("POST", "/api/services/svc/auto-start", tc.body), 400, "invalid_request", tc.code)
	}
	for _, on := range []bool{true, false, true} {
		r := g.do("POST", "/api/services/svc/auto-start", `{"enabled":`+strconv.FormatBool(on)+`}`)
		if r.status != 204 || len(r.body) != 0 {
			t.Fatalf("auto-start %v: %d %s", on, r.status, r.body)
		}
		if st := decodeStatus(t, g.get("/api/services/svc/status")); st.AutoStart != on {
			t.Fatalf("autoStart %v after setting %v", st.AutoStart, on)
		}
	}
}

func TestServicesErrorsAreSanitised(t *testing.T) {
	dir := t.TempDir()
	bogus := filepath.Join(dir, "secret-tools", "not-a-program")
	if err := os.MkdirAll(filepath.Dir(bogus), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bogus, []byte("\x00\x01 not an executable format"), 0o700); err != nil {
		t.Fatal(err)
	}
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{
		"broken": {Command: bogus, HealthPath: "/health", Env: map[string]string{"API_KEY": "sk-live-abcdef0123456789"}},
	}), gwOpts{})
	r := g.do("POST", "/api/services/broken/start", "")
	st := decodeStatus(t, r)
	if r.status != 200 || st.State != "error" || st.LastError == nil {
		t.Fatalf("start of a broken program: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), dir) || strings.Contains(string(r.body), "secret-tools") || !strings.Contains(*st.LastError, "exec format error") {
		t.Fatalf("lastError leaks the path or lost the cause: %q", *st.LastError)
	}
}

func TestServicesLogsSSE(t *testing.T) {
	restore := transport.SetLogsHeartbeat(100 * time.Millisecond)
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{})
	t.Cleanup(restore) // after the gateway stopped (cleanups run last-in first-out)
	h := g.service("svc")
	if st, err := h.Start(context.Background()); err != nil || st.State != "running" {
		t.Fatalf("start: %v %+v", err, st)
	}
	emit := func(line string) {
		resp, err := g.hc.Post("http://"+h.Addr()+"/emit?line="+line, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, l := range []string{"alpha-1", "beta-1", "alpha-2", "ALPHA-3", "beta-2"} {
		emit(l)
	}
	waitFor(t, "emitted lines in the ring", func() bool { return len(h.Logs().Tail(1, "beta-2")) == 1 })

	for _, tc := range []struct{ q, code string }{
		{"tail=abc", "invalid_tail"}, {"tail=-1", "invalid_tail"}, {"tail=1001", "invalid_tail"},
		{"filter=" + strings.Repeat("x", 201), "invalid_filter"},
	} {
		mgmtError(t, g.get("/api/services/svc/logs?"+tc.q), 400, "invalid_request", tc.code)
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", g.base+"/api/services/svc/logs?tail=2&filter=alpha", nil)
	resp, err := g.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("logs: %d %v", resp.StatusCode, resp.Header)
	}
	sr := &sseReader{br: bufio.NewReader(resp.Body)}
	name, data, err := sr.next()
	var snap []struct{ Stream, Line string }
	if err != nil || name != "snapshot" || json.Unmarshal([]byte(data), &snap) != nil || len(snap) != 2 ||
		snap[0].Line != "alpha-2" || snap[1].Line != "ALPHA-3" || snap[1].Stream != "stdout" {
		t.Fatalf("snapshot %q %q %v", name, data, err)
	}
	emit("beta-3")
	emit("alpha-4")
	var sawLog, sawHeartbeat bool
	for !sawLog || !sawHeartbeat {
		name, data, err := sr.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		switch name {
		case "log":
			var l struct{ Line string }
			if json.Unmarshal([]byte(data), &l) != nil || l.Line != "alpha-4" {
				t.Fatalf("live line %s; want only alpha-4 (the filter drops beta-3)", data)
			}
			sawLog = true
		case "heartbeat":
			sawHeartbeat = true
		default:
			t.Fatalf("unexpected event %q %s", name, data)
		}
	}
	if h.Logs().Subscribers() != 1 {
		t.Fatal("the stream is not subscribed")
	}
	// The client leaves: the subscription ends without waiting for a write.
	cancel()
	resp.Body.Close()
	waitFor(t, "unsubscribe after the client left", func() bool { return h.Logs().Subscribers() == 0 })
}

func TestHealthAndMetricsShowServices(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{
		"svc":  svcConfig(svctest.Serve, func(c *config.ServiceConfig) { c.AutoStart = true }),
		"idle": svcConfig(svctest.Serve, nil),
	}), gwOpts{})
	r := g.get("/api/monitoring/health")
	var h struct {
		Status   string `json:"status"`
		Services struct {
			Services []svcStatus `json:"services"`
		} `json:"services"`
		Engines struct {
			Engines []struct {
				ID, Lifecycle, RelayRole, State, Health string
			} `json:"engines"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Services.Services) != 2 || h.Services.Services[1].Tool != "svc" || h.Services.Services[1].State != "running" || h.Status != "ok" {
		t.Fatalf("health services: %s", r.body)
	}
	got := map[string]string{}
	for _, e := range h.Engines.Engines {
		got[e.ID] = e.Lifecycle + "/" + e.RelayRole + "/" + e.State + "/" + e.Health
	}
	if got["native"] != "in-process/native/running/" || got["svc"] != "supervised/provider/running/healthy" || got["idle"] != "supervised/provider/stopped/unknown" {
		t.Fatalf("health engines %v", got)
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{
		`omniroute_service_state{service="svc",state="running"} 1`,
		`omniroute_service_state{service="svc",state="stopped"} 0`,
		`omniroute_service_state{service="idle",state="stopped"} 1`,
		`omniroute_service_health{service="svc",health="healthy"} 1`,
		`omniroute_service_restarts_total{service="svc"} 0`,
		`omniroute_service_gave_up{service="svc"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// An auto-start service that is down degrades the health status.
	if _, err := g.service("svc").Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(g.get("/api/monitoring/health").body, &h); err != nil || h.Status != "degraded" {
		t.Fatalf("health with a stopped auto-start service: %v %s", err, h.Status)
	}
	var eng struct {
		Engines []struct{ ID string } `json:"engines"`
	}
	if r := g.get("/api/engines?capability=vision"); r.status != 200 || json.Unmarshal(r.body, &eng) != nil || len(eng.Engines) != 1 || eng.Engines[0].ID != "native" {
		t.Fatalf("engines by capability: %d %s", r.status, r.body)
	}
}

func TestGatewayShutdownLeavesNoChild(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{
		"forker":   svcConfig(svctest.Grandchild, func(c *config.ServiceConfig) { c.AutoStart = true }),
		"stubborn": svcConfig(svctest.IgnoreTerm, func(c *config.ServiceConfig) { c.AutoStart = true; c.StopTimeoutMs = 300 }),
	}), gwOpts{})
	var pids []int
	for _, name := range []string{"forker", "stubborn"} {
		st := g.service(name).Status()
		if st.State != "running" || st.PID == nil {
			t.Fatalf("%s did not auto-start: %+v", name, st)
		}
		pids = append(pids, *st.PID)
	}
	var grandchild int
	waitFor(t, "the grandchild's pid in the logs", func() bool {
		for _, l := range g.service("forker").Logs().Tail(100, "grandchild ") {
			if n, err := strconv.Atoi(strings.TrimPrefix(l.Line, "grandchild ")); err == nil {
				grandchild = n
				return true
			}
		}
		return false
	})
	pids = append(pids, grandchild)
	for _, p := range pids {
		if !pidAlive(p) {
			t.Fatalf("pid %d not running before shutdown", p)
		}
	}
	g.stop()
	for _, p := range pids {
		if pidAlive(p) {
			t.Fatalf("pid %d survived the gateway's shutdown", p)
		}
	}
}

// TestServicesLogsThroughNetHTTP runs the logs stream behind the net/http
// adapter: events are flushed one by one and a client that leaves ends the
// subscription through the request context.
func TestServicesLogsThroughNetHTTP(t *testing.T) {
	g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{})
	h := g.service("svc")
	if _, err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.gw.HTTPHandler())
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	if r, err := hc.Get(srv.URL + "/api/services/svc/status"); err != nil || r.StatusCode != 200 {
		t.Fatalf("status via net/http: %v %v", r, err)
	} else {
		r.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/services/svc/logs?tail=5&filter=ready", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sr := &sseReader{br: bufio.NewReader(resp.Body)}
	if name, data, err := sr.next(); err != nil || name != "snapshot" || !strings.Contains(data, "svctest ready") {
		t.Fatalf("snapshot via net/http: %q %q %v", name, data, err)
	}
	emit, err := hc.Post("http://"+h.Addr()+"/emit?line=ready-again", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	emit.Body.Close()
	if name, data, err := sr.next(); err != nil || name != "log" || !strings.Contains(data, "ready-again") {
		t.Fatalf("live line via net/http: %q %q %v", name, data, err)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "unsubscribe after the net/http client left", func() bool { return h.Logs().Subscribers() == 0 })
}
