package transport_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport/gateway"
)

// mock is the mock provider process shared by the package's tests. Tests
// use distinct model names and reset it, so they can share one process.
var (
	mock      *mockprovider.Process
	mockAdmin *mockprovider.Client
)

func TestMain(m *testing.M) {
	mockprovider.RunIfChild()
	mockprovider.RunIfSubcommand() // supervised mock services spawn this binary
	svctest.RunIfChild()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	p, err := mockprovider.StartProcess(ctx, "", "--listen", "127.0.0.1:0", "--quiet")
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start mock provider:", err)
		os.Exit(1)
	}
	mock, mockAdmin = p, &mockprovider.Client{BaseURL: "http://" + p.Addr}
	code := 0
	func() {
		defer func() {
			if err := p.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "mock provider:", err)
			}
		}()
		code = runWithLeakCheck(m)
	}()
	os.Exit(code)
}

// runWithLeakCheck runs the tests and then checks that they left no
// goroutine behind. Goroutines that existed before (the mock process's
// pipe readers) are ignored.
func runWithLeakCheck(m *testing.M) int {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(testutil.LeakOptions(before)...); err != nil {
		fmt.Fprintln(os.Stderr, "goroutine leak:", err)
		return 1
	}
	return 0
}

// testFile is the gateway configuration the tests use: one mock provider
// with two keyed connections and a few models whose upstream names select
// mock behaviours.
func testFile(t testing.TB, extra string) *config.File {
	t.Helper()
	return testFileWith(t, "", extra)
}

// testFileWith adds providers (a JSON fragment starting with a comma) too.
func testFileWith(t testing.TB, extraProviders, extra string) *config.File {
	t.Helper()
	js := `{
  "providers": {
    "mock": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat", "messages", "responses"],
      "connections": {"a": {"api_key_env": "TEST_KEY_A"}, "b": {"api_key_env": "TEST_KEY_B"}}},
    "anth": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["messages"],
      "connections": {"main": {"api_key_env": "TEST_KEY_A"}}}` + extraProviders + `
  },
  "models": {
    "echo": {"targets": [{"connection": "mock/a", "model": "m-echo"}]},
    "same-name": {"targets": [{"connection": "mock/a"}]},
    "failover": {"targets": [{"connection": "mock/a", "model": "m-first"}, {"connection": "mock/b", "model": "m-second"}]},
    "claude": {"targets": [{"connection": "anth", "model": "m-claude"}]}` + extra + `
  },
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`
	return fileFrom(t, js)
}

// fileFrom decodes a test's configuration JSON: every test config of the
// package is built by it, and one that does not decode fails the test that
// wrote it.
func fileFrom(t testing.TB, js string) *config.File {
	t.Helper()
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return f
}

// testEnv is the environment of the package's test gateways: a data
// directory of the test's own and a fixed tenant secret, with vars on top
// (a var may replace either).
func testEnv(t testing.TB, vars map[string]string) config.Env {
	t.Helper()
	m := map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789"}
	maps.Copy(m, vars)
	e, err := config.LoadEnv(m)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type gwEnv struct {
	t      testing.TB
	gw     *gateway.Gateway
	system *actor.ActorSystem
	base   string
	hc     *http.Client
	served chan error
	closed bool
}

var testGetenv = func(k string) (string, bool) {
	switch k {
	case "TEST_KEY_A":
		return "upstream-key-a", true
	case "TEST_KEY_B":
		return "upstream-key-b", true
	case "TEST_KEY_ADDED": // only the reload tests' added providers name it
		return addedProviderKey, true
	}
	return "", false
}

// startGateway runs a gateway on a loopback port with env overrides.
func startGateway(t *testing.T, f *config.File, envVars map[string]string) *gwEnv {
	t.Helper()
	return startGatewayWith(t, f, envVars, gateway.Options{})
}

// startGatewayTB is startGateway for benchmarks and fuzz targets.
func startGatewayTB(t testing.TB, f *config.File, envVars map[string]string) *gwEnv {
	t.Helper()
	return startGatewayWith(t, f, envVars, gateway.Options{})
}

// startGatewayWith is startGateway with extra options (clock, pressure
// sampler, logger, store); Env and File are filled in here, and Getenv
// when the options have none.
func startGatewayWith(t testing.TB, f *config.File, envVars map[string]string, o gateway.Options) *gwEnv {
	t.Helper()
	return serveGateway(t, f, envVars, o, "127.0.0.1:0")
}

// serveGateway is startGatewayWith on the listen address given: every
// test gateway of the package is built, served and stopped by it.
func serveGateway(t testing.TB, f *config.File, envVars map[string]string, o gateway.Options, listen string) *gwEnv {
	t.Helper()
	o.Env, o.File = testEnv(t, envVars), f
	if o.Getenv == nil {
		o.Getenv = testGetenv
	}
	system := testutil.NewActorSystem()
	gw, err := gateway.New(system, o)
	if err != nil {
		system.Shutdown()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		gw.Close()
		system.Shutdown()
		t.Fatal(err)
	}
	g := &gwEnv{t: t, gw: gw, system: system, base: "http://" + ln.Addr().String(), served: make(chan error, 1),
		hc: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}}
	go func() { g.served <- gw.Serve(ln) }()
	t.Cleanup(g.stop)
	return g
}

func (g *gwEnv) stop() {
	if g.closed {
		return
	}
	g.closed = true
	g.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.gw.Shutdown(ctx); err != nil {
		g.t.Errorf("shutdown: %v", err)
	}
	<-g.served
	g.system.Shutdown()
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (g *gwEnv) post(path, body string, headers ...string) response {
	g.t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		g.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("POST %s: reading body: %v", path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func setBehavior(t *testing.T, models map[string]mockprovider.Behavior) {
	t.Helper()
	if err := mockAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: models}); err != nil {
		t.Fatal(err)
	}
}

func resetMock(t testing.TB) {
	t.Helper()
	if err := mockAdmin.Reset(); err != nil {
		t.Fatal(err)
	}
}

func mockStats(t *testing.T) mockprovider.Stats {
	t.Helper()
	s, err := mockAdmin.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds (testutil.Until: a bound for a stuck
// gateway, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Until(t, what, cond)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sseEvents splits an SSE body into (event, data) pairs.
func sseEvents(body []byte) [][2]string {
	var out [][2]string
	for _, block := range bytes.Split(bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var name, data string
		for _, line := range strings.Split(string(block), "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
		if data != "" {
			out = append(out, [2]string{name, data})
		}
	}
	return out
}

func jsonField(t testing.TB, b []byte, path ...string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func tenantWithSHA(name, key string) config.Tenant {
	return config.Tenant{Name: name, KeySHA256: sha([]byte(key))}
}
