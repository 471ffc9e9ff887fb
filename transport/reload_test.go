package transport_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

// reloadJSON is a config file for the reload tests: the mock provider's
// two connections, the models given (a JSON fragment of "name": {...}
// entries) and extra top-level members (a fragment starting with a
// comma, or "").
func reloadJSON(models, extra string) string { return reloadJSONWith("", models, extra) }

// reloadJSONWith adds providers (a fragment starting with a comma).
func reloadJSONWith(providers, models, extra string) string {
	return `{
  "providers": {
    "mock": {"base_url": "http://` + mock.Addr + `/v1", "apis": ["chat", "messages", "responses"],
      "connections": {"a": {"api_key_env": "TEST_KEY_A"}, "b": {"api_key_env": "TEST_KEY_B"}}}` + providers + `
  },
  "models": {` + models + `},
  "auth": {"mode": "loopback", "allow_anonymous": true}` + extra + `
}`
}

// reloadEnv is a gateway started from a config file the test rewrites.
type reloadEnv struct {
	*gwEnv
	path string
}

func startFromFile(t *testing.T, js string, env map[string]string) *reloadEnv {
	t.Helper()
	path := testutil.WriteConfig(t, js)
	vars := map[string]string{"OMNIROUTE_CONFIG": path}
	for k, v := range env {
		vars[k] = v
	}
	return &reloadEnv{gwEnv: startGateway(t, readConfig(t, path), vars), path: path}
}

func readConfig(t *testing.T, path string) *config.File {
	t.Helper()
	f, err := config.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// reloadAnswer is the body of POST /api/config/reload.
type reloadAnswer struct {
	Applied bool   `json:"applied"`
	Result  string `json:"result"`
	Changed bool   `json:"changed"`
	Config  struct {
		Version uint64 `json:"version"`
		Hash    string `json:"hash"`
		Models  int    `json:"models"`
	} `json:"config"`
	Errors       []string `json:"errors"`
	NeedsRestart []string `json:"needsRestart"`
	Error        *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// reload writes js to the config file and asks the gateway to re-read it.
func (r *reloadEnv) reload(js string) (int, reloadAnswer) {
	r.t.Helper()
	if err := os.WriteFile(r.path, []byte(js), 0o600); err != nil {
		r.t.Fatal(err)
	}
	resp := r.post("/api/config/reload", "")
	var a reloadAnswer
	if err := json.Unmarshal(resp.body, &a); err != nil {
		r.t.Fatalf("reload answer %d %s: %v", resp.status, resp.body, err)
	}
	return resp.status, a
}

// stream is a chat completion stream in flight, its first event read.
type stream struct {
	model string
	resp  *http.Response
	br    *bufio.Reader
	first string
}

func openStream(t *testing.T, g *gwEnv, model string) *stream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(reloadChat(model, true)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream %s: %v %v", model, resp, err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("stream %s first line %q %v", model, line, err)
	}
	return &stream{model, resp, br, line}
}

// finish reads the stream to its end, checks its terminator and returns
// the text of its deltas, in order.
func (s *stream) finish(t *testing.T) string {
	t.Helper()
	rest, err := io.ReadAll(s.br)
	s.resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("stream %s: %v %q", s.model, err, rest)
	}
	var text strings.Builder
	for _, ev := range sseEvents(append([]byte(s.first), rest...)) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev[1]), &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String()
}

