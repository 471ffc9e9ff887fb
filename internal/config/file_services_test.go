package config

import (
	"bytes"
	"strings"
	"testing"
)

// servicesFile has every section this file validates, all valid.
const servicesFile = `{
  "providers": {
    "mock": {"base_url": "service://mockprovider/v1", "apis": ["chat"], "auth": "none", "connections": {"default": {}}}
  },
  "models": {"demo": {"targets": [{"connection": "mock", "model": "m"}]}},
  "services": {
    "mockprovider": {"command": "{self}", "args": ["mockprovider", "--listen", "{addr}"], "health_path": "/_mock/health",
      "identity": "omniroute-mockprovider", "auto_start": true},
    "bifrost": {"command": "bifrost", "args": ["-host", "{host}", "-port", "{port}", "-app-dir", "{data_dir}"],
      "env_passthrough": ["OPENAI_API_KEY"], "env": {"LOG_STYLE": "json"}, "port": 8080, "health_path": "/v1/models",
      "restart": {"policy": "on-failure", "initial_backoff_ms": 500, "max_backoff_ms": 30000, "max_crashes": 4, "crash_window_ms": 60000}}
  },
  "engines": {
    "bifrost": {"lifecycle": "supervised", "relay": "relay", "capabilities": ["chat", "streaming"], "default_port": 8080, "health_path": "/v1/models"},
    "vibeproxy": {"lifecycle": "external", "relay": "provider", "base_url": "http://127.0.0.1:8318"}
  },
  "relay": {
    "tokens": [
      {"name": "ci", "token_env": "RELAY_CI", "models": ["gpt-*", "demo"], "rate_limit": {"requests": 60, "window_ms": 60000}},
      {"name": "bob", "token_sha256": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", "expires_at": "2030-01-01T00:00:00Z"}
    ],
    "providers": {"openai": {"bifrost": true}, "mock": {"bifrost": false, "reason": "runtime provider"}}
  }
}`

