package config

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLoadEnvDefaults(t *testing.T) {
	e := loadEnv(t, map[string]string{})
	if e.Server.Listen != "127.0.0.1:20128" || e.Server.ShutdownTimeout.Duration() != 30*time.Second {
		t.Fatalf("defaults: %+v", e.Server)
	}
	if e.Ingest.HardMaxBodyBytes != 52428800 || e.Upstream.MaxResponseBytes != 64<<20 || e.Upstream.MaxAttempts != 3 {
		t.Fatalf("defaults: %+v %+v", e.Ingest, e.Upstream)
	}
}

func TestLoadEnvValues(t *testing.T) {
	e := loadEnv(t, map[string]string{
		"OMNIROUTE_LISTEN":                   "0.0.0.0:8080",
		"OMNIROUTE_SHUTDOWN_TIMEOUT_MS":      "1500",
		"OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES": "8MiB",
		"OMNIROUTE_LOG_FORMAT":               "JSON",
	})
	if e.Server.Listen != "0.0.0.0:8080" || e.Server.ShutdownTimeout != 1500 || e.Ingest.HardMaxBodyBytes != 8<<20 || e.Server.LogFormat != "json" {
		t.Fatalf("got %+v %+v", e.Server, e.Ingest)
	}
}

// envErrorCase is an environment LoadEnv must refuse, with what its error
// must say.
type envErrorCase struct {
	env  map[string]string
	want []string
}

// checkEnvErrors asserts that LoadEnv refuses each case's environment with
// an error containing every wanted substring.
func checkEnvErrors(t *testing.T, cases []envErrorCase) {
	t.Helper()
	for _, tc := range cases {
		_, err := LoadEnv(tc.env)
		if err == nil {
			t.Fatalf("%v: no error", tc.env)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%v: error %q does not contain %q", tc.env, err, w)
			}
		}
	}
}

// loadEnv is LoadEnv for variables that are valid: an error fails the
// test.
func loadEnv(t *testing.T, environ map[string]string) Env {
	t.Helper()
	e, err := LoadEnv(environ)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkFileError fails the test (what names the case) unless DecodeFile
// refuses js with an error containing every one of want.
func checkFileError(t *testing.T, what, js string, want []string) {
	t.Helper()
	_, err := DecodeFile(strings.NewReader(js))
	if err == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

func TestLoadEnvErrorsNameVariableAndValue(t *testing.T) {
	checkEnvErrors(t, []envErrorCase{
		{map[string]string{"OMNIROUTE_SHUTDOWN_TIMEOUT_MS": "2s"}, []string{`cannot parse OMNIROUTE_SHUTDOWN_TIMEOUT_MS="2s"`, "whole milliseconds"}},
		{map[string]string{"OMNIROUTE_UPSTREAM_MAX_ATTEMPTS": "0"}, []string{`OMNIROUTE_UPSTREAM_MAX_ATTEMPTS="0"`, "positive integer"}},
		{map[string]string{"OMNIROUTE_LOG_LEVEL": "verbose"}, []string{`OMNIROUTE_LOG_LEVEL="verbose"`, "debug, info, warn or error"}},
		{map[string]string{"OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES": "-5"}, []string{`OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES="-5"`, "byte count"}},
		{map[string]string{"OMNIROUTE_LISTEN": "nonsense"}, []string{"OMNIROUTE_LISTEN", "host:port"}},
		// Finding 9: a port beyond 65535 passed validation and failed only at listen.
		{map[string]string{"OMNIROUTE_LISTEN": "127.0.0.1:99999"}, []string{`OMNIROUTE_LISTEN="127.0.0.1:99999" has no valid port`}},
		{map[string]string{"OMNIROUTE_LISTEN": "127.0.0.1:http"}, []string{`OMNIROUTE_LISTEN="127.0.0.1:http" has no valid port`}},
		{map[string]string{"OMNIROUTE_ALLOWED_HOSTS": "https://gw.example"}, []string{"OMNIROUTE_ALLOWED_HOSTS", "without scheme"}},
		{map[string]string{"OMNIROUTE_CORS_ORIGINS": "https://app.example/path"}, []string{"OMNIROUTE_CORS_ORIGINS", "no path"}},
		{map[string]string{"OMNIROUTE_CORS_ORIGINS": "*"}, []string{"OMNIROUTE_CORS_ORIGINS", "no wildcard"}},
		{map[string]string{"OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC": "10"}, []string{"OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC=10 is too small"}},
		{map[string]string{"OMNIROUTE_WRITE_TIMEOUT_MS": "0"}, []string{"OMNIROUTE_WRITE_TIMEOUT_MS must be greater than 0"}},
		{map[string]string{"OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS": "10", "OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS": "5"}, []string{"must not exceed OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS"}},
		{map[string]string{"OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS": "0"}, []string{"OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS must be greater than 0"}},
		{map[string]string{"OMNIROUTE_TENANT_SECRET": "short"}, []string{"OMNIROUTE_TENANT_SECRET is too short"}},
		// Two bad values are both reported.
		{map[string]string{"OMNIROUTE_HEADER_TIMEOUT_MS": "x", "OMNIROUTE_KEEPALIVE_IDLE_MS": "1.5"}, []string{"OMNIROUTE_HEADER_TIMEOUT_MS", "OMNIROUTE_KEEPALIVE_IDLE_MS"}},
	})
}

func TestSecretValueNotEchoed(t *testing.T) {
	// A secret cannot fail to parse (it is a string), but its name must be
	// marked so describeEnvError would hide it.
	for _, f := range EnvFields() {
		if strings.Contains(f.Var, "SECRET") || strings.Contains(f.Var, "_KEY") {
			if !f.Secret {
				t.Fatalf("%s is not marked secret", f.Var)
			}
		}
	}
}

func TestEnvFieldNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	vars := map[string]bool{}
	for _, f := range EnvFields() {
		if seen[f.Name] || vars[f.Var] {
			t.Fatalf("duplicate env field %s / %s: error messages would name the wrong variable", f.Name, f.Var)
		}
		seen[f.Name], vars[f.Var] = true, true
	}
}

func TestParseBytes(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := ParseBytes(in)
		if (err == nil) != ok || (ok && got != want) {
			t.Fatalf("ParseBytes(%q) = %d, %v; want %d ok=%v", in, got, err, want, ok)
		}
	}
	f("0", 0, true)
	f("1048576", 1<<20, true)
	f("4MiB", 4<<20, true)
	f("2 GiB", 2<<30, true)
	f("8KiB", 8<<10, true)
	f("1e6", 0, false)
	f("4MB", 0, false)
	f("-1", 0, false)
	f("", 0, false)
	f("99999999999999GiB", 0, false)
}

