package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

// TestMain lets tests re-execute this binary as the real omniroute command.
func TestMain(m *testing.M) {
	mockprovider.RunIfSubcommand() // the supervised mock service spawns this binary
	if os.Getenv("OMNIROUTE_TEST_AS_MAIN") == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	testutil.VerifyTestMain(m)
}

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer = testutil.SyncBuffer

func baseEnv(t *testing.T) map[string]string {
	return map[string]string{"OMNIROUTE_LISTEN": "127.0.0.1:0", "OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_LOG_LEVEL": "warn"}
}

func waitListening(t *testing.T, out *syncBuffer, code chan int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if i := strings.Index(out.String(), "listening on http://"); i >= 0 {
			rest := out.String()[i+len("listening on http://"):]
			return strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
		}
		select {
		case c := <-code:
			t.Fatalf("run exited early with %d", c)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("gateway did not start")
	return ""
}

func TestEmbeddedDefaultServesDemoWithoutConfig(t *testing.T) {
	var out, errOut syncBuffer
	sig := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() { code <- run(nil, baseEnv(t), &out, &errOut, sig) }()
	addr := waitListening(t, &out, code)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hc.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"chat.completion"`) {
		t.Fatalf("demo: %d %s", resp.StatusCode, b)
	}
	// The demo is answered by a supervised child process, visible in the
	// services API.
	resp, err = hc.Get("http://" + addr + "/api/services/mockprovider/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		State, Health string
		PID           int
		AutoStart     bool
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	hc.CloseIdleConnections()
	if err != nil || st.State != "running" || st.Health != "healthy" || st.PID == 0 || st.PID == os.Getpid() || !st.AutoStart {
		t.Fatalf("mockprovider status %+v %v", st, err)
	}
	if err := syscall.Kill(st.PID, 0); err != nil {
		t.Fatalf("mock pid %d not running: %v", st.PID, err)
	}
	sig <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Fatalf("exit %d, stderr %s", c, errOut.String())
	}
	if alive(st.PID) {
		t.Fatalf("the supervised mock (pid %d) outlived the gateway", st.PID)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func TestStartupErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(cfg, []byte(`{"providers":{},"models":{},"typo":true}`), 0o600)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		env  map[string]string
		code int
		want string
	}{
		{map[string]string{"OMNIROUTE_SHUTDOWN_TIMEOUT_MS": "soon"}, 2, `OMNIROUTE_SHUTDOWN_TIMEOUT_MS="soon"`},
		{map[string]string{"OMNIROUTE_CONFIG": cfg}, 2, `unknown field "typo"`},
		{map[string]string{"OMNIROUTE_CONFIG": "/nonexistent/omniroute.json"}, 2, "cannot open OMNIROUTE_CONFIG file"},
		{map[string]string{"OMNIROUTE_LISTEN": busy.Addr().String()}, 1, "already in use"},
	}
	for _, tc := range cases {
		env := baseEnv(t)
		for k, v := range tc.env {
			env[k] = v
		}
		var out, errOut syncBuffer
		if c := run(nil, env, &out, &errOut, make(chan os.Signal)); c != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("%v: exit %d stderr %q; want %d and %q", tc.env, c, errOut.String(), tc.code, tc.want)
		}
	}
}

func TestDispatch(t *testing.T) {
	var out, errOut bytes.Buffer
	if c := dispatch([]string{"version"}, &out, &errOut); c != 0 || !strings.HasPrefix(out.String(), "omniroute ") {
		t.Fatalf("version: %d %q", c, out.String())
	}
	if c := dispatch([]string{"frobnicate"}, &out, &errOut); c != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("unknown: %d %q", c, errOut.String())
	}
}

// TestSIGTERMLetsOpenStreamFinish runs the real command as a child process,
// opens a slow stream, sends SIGTERM, and expects the stream to complete
// and the process to exit 0.
func TestSIGTERMLetsOpenStreamFinish(t *testing.T) {
	cmd, addr, stderr := startServe(t, "OMNIROUTE_CONFIG=", "OMNIROUTE_SHUTDOWN_TIMEOUT_MS=10000")
	defer cmd.Process.Kill() //nolint:errcheck
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	// Slow the demo model down through the embedded mock's admin API is not
	// reachable from here, so use a long request: a stream read slowly.
	resp, err := hc.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first line %q %v", first, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("stream after SIGTERM: %v %q", err, rest)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr %s", err, stderr.String())
	}
}

// startServe runs "serve" of the test binary (the real command) as a child
// process on a loopback port and its own data directory, with env added,
// and returns once it printed its address. The caller kills or waits for
// it.
func startServe(t *testing.T, env ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve")
	cmd.Env = append(append(os.Environ(), "OMNIROUTE_TEST_AS_MAIN=1", "OMNIROUTE_LISTEN=127.0.0.1:0",
		"OMNIROUTE_DATA_DIR="+t.TempDir(), "OMNIROUTE_LOG_LEVEL=warn"), env...)
	stdout, _ := cmd.StdoutPipe()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if i := strings.Index(sc.Text(), "listening on http://"); i >= 0 {
			addr = sc.Text()[i+len("listening on http://"):]
			break
		}
	}
	go io.Copy(io.Discard, stdout) //nolint:errcheck
	if addr == "" {
		cmd.Process.Kill() //nolint:errcheck
		cmd.Wait()         //nolint:errcheck
		t.Fatalf("no listening line; stderr %s", stderr.String())
	}
	return cmd, addr, stderr
}

// TestSecondGatewayOnOneDataDirRefused is part of finding 9: two gateways
// on one data directory both started and overwrote each other's
// services-state.json. The second now stops at once, naming the first.
func TestSecondGatewayOnOneDataDirRefused(t *testing.T) {
	env := baseEnv(t)
	var out, errOut syncBuffer
	sig := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() { code <- run(nil, env, &out, &errOut, sig) }()
	waitListening(t, &out, code)
	defer func() {
		sig <- syscall.SIGTERM
		if c := <-code; c != 0 {
			t.Errorf("first gateway exited %d: %s", c, errOut.String())
		}
	}()

	var out2, err2 syncBuffer
	sig2 := make(chan os.Signal, 1)
	code2 := make(chan int, 1)
	go func() { code2 <- run(nil, env, &out2, &err2, sig2) }()
	select {
	case c := <-code2:
		if c != 2 || !strings.Contains(err2.String(), "in use by another gateway (pid "+strconv.Itoa(os.Getpid())+")") ||
			!strings.Contains(err2.String(), "OMNIROUTE_DATA_DIR") {
			t.Fatalf("second gateway: exit %d stderr %q", c, err2.String())
		}
	case <-time.After(20 * time.Second):
		sig2 <- syscall.SIGTERM
		<-code2
		t.Fatalf("a second gateway started on the same data directory: %s", out2.String())
	}
}