func reloadChat(model string, stream bool) string {
	s := ""
	if stream {
		s = `,"stream":true`
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + s + `}`
}

// TestReloadKeepsStreamsAndSwitchesModels: two streams are in flight on
// a slow mock model, one on a model the new file removes, one on a model
// it re-points to another target; the reload answers at once, both
// streams finish intact on the targets they began with, and new requests
// see the new file: the removed model is 404 model_not_found, the
// re-pointed one answers from its new target, and a new model and a new
// alias answer. The version moves on health, the dashboard snapshot and
// the metrics.
func TestReloadKeepsStreamsAndSwitchesModels(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{
		// Streams of 24 chunks 160 ms apart: about four seconds, so they are
		// still in flight when the reload (a file read and a catalog
		// build) has answered, which the mock's counters confirm.
		"m-rl-slow":  {ChunkCount: 24, ChunkGapMS: 160, Text: "abcdefghijklABCDEFGHIJKL"},
		"m-rl-slow2": {ChunkCount: 24, ChunkGapMS: 160, Text: "mnopqrstuvwxMNOPQRSTUVWX"},
		"m-rl-other": {Text: "from the other target"},
	})
	old := `"rl-gone": {"targets": [{"connection": "mock/a", "model": "m-rl-slow"}]},
    "rl-moved": {"targets": [{"connection": "mock/a", "model": "m-rl-slow2"}]},
    "rl-other": {"targets": [{"connection": "mock/b", "model": "m-rl-other"}]}`
	g := startFromFile(t, reloadJSON(old, ""), nil)
	v1 := jsonField(t, g.get("/api/monitoring/health").body, "server", "config", "hash")

	gone, moved := openStream(t, g.gwEnv, "rl-gone"), openStream(t, g.gwEnv, "rl-moved")
	if tg := moved.resp.Header.Get("X-OmniRoute-Target"); tg != "mock/a/m-rl-slow2" {
		t.Fatalf("moved stream served by %q", tg)
	}

	next := `"rl-moved": {"targets": [{"connection": "mock/b", "model": "m-rl-other"}]},
    "rl-other": {"targets": [{"connection": "mock/b", "model": "m-rl-other"}]},
    "rl-new": {"targets": [{"connection": "mock/b", "model": "m-rl-other"}]}`
	status, a := g.reload(reloadJSON(next, `, "aliases": {"rl-alias": "rl-new"}`))
	if status != 200 || !a.Applied || a.Result != "ok" || !a.Changed || a.Config.Version != 2 || a.Config.Models != 3 || len(a.NeedsRestart) != 0 {
		t.Fatalf("reload: %d %+v", status, a)
	}
	if st := mockStats(t); st.Models["m-rl-slow"].Inflight != 1 || st.Models["m-rl-slow2"].Inflight != 1 {
		t.Fatalf("the streams were not in flight across the reload: %+v %+v", st.Models["m-rl-slow"], st.Models["m-rl-slow2"])
	}

	// Both streams are still running on the old config: they finish with
	// every chunk in order and the terminator.
	for name, s := range map[string]*stream{"rl-gone": gone, "rl-moved": moved} {
		want := map[string]string{"rl-gone": "abcdefghijklABCDEFGHIJKL", "rl-moved": "mnopqrstuvwxMNOPQRSTUVWX"}[name]
		if text := s.finish(t); text != want {
			t.Fatalf("%s: stream text after the reload %q, want %q", name, text, want)
		}
	}

	if r := g.post("/v1/chat/completions", reloadChat("rl-gone", false)); r.status != 404 || jsonField(t, r.body, "error", "code") != "model_not_found" {
		t.Fatalf("removed model: %d %s", r.status, r.body)
	}
	for _, m := range []string{"rl-moved", "rl-new", "rl-alias"} {
		r := g.post("/v1/chat/completions", reloadChat(m, false))
		if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "mock/b/m-rl-other" || !strings.Contains(string(r.body), "from the other target") {
			t.Fatalf("%s after reload: %d %s %s", m, r.status, r.header.Get("X-OmniRoute-Target"), r.body)
		}
	}
	if r := g.get("/v1/models/rl-alias"); r.status != 200 {
		t.Fatalf("GET /v1/models/rl-alias: %d %s", r.status, r.body)
	}

	h := g.get("/api/monitoring/health").body
	if jsonField(t, h, "server", "config", "version") != float64(2) || jsonField(t, h, "server", "config", "hash") == v1 {
		t.Fatalf("health config after reload: %s", h)
	}
	snap := g.get("/api/dashboard/snapshot").body
	if jsonField(t, snap, "config", "version") != float64(2) || jsonField(t, snap, "config", "hash") != a.Config.Hash || jsonField(t, snap, "config", "loadedAt") == nil {
		t.Fatalf("dashboard config after reload: %v", jsonField(t, snap, "config"))
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{`omniroute_config_reloads_total{result="ok"} 1`, "omniroute_config_version 2", "omniroute_config_loaded_timestamp_seconds "} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q: %s", want, m)
		}
	}

	// The same file again: applied, unchanged content, a new version.
	if status, a := g.reload(reloadJSON(next, `, "aliases": {"rl-alias": "rl-new"}`)); status != 200 || a.Changed || a.Config.Version != 3 {
		t.Fatalf("same file: %d %+v", status, a)
	}
}