const validFile = `{
  "providers": {
    "openai": {"base_url": "https://api.openai.com/v1", "apis": ["chat", "responses"],
      "connections": {"main": {"api_key_env": "OPENAI_API_KEY"}, "backup": {"api_key_env": "OPENAI_BACKUP_KEY", "max_conns": 64}}},
    "anthropic": {"base_url": "https://api.anthropic.com/v1", "apis": ["messages"],
      "connections": {"main": {"api_key_env": "ANTHROPIC_API_KEY"}}},
    "local": {"base_url": "http://127.0.0.1:9000/v1", "apis": ["chat"], "auth": "none", "connections": {"default": {}}}
  },
  "models": {
    "fast": {"targets": [{"connection": "openai/main", "model": "gpt-4o-mini"}, {"connection": "openai/backup", "model": "gpt-4o-mini"}]},
    "claude": {"targets": [{"connection": "anthropic", "model": "claude-sonnet-4-5"}]},
    "rr": {"strategy": "round-robin", "targets": [{"connection": "local"}, {"connection": "openai/main", "weight": 2}]}
  },
  "tenants": [{"name": "alice", "key_env": "ALICE_KEY"}, {"name": "bob", "key_sha256": "` + "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae" + `"}],
  "auth": {"mode": "keys"}
}`

