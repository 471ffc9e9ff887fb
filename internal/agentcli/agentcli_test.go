package agentcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// agentKey is the API key both agents send. The README's example config
// admits only configured tenants; its ci-agents tenant reads its key from
// CI_AGENTS_KEY, which the gateway is started with.
const agentKey = "sk-agentcli-fake-key-not-a-secret-0123456789"

// toolReply is the scripted answer once a request carries the tool's
// result; {result} is what the tool printed.
const toolReply = "The tool printed: {result}"

// agentTimeout bounds one agent run (each takes about a second here).
const agentTimeout = 3 * time.Minute

// harness is the gateway and the mock provider as child processes on
// loopback, configured with the README's example config whose providers
// all became the mock speaking only Chat Completions, in strict mode: it
// refuses what the real provider of each upstream model (gpt-4o-mini,
// claude-sonnet-4-5) refuses, so what the agents send must be fitted.
type harness struct {
	root    string // repository root
	bin     string // .agentcli/node_modules/.bin
	gwURL   string
	admin   *mockprovider.Client
	routing routing
	gwLog   string
}

// routing is the README example config's model routing.
type routing struct {
	Aliases  map[string]string `json:"aliases"`
	Patterns []struct {
		Match string `json:"match"`
		Model string `json:"model"`
	} `json:"model_patterns"`
}

// route names the alias or pattern of the README's config that sends
// name to a model, or "" when only the default model would take it.
func (r routing) route(name string) string {
	if m, ok := r.Aliases[name]; ok {
		return "alias " + name + " -> " + m
	}
	for _, p := range r.Patterns {
		// The gateway's globs let * cross '/'; the agents' names have none.
		if ok, _ := path.Match(p.Match, name); ok {
			return "pattern " + p.Match + " -> " + p.Model
		}
	}
	return ""
}

// versions reads the pinned versions from install.sh, the one place they
// are written.
func versions(t *testing.T, root string) (claude, codex string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "internal", "agentcli", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("internal/agentcli/install.sh sets no %s", name)
		}
		return string(m[1])
	}
	return get("CLAUDE_CODE_VERSION"), get("CODEX_VERSION")
}