// TestReloadRefusesInvalidFile: a syntax error and semantic errors (an
// alias and a default model naming models that do not exist) are refused
// with 422 invalid_config and every error listed; the running config
// keeps serving, its version unchanged.
func TestReloadRefusesInvalidFile(t *testing.T) {
	resetMock(t)
	models := `"rl-keep": {"targets": [{"connection": "mock/a", "model": "m-rl-keep"}]}`
	g := startFromFile(t, reloadJSON(models, ""), nil)
	cases := []struct {
		name string
		js   string
		want []string
	}{
		{"truncated", `{"providers": {`, []string{"unexpected EOF"}},
		{"syntax", `{"providers": {]}`, []string{"invalid JSON at line 1 column"}},
		{"trailing comma", strings.Replace(reloadJSON(models, ""), `"m-rl-keep"}]}`, `"m-rl-keep"}],}`, 1), []string{"invalid JSON at line"}},
		{"unknown model", reloadJSON(models, `, "aliases": {"rl-x": "rl-nope"}, "default_model": "rl-missing"`),
			[]string{`aliases.rl-x: "rl-nope" is not a configured model`, `default_model: "rl-missing" is not a configured model`}},
		{"unknown connection", reloadJSON(models+`, "rl-bad": {"targets": [{"connection": "mock/zzz"}]}`, ""), []string{"models.rl-bad.targets[0].connection"}},
		// Refused, and neither the password nor the query token is echoed
		// (the same errors go to the warning log).
		{"credentials in base_url", reloadJSONWith(`, "leaky": {"base_url": "https://ops:hunter2-pass@api.example.com/v1?api_key=tok-XYZ123", "apis": ["chat"], "connections": {"c": {"api_key_env": "TEST_KEY_A"}}}`, models, ""),
			[]string{`providers.leaky.base_url: "https://[REDACTED]@api.example.com/v1?[REDACTED]" must not carry a query, fragment or credentials`}},
	}
	for _, c := range cases {
		status, a := g.reload(c.js)
		if status != 422 || a.Applied || a.Result != "invalid" || a.Error == nil || a.Error.Code != "invalid_config" || a.Config.Version != 1 {
			t.Fatalf("%s: %d %+v", c.name, status, a)
		}
		all := strings.Join(a.Errors, "\n")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Fatalf("%s: errors %q lack %q", c.name, a.Errors, w)
			}
		}
		if b, _ := json.Marshal(a); strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "tok-XYZ") {
			t.Fatalf("%s: the answer echoes a credential: %s", c.name, b)
		}
		if strings.Contains(c.name, "unknown model") && len(a.Errors) < 2 {
			t.Fatalf("%s: want each error on its own, got %q", c.name, a.Errors)
		}
		if r := g.post("/v1/chat/completions", reloadChat("rl-keep", false)); r.status != 200 {
			t.Fatalf("%s: the running config stopped serving: %d %s", c.name, r.status, r.body)
		}
	}
	if m := string(g.get("/metrics").body); !strings.Contains(m, `omniroute_config_reloads_total{result="invalid"} 6`) || !strings.Contains(m, "omniroute_config_version 1") {
		t.Fatal("metrics do not count the refused reloads")
	}
	// A file that is gone: 503, the running config stays.
	os.Remove(g.path)
	r := g.post("/api/config/reload", "")
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "config_unreadable" {
		t.Fatalf("missing file: %d %s", r.status, r.body)
	}
}

