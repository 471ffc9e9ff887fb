package transport_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
)

// stranger is a process-local HTTP server that takes a stopped or crashed
// service's port and answers every prompt with a forged completion, as an
// attacker's program would. It counts what reaches it besides the health
// path (the supervisor's own probes may knock there).
type stranger struct {
	srv     *http.Server
	prompts atomic.Int64
	done    chan struct{}
}

func startStranger(t *testing.T, ln net.Listener, healthPath string) *stranger {
	t.Helper()
	s := &stranger{done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == healthPath {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"service":"omniroute-mockprovider","status":"ok"}`))
			return
		}
		s.prompts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"forged","object":"chat.completion","model":"mock-demo","choices":[{"index":0,"message":{"role":"assistant","content":"FORGED"},"finish_reason":"stop"}],"input_tokens":7}`))
	})}
	go func() { defer close(s.done); s.srv.Serve(ln) }()
	t.Cleanup(s.close)
	return s
}

func (s *stranger) close() {
	s.srv.Close()
	<-s.done
}

// bindWhenFree binds addr as soon as it is free (the service's child is
// gone), or fails the test after 10 s.
func bindWhenFree(t *testing.T, addr string) net.Listener {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never came free: %v", addr, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// promptsTo sends the bundled model every kind of prompt and checks that
// none was answered by anyone but the gateway: chat (plain and
// streamed), messages, responses are refused with 503
// service_unavailable, a token count falls back to the local estimate.
func promptsTo(t *testing.T, g *gwEnv, when string) {
	t.Helper()
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"secret plan"}]}`},
		{"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"secret plan"}]}`},
		{"/v1/messages", `{"model":"demo","max_tokens":16,"messages":[{"role":"user","content":"secret plan"}]}`},
		{"/v1/responses", `{"model":"demo","input":"secret plan"}`},
	} {
		r := g.post(tc.path, tc.body)
		if r.status != 503 || strings.Contains(string(r.body), "FORGED") || !strings.Contains(string(r.body), `"service_unavailable"`) ||
			!strings.Contains(string(r.body), "POST /api/services/mockprovider/start") {
			t.Fatalf("%s: %s: want 503 service_unavailable saying how to start it, got %d %s", when, tc.path, r.status, r.body)
		}
	}
	r := g.post("/v1/messages/count_tokens", `{"model":"demo","messages":[{"role":"user","content":"secret plan"}]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Token-Count") != "estimate" {
		t.Fatalf("%s: count_tokens: want the local estimate, got %d %v %s", when, r.status, r.header, r.body)
	}
}

// TestStrangerOnServicePortGetsNoPrompt: the bundled configuration routes
// model demo to its supervised mock. Once the service is stopped (or its
// child is killed) and another process binds its port, no prompt reaches
// that process: the targets of a service that is not running as the
// gateway's own child are passed over, and every new connection to the
// port must be accepted by the child's own process group.
func TestStrangerOnServicePortGetsNoPrompt(t *testing.T) {
	f, err := config.DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	g := startGW(t, f, gwOpts{})
	h := g.service("mockprovider")
	addr, health := h.Addr(), h.Spec().HealthPath
	chat := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	if r := g.post("/v1/chat/completions", chat); r.status != 200 {
		t.Fatalf("the bundled mock does not answer: %d %s", r.status, r.body)
	}

	// Stopped by the operator, then a stranger takes the port.
	if st := decodeStatus(t, g.do("POST", "/api/services/mockprovider/stop", "")); st.State != "stopped" {
		t.Fatalf("stop: %+v", st)
	}
	s := startStranger(t, bindWhenFree(t, addr), health)
	promptsTo(t, g, "stopped")
	if n := s.prompts.Load(); n != 0 {
		t.Fatalf("the stranger on the stopped service's port received %d prompts", n)
	}
	// A start does not adopt it either.
	st := decodeStatus(t, g.do("POST", "/api/services/mockprovider/start", ""))
	if st.State != "error" || st.LastError == nil || !strings.Contains(*st.LastError, "port conflict") {
		t.Fatalf("start with a stranger on the port: %+v", st)
	}
	promptsTo(t, g, "after a refused start")
	s.close()

	// Running again as the gateway's child, then killed; a stranger binds
	// the port the moment it is free and the prompts follow at once,
	// before or after the supervisor has seen the exit.
	st = decodeStatus(t, g.do("POST", "/api/services/mockprovider/start", ""))
	if st.State != "running" || st.PID == nil {
		t.Fatalf("restart: %+v", st)
	}
	if r := g.post("/v1/chat/completions", chat); r.status != 200 || strings.Contains(string(r.body), "FORGED") {
		t.Fatalf("the service's own child again: %d %s", r.status, r.body)
	}
	if err := syscall.Kill(*st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s2 := startStranger(t, bindWhenFree(t, addr), health)
	for i := 0; i < 5; i++ {
		r := g.post("/v1/chat/completions", chat)
		if r.status == 200 || strings.Contains(string(r.body), "FORGED") {
			t.Fatalf("after the crash, prompt %d: %d %s", i, r.status, r.body)
		}
	}
	promptsTo(t, g, "crashed")
	if n := s2.prompts.Load(); n != 0 {
		t.Fatalf("the stranger on the crashed service's port received %d prompts", n)
	}
	var body struct {
		Services struct {
			Services []struct {
				Tool, State string
			} `json:"services"`
		} `json:"services"`
	}
	if err := json.Unmarshal(g.get("/api/monitoring/health").body, &body); err != nil || len(body.Services.Services) != 1 || body.Services.Services[0].State == "running" {
		t.Fatalf("health after the crash: %v %+v", err, body)
	}
	if m := string(g.get("/metrics").body); !strings.Contains(m, `reason="service_unavailable"`) {
		t.Fatal("no service_unavailable routing skip in /metrics")
	}
}

// TestStoppingAServiceNeedsTheManagementKey: with OMNIROUTE_MANAGEMENT_KEY
// set, a loopback caller without it cannot stop the service that serves
// the model (which would free its port for a stranger), a browser page
// cannot even with it, and the operator can.
func TestStoppingAServiceNeedsTheManagementKey(t *testing.T) {
	f, err := config.DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	const key = "mgmt-key-0123456789"
	g := startGW(t, f, gwOpts{env: map[string]string{"OMNIROUTE_MANAGEMENT_KEY": key}})
	for _, headers := range [][]string{nil, {"Authorization", "Bearer wrong"}} {
		mgmtError(t, g.send("POST", "/api/services/mockprovider/stop", "", headers...), 401, "authentication_error", "invalid_management_key")
	}
	r := g.send("POST", "/api/services/mockprovider/stop", "", "Authorization", "Bearer "+key, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	if r.status != 403 || !strings.Contains(string(r.body), "origin_not_allowed") {
		t.Fatalf("a cross-site page stopping the service: %d %s", r.status, r.body)
	}
	if st := g.service("mockprovider").Status(); st.State != "running" {
		t.Fatalf("a refused stop stopped the service: %+v", st)
	}
	r = g.send("POST", "/api/services/mockprovider/stop", "", "Authorization", "Bearer "+key)
	if st := decodeStatus(t, r); r.status != 200 || st.State != "stopped" {
		t.Fatalf("the operator's stop: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", `{"model":"demo","messages":[]}`); r.status != 503 {
		t.Fatalf("a prompt to the stopped service: %d %s", r.status, r.body)
	}
}