func TestDecodeFileValid(t *testing.T) {
	f, err := DecodeFile(strings.NewReader(validFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Providers) != 3 || len(f.Models) != 3 || len(f.Tenants) != 2 || f.AuthMode() != "keys" {
		t.Fatalf("decoded %+v", f)
	}
	if _, c, err := f.ResolveConnection("anthropic"); err != nil || c != "main" {
		t.Fatalf("ResolveConnection(anthropic) = %q, %v", c, err)
	}
}

func TestDefaultFile(t *testing.T) {
	f, err := DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Models["demo"]; !ok || f.AuthMode() != "loopback" || !f.Auth.AllowAnonymous {
		t.Fatalf("default file: %+v", f)
	}
}

func TestDecodeFileErrors(t *testing.T) {
	cases := []struct {
		name, json string
		want       []string
	}{
		{"unknown field", `{"providers":{},"models":{},"extra":1}`, []string{`unknown field "extra"`}},
		{"unknown nested field", strings.Replace(validFile, `"apis": ["messages"]`, `"apis": ["messages"], "api": "x"`, 1), []string{`unknown field "api"`}},
		{"trailing data", validFile + ` {}`, []string{"unexpected data after the top-level JSON object near line 16"}},
		// Finding 9: README promised line, column and JSON path for an
		// unknown field; the error named the key only.
		{"unknown field position and path", "{\n  \"providers\": {\"p\": {\"base_url\": \"http://127.0.0.1:1/v1\", \"apis\": [\"chat\"],\n    \"connections\": {\"c\": {\"max_conn\": 2}}}},\n  \"models\": {}\n}",
			[]string{`line 3 column 27: unknown field "max_conn" at providers.p.connections.c.max_conn`}},
		{"unknown field in a list", strings.Replace(validFile, `{"connection": "anthropic", "model": "claude-sonnet-4-5"}`, `{"connection": "anthropic", "modle": "claude-sonnet-4-5"}`, 1),
			[]string{`unknown field "modle" at models.claude.targets[0].modle`}},
		{"syntax", `{"providers": {,}}`, []string{"invalid JSON at line 1 column"}},
		{"wrong type", `{"providers": {"x": {"base_url": 5}}}`, []string{"wrong type", "base_url"}},
		{"empty", ``, []string{"config is empty"}},
		{"bad api", strings.Replace(validFile, `"apis": ["messages"]`, `"apis": ["completions"]`, 1), []string{`providers.anthropic.apis[0]: "completions" is not an API`}},
		{"bad url", strings.Replace(validFile, `https://api.anthropic.com/v1`, `ftp://x`, 1), []string{"providers.anthropic.base_url", `scheme "ftp"`}},
		{"key in url", strings.Replace(validFile, `https://api.anthropic.com/v1`, `https://api.anthropic.com/v1?key=sk-123`, 1), []string{"must not carry a query"}},
		{"remote without key", strings.Replace(validFile, `{"api_key_env": "ANTHROPIC_API_KEY"}`, `{}`, 1), []string{"providers.anthropic.connections.main.api_key_env: a remote provider needs"}},
		{"unknown connection", strings.Replace(validFile, `"openai/backup"`, `"openai/nope"`, 1), []string{`models.fast.targets[1].connection: unknown connection "nope"`}},
		{"ambiguous connection", strings.Replace(validFile, `"openai/main", "weight": 2`, `"openai", "weight": 2`, 1), []string{`provider "openai" has 2 connections`}},
		{"unknown provider", strings.Replace(validFile, `"connection": "local"`, `"connection": "nowhere"`, 1), []string{`unknown provider "nowhere"`}},
		{"bad strategy", strings.Replace(validFile, `"round-robin"`, `"random"`, 1), []string{`models.rr.strategy: "random" is not a strategy`}},
		{"tenant both keys", strings.Replace(validFile, `"key_env": "ALICE_KEY"`, `"key_env": "ALICE_KEY", "key_sha256": "ab"`, 1), []string{"tenants[0]: set exactly one of key_env"}},
		{"tenant bad hash", strings.Replace(validFile, `2c26b46b`, `XXXXXXXX`, 1), []string{"tenants[1].key_sha256"}},
		{"reserved header", strings.Replace(validFile, `"auth": "none",`, `"auth": "none", "headers": {"Authorization": "x"},`, 1), []string{"providers.local.headers.Authorization"}},
		{"bad auth mode", strings.Replace(validFile, `"mode": "keys"`, `"mode": "everyone"`, 1), []string{`auth.mode: "everyone" is not a mode`}},
		{"no models", `{"providers":{"p":{"base_url":"http://127.0.0.1:1/v1","apis":["chat"],"connections":{"c":{}}}},"models":{}}`, []string{"models: at least one model is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkFileError(t, tc.name, tc.json, tc.want)
		})
	}
}

// FuzzDecodeFile checks that the decoder never panics and that whatever it
// accepts is internally consistent: every target resolves.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(validFile))
	f.Add([]byte(`{"providers":{"p":{"base_url":"http://127.0.0.1:1/v1","apis":["chat"],"connections":{"c":{}}}},"models":{"m":{"targets":[{"connection":"p"}]}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := DecodeFile(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for name, m := range cfg.Models {
			for i, tg := range m.Targets {
				if _, _, err := cfg.ResolveConnection(tg.Connection); err != nil {
					t.Fatalf("accepted config has unresolvable models.%s.targets[%d]: %v", name, i, err)
				}
			}
		}
	})
}

// TestShownURLHidesCredentials: a URL in an error keeps what locates it
// (scheme, host, path) and loses what may be a secret.
func TestShownURLHidesCredentials(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://api.openai.com/v1", `"https://api.openai.com/v1"`},
		{"https://user:pa55@host.example/v1", `"https://[REDACTED]@host.example/v1"`},
		{"https://host.example/v1?key=abc&x=1", `"https://host.example/v1?[REDACTED]"`},
		{"https://host.example/v1#tok", `"https://host.example/v1#[REDACTED]"`},
		{"mailto:secret-thing", `"mailto:[REDACTED]"`},
		{"http://a b@host/%zz", `(the value, not shown: it does not parse as a URL)`},
	} {
		if got := ShownURL(c.in); got != c.want {
			t.Errorf("ShownURL(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	err := validateBaseURL("https://ops:hunter2@api.example.com/v1?token=t0k")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "t0k") {
		t.Fatalf("validateBaseURL: %v", err)
	}
}