func start(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	root, err := procs.ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{root: root, bin: filepath.Join(root, ".agentcli", "node_modules", ".bin")}
	claudeV, codexV := versions(t, root)
	for _, a := range []struct{ exe, want string }{{"claude", claudeV + " (Claude Code)"}, {"codex", "codex-cli " + codexV}} {
		out, err := exec.Command(filepath.Join(h.bin, a.exe), "--version").Output()
		if err != nil {
			t.Fatalf("%s is not installed in %s (%v): run `bash internal/agentcli/install.sh` (the README test command runs it first)", a.exe, h.bin, err)
		}
		if got := strings.TrimSpace(string(out)); got != a.want {
			t.Fatalf("%s --version = %q, want %q: run `bash internal/agentcli/install.sh` to install the pinned version", a.exe, got, a.want)
		}
	}

	dir := t.TempDir()
	bins, err := procs.Build(ctx, dir, procs.BuildOptions{NoTrimpath: true})
	if err != nil {
		t.Fatal(err)
	}
	mock, err := procs.Start(ctx, procs.Spec{
		Name: "mock", Exe: bins.Gateway, Args: []string{"mockprovider", "--listen", "127.0.0.1:0", "--quiet", "--strict"},
		Ready: mockprovider.ReadyPrefix, Log: filepath.Join(dir, "mock.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mock.Stop() })
	h.admin = &mockprovider.Client{BaseURL: "http://" + mock.Addr}

	cfg, r := readmeConfig(t, root, "http://"+mock.Addr+"/v1")
	h.routing = r
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	h.gwLog = filepath.Join(dir, "gateway.log")
	gw, err := procs.Start(ctx, procs.Spec{
		Name: "gateway", Exe: bins.Gateway, Log: h.gwLog, Ready: "omniroute listening on http://",
		Env: []string{
			"OMNIROUTE_LISTEN=127.0.0.1:0",
			"OMNIROUTE_CONFIG=" + cfgPath,
			"OMNIROUTE_DATA_DIR=" + filepath.Join(dir, "data"),
			"OMNIROUTE_TENANT_SECRET=agentcli-test-tenant-secret-0123456789",
			"OMNIROUTE_REQUEST_LOG=stdout",
			"CI_AGENTS_KEY=" + agentKey,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gw.Stop(); err != nil {
			t.Error(err)
		}
	})
	h.gwURL = "http://" + gw.Addr
	return h
}

// readmeConfig is the example config of README.md with every provider
// replaced by the mock at base, speaking only the chat dialect and
// needing no key. Models, aliases, patterns, the default model, tenants
// and auth are the README's.
func readmeConfig(t *testing.T, root, base string) ([]byte, routing) {
	t.Helper()
	js, err := testutil.READMEExampleConfig(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	var r routing
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		t.Fatalf("README example config: %v", err)
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("README example config: %v", err)
	}
	var providers map[string]struct {
		Connections map[string]json.RawMessage `json:"connections"`
	}
	if err := json.Unmarshal(cfg["providers"], &providers); err != nil {
		t.Fatalf("README example config providers: %v", err)
	}
	out := map[string]any{}
	for id, p := range providers {
		conns := map[string]any{}
		for c := range p.Connections {
			conns[c] = map[string]any{}
		}
		out[id] = map[string]any{"base_url": base, "apis": []string{"chat"}, "auth": "none", "connections": conns}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg["providers"] = b
	b, err = json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

// script makes every model of the mock answer a request that offers tool
// with a call to it (args), and the call's result with toolReply; the
// counters start from zero.
func (h *harness) script(t *testing.T, tool string, args map[string]string) {
	t.Helper()
	if err := h.admin.Reset(); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.admin.SetBehavior(mockprovider.BehaviorUpdate{Replace: true, Default: &mockprovider.Behavior{
		Tool:   &mockprovider.ToolScript{Name: tool, Arguments: raw, Reply: toolReply},
		Strict: true, // refuse what the real provider of each model refuses
	}}); err != nil {
		t.Fatal(err)
	}
}

// requests reads omniroute_requests_total by "route status".
func (h *harness) requests(t *testing.T) map[string]float64 {
	t.Helper()
	// No keep-alive: no idle connection outlives the test (goleak).
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(h.gwURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^omniroute_requests_total\{route="([^"]+)",status="(\d+)"\} (\S+)$`)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			out[m[1]+" "+m[2]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// run runs an agent with a clean environment: its own HOME, the agents'
// bin directory first on PATH, nothing of the caller's but PATH, and the
// settings that keep it from phoning home.
func (h *harness) run(t *testing.T, exe string, args []string, env ...string) (stdout, stderr string) {
	t.Helper()
	work := t.TempDir()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, exe), args...)
	cmd.Dir = work
	cmd.Env = append([]string{
		"PATH=" + h.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
	}, env...)
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s\ngateway log:\n%s", exe, args, err, out.String(), tail(errOut.String()), h.logTail())
	}
	return out.String(), errOut.String()
}

// logged reports whether a request log line of the gateway lists what
// in changes.
func (h *harness) logged(what string) bool {
	b, _ := os.ReadFile(h.gwLog)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "changes") && strings.Contains(line, what) {
			return true
		}
	}
	return false
}

func (h *harness) logTail() string {
	b, _ := os.ReadFile(h.gwLog)
	return tail(string(b))
}

func tail(s string) string {
	if len(s) > 6000 {
		return "…" + s[len(s)-6000:]
	}
	return s
}

// checkLoop checks what the gateway and the mock saw of one agent's run:
// the agent's dialect arrived on route and was answered 200 at least
// twice (the call, then the reply to its result); no other answer was an
// error except those in allowed; the mock was only ever asked in the chat
// dialect and counted the tool call and the reply to its result.
func (h *harness) checkLoop(t *testing.T, route string, before map[string]float64, allowed ...string) {
	t.Helper()
	after := h.requests(t)
	ok := after[route+" 200"] - before[route+" 200"]
	if ok < 2 {
		t.Errorf("route %s answered 200 %v times, want at least 2 (the tool call and the reply to its result)", route, ok)
	}
	for k, v := range after {
		d := v - before[k]
		_, status, _ := strings.Cut(k, " ")
		if d == 0 || status < "400" {
			continue
		}
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if known {
			t.Logf("the agent was answered %q %v times (expected)", k, d)
			continue
		}
		t.Errorf("the agent was answered %q %v times: an endpoint it calls is missing or failing\ngateway log:\n%s", k, d, h.logTail())
	}
	st, err := h.admin.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bodies {
		if b.Path != "/v1/chat/completions" {
			t.Errorf("the mock was asked %s (model %s): the upstream speaks only chat", b.Path, b.Model)
		}
	}
	if st.Totals.Failed > 0 {
		t.Errorf("the strict mock refused %d requests: the gateway sent something the real provider refuses\ngateway log:\n%s", st.Totals.Failed, h.logTail())
	}
	if st.Totals.ToolCalls < 1 || st.Totals.ToolResults < 1 {
		t.Errorf("mock counters %+v: want at least one tool call and one request carrying its result", st.Totals)
	}
}

// TestAgentsThroughChatOnlyUpstream drives Claude Code and Codex, with
// their default model names, through the gateway configured with the
// README's example config, to an upstream that speaks only Chat
// Completions; each must complete a tool loop with a tool it really has.
func TestAgentsThroughChatOnlyUpstream(t *testing.T) {
	h := start(t)

	t.Run("claude-code", func(t *testing.T) {
		// Bash prints a marker that appears in no request: $((6*7)) is
		// expanded only by the shell the agent runs.
		h.script(t, "Bash", map[string]string{"command": "echo claude-loop-$((6*7))", "description": "Print the marker"})
		before := h.requests(t)
		out, _ := h.run(t, "claude", []string{"-p", "Run the command you are given and report its output.",
			"--allowedTools", "Bash", "--output-format", "json"},
			"ANTHROPIC_BASE_URL="+h.gwURL, "ANTHROPIC_API_KEY="+agentKey,
			"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		var res struct {
			IsError    bool                       `json:"is_error"`
			Result     string                     `json:"result"`
			NumTurns   int                        `json:"num_turns"`
			ModelUsage map[string]json.RawMessage `json:"modelUsage"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
			t.Fatalf("claude -p output is not its JSON result (%v): %s", err, out)
		}
		if res.IsError || !strings.Contains(res.Result, "claude-loop-42") {
			t.Errorf("claude's answer %q (error %v, %d turns) does not quote the Bash output claude-loop-42", res.Result, res.IsError, res.NumTurns)
		}
		if len(res.ModelUsage) == 0 {
			t.Errorf("claude reports no model: %s", out)
		}
		for m := range res.ModelUsage {
			name, _, _ := strings.Cut(m, "[") // "claude-opus-4-8[1m]": the context-window tag
			if r := h.routing.route(name); r == "" {
				t.Errorf("Claude Code asked for %q, which the README's example config routes only by its default model; add an alias or pattern", name)
			} else {
				t.Logf("Claude Code asked for %s: %s", name, r)
			}
		}
		// Claude Code's HEAD / reachability probe answers 200 (route
		// root): nothing the agent sends may fail.
		h.checkLoop(t, "messages", before)
	})

	t.Run("codex", func(t *testing.T) {
		// The default model's tools are code-mode only: the custom tool
		// exec runs JavaScript that calls the shell through exec_command.
		h.script(t, "exec", map[string]string{"input": "const r = await tools.exec_command({cmd: \"echo codex-loop-$((6*7))\"});\ntext(r.output);"})
		codexHome := t.TempDir()
		conf := fmt.Sprintf(`model_provider = "omniroute"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.omniroute]
name = "OmniRoute"
base_url = "%s/v1"
env_key = "CI_AGENTS_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false
`, h.gwURL)
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		before := h.requests(t)
		out, errOut := h.run(t, "codex", []string{"exec", "--skip-git-repo-check", "--color", "never",
			"Run the command you are given and report its output."},
			"CODEX_HOME="+codexHome, "CI_AGENTS_KEY="+agentKey)
		if !strings.Contains(out, "codex-loop-42") {
			t.Errorf("codex's answer does not quote the exec output codex-loop-42:\nstdout:\n%s\nstderr:\n%s", out, tail(errOut))
		}
		m := regexp.MustCompile(`(?m)^model: (\S+)$`).FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("codex names no model in its header:\n%s", tail(errOut))
		}
		if r := h.routing.route(m[1]); r == "" {
			t.Errorf("Codex asked for %q, which the README's example config routes only by its default model; add an alias or pattern", m[1])
		} else {
			t.Logf("Codex asked for %s: %s", m[1], r)
		}
		h.checkLoop(t, "responses", before)
		// gpt-4o-mini does not reason: Codex's reasoning effort was
		// dropped, and the request log says so.
		if !h.logged(`reasoning.effort`) {
			t.Errorf("the request log names no dropped reasoning.effort for Codex's requests to gpt-4o-mini:\n%s", h.logTail())
		}
	})
}