func TestServicesSectionsDecode(t *testing.T) {
	f, err := DecodeFile(strings.NewReader(servicesFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Services) != 2 || f.Services["bifrost"].Port != 8080 || f.Engines["bifrost"].Relay != "relay" ||
		len(f.Relay.Tokens) != 2 || f.Relay.Tokens[0].RateLimit.Requests != 60 || !f.Relay.Providers["openai"].Bifrost {
		t.Fatalf("decoded %+v", f)
	}
}

func TestDefaultFileDeclaresSupervisedMock(t *testing.T) {
	f, err := DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f.Services["mockprovider"]
	if !ok || s.Command != SelfCommand || !s.AutoStart || s.Identity == "" {
		t.Fatalf("default mockprovider service: %+v", s)
	}
	if f.Engines["mockprovider"].Lifecycle != LifecycleSupervised {
		t.Fatalf("default engines: %+v", f.Engines)
	}
}

func TestServicesSectionErrors(t *testing.T) {
	r := func(old, new string) string {
		if !strings.Contains(servicesFile, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(servicesFile, old, new, 1)
	}
	cases := []struct {
		name, json string
		want       string
	}{
		{"undeclared service", r(`"service://mockprovider/v1"`, `"service://nope/v1"`), `providers.mock.base_url: names service "nope", which is not declared`},
		{"no command", r(`"command": "bifrost"`, `"command": " "`), "services.bifrost.command: required"},
		{"bad placeholder", r(`"{data_dir}"`, `"{home}"`), "services.bifrost.args[5]: unknown placeholder {home}"},
		{"placeholder command", r(`"command": "bifrost"`, `"command": "{port}"`), "only placeholder allowed here is {self}"},
		{"bad port", r(`"port": 8080`, `"port": 70000`), "services.bifrost.port: 70000 is not a port"},
		{"bad health path", r(`"port": 8080, "health_path": "/v1/models"`, `"port": 8080, "health_path": "v1/models"`), "services.bifrost.health_path"},
		{"bad env name", r(`"LOG_STYLE"`, `"LOG-STYLE"`), "services.bifrost.env.LOG-STYLE"},
		{"bad passthrough", r(`"OPENAI_API_KEY"`, `"1KEY"`), "services.bifrost.env_passthrough[0]"},
		{"bad policy", r(`"on-failure"`, `"always"`), `restart.policy: "always" is not a policy`},
		{"backoff order", r(`"initial_backoff_ms": 500`, `"initial_backoff_ms": 50000`), "initial_backoff_ms (50000) exceeds max_backoff_ms (30000)"},
		{"range", r(`"max_crashes": 4`, `"max_crashes": 5000`), "restart.max_crashes: 5000 is out of range"},
		{"log buffer", r(`"auto_start": true`, `"auto_start": true, "log_buffer_bytes": 10`), "log_buffer_bytes: 10 is out of range"},
		{"bad lifecycle", r(`"lifecycle": "external"`, `"lifecycle": "remote"`), `engines.vibeproxy.lifecycle: "remote" is not a lifecycle`},
		{"in-process reserved", r(`"lifecycle": "external"`, `"lifecycle": "in-process"`), "in-process is reserved"},
		{"supervised without service", r(`"lifecycle": "supervised", "relay": "relay"`, `"lifecycle": "supervised", "service": "ghost", "relay": "relay"`), "engines.bifrost.service: supervised engine needs services.ghost"},
		{"two relays", r(`"relay": "provider"`, `"relay": "relay"`), "the relay has one backend"},
		{"bad capability", r(`["chat", "streaming"]`, `["chat", "telepathy"]`), `engines.bifrost.capabilities[1]: "telepathy" is not a capability`},
		{"native reserved", r(`"vibeproxy"`, `"native"`), `engines.native: "native" is the built-in native pipeline`},
		{"engine url", r(`"http://127.0.0.1:8318"`, `"ftp://x"`), "engines.vibeproxy.base_url"},
		{"token both", r(`"token_env": "RELAY_CI"`, `"token_env": "RELAY_CI", "token_sha256": "ab"`), "relay.tokens[0]: set exactly one of token_env"},
		{"token dup", r(`"name": "bob"`, `"name": "ci"`), `relay.tokens[1].name: "ci" is used twice`},
		{"token expiry", r(`"2030-01-01T00:00:00Z"`, `"next year"`), `relay.tokens[1].expires_at: "next year" is not an RFC 3339 time`},
		{"token model", r(`"gpt-*"`, `"g*t"`), `relay.tokens[0].models[0]: "g*t" must be a model name`},
		{"rate limit", r(`"requests": 60`, `"requests": 0`), "relay.tokens[0].rate_limit.requests: 0"},
		{"manifest id", r(`"openai": {"bifrost": true}`, `"open ai": {"bifrost": true}`), "relay.providers.open ai"},
		{"unknown field", r(`"auto_start": true`, `"autostart": true`), `unknown field "autostart"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFile(strings.NewReader(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRelayEnv(t *testing.T) {
	e := loadEnv(t, map[string]string{})
	r := e.Relay
	if r.Backend() != "" || !bool(r.BifrostEnabled) || !bool(r.BifrostStreaming) || r.BifrostTimeout != 30000 || r.BifrostCooldown != 5000 || r.BifrostPort != 0 {
		t.Fatalf("defaults %+v", r)
	}
	e = loadEnv(t, map[string]string{"RELAY_ROUTING_BACKEND": "ts", "BIFROST_BASE_URL": "http://127.0.0.1:8080/",
		"OMNIROUTE_BIFROST_KEY": "k2", "BIFROST_PORT": "9090", "BIFROST_ENABLED": "0"})
	if e.Relay.Backend() != RelayNative || e.Relay.BifrostURL() != "http://127.0.0.1:8080" || e.Relay.BifrostKey() != "k2" || e.Relay.BifrostPort != 9090 || bool(e.Relay.BifrostEnabled) {
		t.Fatalf("parsed %+v", e.Relay)
	}
	e, _ = LoadEnv(map[string]string{"OMNIROUTE_RELAY_BACKEND": "auto", "RELAY_ROUTING_BACKEND": "bifrost", "BIFROST_API_KEY": "k1", "OMNIROUTE_BIFROST_KEY": "k2"})
	if e.Relay.Backend() != RelayAuto || e.Relay.BifrostKey() != "k1" {
		t.Fatalf("precedence: %+v", e.Relay)
	}
	bad := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OMNIROUTE_RELAY_BACKEND": "fast"}, `cannot parse OMNIROUTE_RELAY_BACKEND="fast": want native (or ts), bifrost or auto`},
		{map[string]string{"OMNIROUTE_RELAY_BACKEND": "TS"}, `OMNIROUTE_RELAY_BACKEND="TS"`},
		{map[string]string{"OMNIROUTE_RELAY_BACKEND": "x", "RELAY_ROUTING_BACKEND": "auto"}, `OMNIROUTE_RELAY_BACKEND="x"`},
		{map[string]string{"RELAY_ROUTING_BACKEND": "both"}, `RELAY_ROUTING_BACKEND="both"`},
		{map[string]string{"BIFROST_BASE_URL": "127.0.0.1:8080"}, "cannot parse BIFROST_BASE_URL"},
		{map[string]string{"BIFROST_BASE_URL": "http://user:pw@h:1"}, "cannot parse BIFROST_BASE_URL"},
		{map[string]string{"BIFROST_TIMEOUT_MS": "0"}, "BIFROST_TIMEOUT_MS must be greater than 0"},
		{map[string]string{"BIFROST_TIMEOUT_MS": "5s"}, `BIFROST_TIMEOUT_MS="5s"`},
		{map[string]string{"BIFROST_ENABLED": "yes"}, `BIFROST_ENABLED="yes": want true, false, 1 or 0`},
		{map[string]string{"BIFROST_PORT": "0"}, `BIFROST_PORT="0": want a TCP port`},
		{map[string]string{"OMNIROUTE_BIFROST_FAILURE_COOLDOWN_MS": "-1"}, "OMNIROUTE_BIFROST_FAILURE_COOLDOWN_MS"},
		{map[string]string{"OMNIROUTE_RELAY_BACKEND": "bifrost", "BIFROST_ENABLED": "false"}, "forces bifrost but BIFROST_ENABLED=0"},
	}
	for _, tc := range bad {
		if _, err := LoadEnv(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v; want %q", tc.env, err, tc.want)
		}
	}
	if _, err := LoadEnv(map[string]string{"BIFROST_API_KEY": "sk-secret-value", "BIFROST_PORT": "x"}); err == nil || strings.Contains(err.Error(), "sk-secret-value") {
		t.Fatalf("error leaks or missing: %v", err)
	}
}

func FuzzDecodeServicesFile(f *testing.F) {
	f.Add([]byte(servicesFile))
	f.Add([]byte(`{"providers":{"p":{"base_url":"service://s/v1","apis":["chat"],"connections":{"c":{}}}},"models":{"m":{"targets":[{"connection":"p"}]}},"services":{"s":{"command":"x","health_path":"/"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := DecodeFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		for id, e := range cfg.Engines {
			if e.Lifecycle == LifecycleSupervised {
				svc := e.Service
				if svc == "" {
					svc = id
				}
				if _, ok := cfg.Services[svc]; !ok {
					t.Fatalf("accepted supervised engine %s without service %s", id, svc)
				}
			}
		}
		for id, s := range cfg.Services {
			if s.Port < 0 || s.Port > 65535 || !strings.HasPrefix(s.HealthPath, "/") {
				t.Fatalf("accepted service %s with port %d health %q", id, s.Port, s.HealthPath)
			}
		}
	})
}