// TestReloadNeedsRestart: a connection's max_conns and limits and a
// target's max_concurrent apply at run time (health shows the new cap,
// the quota report the new budget); a
// provider's rate_limit_headers is read only at start: the reload is
// applied and names it in needsRestart.
func TestReloadNeedsRestart(t *testing.T) {
	resetMock(t)
	models := `"rl-r": {"targets": [{"connection": "mock/a", "model": "m-rl-r"}]}`
	g := startFromFile(t, reloadJSON(models, ""), nil)
	js := strings.Replace(reloadJSON(`"rl-r": {"targets": [{"connection": "mock/a", "model": "m-rl-r", "max_concurrent": 3}]}, "rl-r3": {"targets": [{"connection": "mock/a", "model": "m-rl-r"}]}`, ""),
		`"a": {"api_key_env": "TEST_KEY_A"}`, `"a": {"api_key_env": "TEST_KEY_A", "max_conns": 7, "limits": {"requests_per_minute": 2}}`, 1)
	js = strings.Replace(js, `"apis": ["chat", "messages", "responses"],`, `"apis": ["chat", "messages", "responses"], "rate_limit_headers": "openai",`, 1)
	status, a := g.reload(js)
	if status != 200 || !a.Applied || strings.Join(a.NeedsRestart, ",") != "providers.mock.rate_limit_headers" {
		t.Fatalf("reload: %d %+v", status, a)
	}
	var up map[string]any
	ups, _ := jsonField(t, g.get("/api/monitoring/health").body, "adaptiveAdmission", "upstreams").([]any)
	for _, u := range ups {
		if m := u.(map[string]any); m["name"] == "mock/a/m-rl-r" {
			up = m
		}
	}
	if up == nil || up["maxConcurrent"] != float64(3) {
		t.Fatalf("max_concurrent after the reload: %v", up)
	}
	// The connection's budget has the new limit (the ledger's tests show
	// it enforced), and the request after the reload counted in it.
	if r := g.post("/v1/chat/completions", reloadChat("rl-r3", false)); r.status != 200 {
		t.Fatalf("the rest of the file is not in force: %d %s", r.status, r.body)
	}
	var q struct {
		Connections []struct {
			ConnectionID string `json:"connectionId"`
			Ledger       []struct {
				Requests *struct {
					Limit  int64  `json:"limit"`
					Source string `json:"source"`
				} `json:"requests"`
			} `json:"ledger"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(g.get("/api/omniroute/quota").body, &q); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range q.Connections {
		if c.ConnectionID == "mock/a" && len(c.Ledger) == 1 && c.Ledger[0].Requests != nil {
			found = c.Ledger[0].Requests.Limit == 2 && c.Ledger[0].Requests.Source == "configured"
		}
	}
	if !found {
		t.Fatalf("mock/a's budget after the reload: %+v", q.Connections)
	}
}

// TestReloadTenants: config-file tenants follow the file (a new one's key
// works, a removed one's is refused), while a key issued at run time
// stays valid across the reload.
func TestReloadTenants(t *testing.T) {
	resetMock(t)
	models := `"rl-t": {"targets": [{"connection": "mock/a", "model": "m-rl-t"}]}`
	tenants := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, `{"name": "`+n+`", "key_sha256": "`+sha([]byte("key-"+n))+`"}`)
		}
		return `, "tenants": [` + strings.Join(parts, ",") + `]`
	}
	keysAuth := func(js string) string {
		return strings.Replace(js, `"auth": {"mode": "loopback", "allow_anonymous": true}`, `"auth": {"mode": "keys"}`, 1)
	}
	g := startFromFile(t, keysAuth(reloadJSON(models, tenants("alpha"))), nil)
	runtime := g.createKey(`{"name":"rl-runtime"}`)
	ask := func(key string) int {
		return g.post("/v1/chat/completions", reloadChat("rl-t", false), "Authorization", "Bearer "+key).status
	}
	if ask("key-alpha") != 200 || ask("key-beta") != 401 || ask(runtime.Secret) != 200 {
		t.Fatal("before the reload: alpha and the run-time key work, beta does not")
	}
	if status, a := g.reload(keysAuth(reloadJSON(models, tenants("beta")))); status != 200 || !a.Applied {
		t.Fatalf("reload: %d %+v", status, a)
	}
	if got := [3]int{ask("key-alpha"), ask("key-beta"), ask(runtime.Secret)}; got != [3]int{401, 200, 200} {
		t.Fatalf("after the reload alpha, beta, run-time key answer %v; want 401, 200, 200", got)
	}
	// A config tenant may not take a run-time key's name: refused, nothing changes.
	status, a := g.reload(keysAuth(reloadJSON(models, tenants("beta", "rl-runtime"))))
	if status != 422 || a.Applied || !strings.Contains(strings.Join(a.Errors, " "), `"rl-runtime" is already the name of a key issued at run time`) {
		t.Fatalf("name clash: %d %+v", status, a)
	}
	if ask("key-beta") != 200 || ask(runtime.Secret) != 200 {
		t.Fatal("a refused reload changed the tenants")
	}
}

// TestReloadGuard: the endpoint is a state-changing management route: POST
// only, the management key when one is set, no form or text body, no
// cross-site page; and a gateway started without a file has nothing to
// re-read.
func TestReloadGuard(t *testing.T) {
	models := `"rl-g": {"targets": [{"connection": "mock/a", "model": "m-rl-g"}]}`
	g := startFromFile(t, reloadJSON(models, ""), map[string]string{"OMNIROUTE_MANAGEMENT_KEY": "mgmt-key-0123456789"})
	auth := []string{"Authorization", "Bearer mgmt-key-0123456789"}
	cases := []struct {
		name    string
		method  string
		headers []string
		ctype   string
		status  int
		code    string
	}{
		{"get", http.MethodGet, auth, "", 405, "method_not_allowed"},
		{"no key", http.MethodPost, nil, "", 401, "invalid_management_key"},
		{"text body", http.MethodPost, auth, "text/plain", 415, "unsupported_media_type"},
		{"cross-site", http.MethodPost, append([]string{"Sec-Fetch-Site", "cross-site"}, auth...), "", 403, "origin_not_allowed"},
		{"ok", http.MethodPost, auth, "", 200, ""},
	}
	for _, c := range cases {
		body := io.Reader(nil)
		if c.ctype != "" {
			body = strings.NewReader("x")
		}
		req, _ := http.NewRequest(c.method, g.base+"/api/config/reload", body)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		resp, err := g.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.code != "" && jsonField(t, b, "error", "code") != c.code) {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
		}
	}

	// Without OMNIROUTE_CONFIG there is no file to re-read.
	ng := startGateway(t, testFile(t, ""), nil)
	r := ng.post("/api/config/reload", "")
	if r.status != 503 || !strings.Contains(string(r.body), "OMNIROUTE_CONFIG is unset") {
		t.Fatalf("no file: %d %s", r.status, r.body)
	}
}

// TestReloadPrices: a request after a reload that changes the model's
// price is costed at the new price (in the request log), one before it at
// the old.
func TestReloadPrices(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-rl-p": {CompletionTokens: 1000}})
	models := `"rl-p": {"targets": [{"connection": "mock/a", "model": "m-rl-p"}]}`
	price := func(in, out int) string {
		return `, "prices": {"m-rl-p": {"input": ` + strconv.Itoa(in) + `, "output": ` + strconv.Itoa(out) + `}}`
	}
	g := startFromFile(t, reloadJSON(models, price(1, 2)), nil)
	costs := func(n int) []float64 {
		var out []float64
		waitFor(t, "the request log", func() bool {
			var body struct {
				Requests []struct {
					CostUSD float64 `json:"costUsd"`
				} `json:"requests"`
			}
			if err := json.Unmarshal(g.get("/api/requests?model=rl-p").body, &body); err != nil || len(body.Requests) < n {
				return false
			}
			out = out[:0]
			for _, r := range body.Requests {
				out = append(out, r.CostUSD)
			}
			return true
		})
		return out
	}
	if r := g.post("/v1/chat/completions", reloadChat("rl-p", false)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	before := costs(1)[0]
	if status, a := g.reload(reloadJSON(models, price(10, 20))); status != 200 || !a.Applied {
		t.Fatalf("reload: %d %+v", status, a)
	}
	if r := g.post("/v1/chat/completions", reloadChat("rl-p", false)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	c := costs(2) // newest first
	if before <= 0 || c[1] != before || c[0] < 9.99*before || c[0] > 10.01*before {
		t.Fatalf("costs before %v, after the reload %v: want ten times", before, c)
	}
}
