package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// ServiceConfig declares a sidecar process the gateway supervises (the
// "services" section). The process is started with a minimal environment
// (PATH, HOME, LANG, TMPDIR, TZ) plus Env and the variables named in
// EnvPassthrough, so gateway secrets never leak into a sidecar by accident.
type ServiceConfig struct {
	// Command is the executable: "{self}" (the gateway's own binary), an
	// absolute path, or a name looked up in PATH.
	Command string `json:"command"`
	// Args may use {port}, {host}, {addr} (host:port) and {data_dir} (the
	// service's own directory under the data directory).
	Args []string `json:"args,omitempty"`
	// Env holds literal, non-secret variables for the child.
	Env map[string]string `json:"env,omitempty"`
	// EnvPassthrough names gateway environment variables copied to the
	// child (e.g. a provider key the sidecar needs).
	EnvPassthrough []string `json:"env_passthrough,omitempty"`
	// Port is the loopback port the service listens on; 0 picks a free
	// port when the gateway starts and keeps it across restarts.
	Port int `json:"port,omitempty"`
	// HealthPath is requested with GET on http://127.0.0.1:<port>; a 2xx
	// answer is healthy.
	HealthPath string `json:"health_path"`
	// Identity, when set, must equal the "service" string of the JSON the
	// health path answers. It proves that an instance found already
	// running on the port is this service before the gateway adopts it.
	Identity string `json:"identity,omitempty"`
	// HealthIntervalMs is the time between health checks (default 5000).
	HealthIntervalMs int `json:"health_interval_ms,omitempty"`
	// HealthTimeoutMs bounds one health check (default 5000).
	HealthTimeoutMs int `json:"health_timeout_ms,omitempty"`
	// HealthFailures consecutive failed checks make it unhealthy (default 3).
	HealthFailures int `json:"health_failures,omitempty"`
	// StartTimeoutMs is how long a spawned service may take to pass its
	// first health check before it is killed and counted as a crash
	// (default 3 health intervals).
	StartTimeoutMs int `json:"start_timeout_ms,omitempty"`
	// StopTimeoutMs is the grace between SIGTERM and SIGKILL (default 15000).
	StopTimeoutMs int `json:"stop_timeout_ms,omitempty"`
	// LogBufferBytes bounds the kept log lines (default 5 MiB).
	LogBufferBytes int64 `json:"log_buffer_bytes,omitempty"`
	// AutoStart starts the service with the gateway until changed through
	// POST /api/services/<id>/auto-start (which is persisted).
	AutoStart bool `json:"auto_start,omitempty"`
	// Restart is the crash policy.
	Restart RestartConfig `json:"restart,omitempty"`
}

// RestartConfig is how a crashed service is restarted. Zero fields take
// the defaults named on each.
type RestartConfig struct {
	// Policy is "on-failure" (default: restart after a crash or a failed
	// liveness check) or "never".
	Policy string `json:"policy,omitempty"`
	// InitialBackoffMs is the first delay (default 1000); it doubles per
	// consecutive crash.
	InitialBackoffMs int `json:"initial_backoff_ms,omitempty"`
	// MaxBackoffMs caps the delay (default 60000).
	MaxBackoffMs int `json:"max_backoff_ms,omitempty"`
	// StableAfterMs: a run at least this long resets the backoff (default
	// 60000).
	StableAfterMs int `json:"stable_after_ms,omitempty"`
	// MaxCrashes within CrashWindowMs make the supervisor give up until an
	// explicit start (defaults 5 and 300000).
	MaxCrashes    int `json:"max_crashes,omitempty"`
	CrashWindowMs int `json:"crash_window_ms,omitempty"`
}

// EngineConfig declares an engine of the router-backend registry (the
// "engines" section). The native pipeline is built in as engine "native".
type EngineConfig struct {
	// Lifecycle is how it runs: supervised (a service of this file),
	// external (reached over HTTP, not managed) or disabled.
	Lifecycle string `json:"lifecycle"`
	// Relay is its role for POST /api/v1/relay/chat/completions: "relay"
	// (a relay backend, e.g. Bifrost), "provider" (consumed as a provider
	// connection by the native pipeline) or "none" (default).
	Relay string `json:"relay,omitempty"`
	// Service is the services entry of a supervised engine (default: the
	// engine id).
	Service string `json:"service,omitempty"`
	// BaseURL is an external engine's endpoint.
	BaseURL string `json:"base_url,omitempty"`
	// Capabilities: chat, messages, responses, streaming, tools, vision,
	// oauth-backed, dashboard-embed, model-sync, native-hot-path.
	Capabilities []string `json:"capabilities,omitempty"`
	// DefaultPort and HealthPath describe the engine for operators.
	DefaultPort int    `json:"default_port,omitempty"`
	HealthPath  string `json:"health_path,omitempty"`
	// Telemetry reports whether the engine exports usage telemetry.
	Telemetry bool `json:"telemetry,omitempty"`
}

// RelayConfig configures POST /api/v1/relay/chat/completions.
type RelayConfig struct {
	Tokens []RelayToken `json:"tokens,omitempty"`
	// Providers is the sidecar manifest: which providers the relay backend
	// (Bifrost) may serve. Keys are provider ids as in "provider/model".
	Providers map[string]RelayProvider `json:"providers,omitempty"`
}

// RelayToken is one relay credential. The token itself is never in the
// file: it is referenced by the variable holding it, or by its SHA-256.
type RelayToken struct {
	Name        string `json:"name"`
	TokenEnv    string `json:"token_env,omitempty"`
	TokenSHA256 string `json:"token_sha256,omitempty"`
	// ExpiresAt (RFC 3339) ends the token's validity; empty = no expiry.
	ExpiresAt string `json:"expires_at,omitempty"`
	// Models the token may call: exact names or prefixes ending in "*";
	// empty or ["*"] = all.
	Models []string `json:"models,omitempty"`
	// RateLimit caps the token's request rate; nil = unlimited.
	RateLimit *RelayRateLimit `json:"rate_limit,omitempty"`
}

// RelayRateLimit allows Requests per WindowMs, with bursts up to Requests.
type RelayRateLimit struct {
	Requests int `json:"requests"`
	WindowMs int `json:"window_ms"`
}

// RelayProvider is one manifest entry.
type RelayProvider struct {
	// Bifrost says whether requests for this provider may go through the
	// relay backend.
	Bifrost bool `json:"bifrost"`
	// Reason explains an ineligible provider (shown in logs and docs).
	Reason string `json:"reason,omitempty"`
}

// Engine lifecycles and relay roles accepted in the file (internal/engines
// takes its words from here, so the file and the registry speak one list).
const (
	// LifecycleInProcess is the built-in native pipeline's lifecycle,
	// reserved: the file may not declare it.
	LifecycleInProcess  = "in-process"
	LifecycleSupervised = "supervised"
	LifecycleExternal   = "external"
	LifecycleDisabled   = "disabled"
	RelayRoleRelay      = "relay"
	RelayRoleProvider   = "provider"
	RelayRoleNone       = "none"
	RestartOnFailure    = "on-failure"
	RestartNever        = "never"
	// SelfCommand as a service command means the gateway's own executable.
	SelfCommand = "{self}"
	// ServiceNonceEnv is set in a supervised child's environment to a
	// random value, new at every start. A child whose health answer
	// echoes it as "nonce" proves it is the process this start spawned
	// (the bundled mock provider does): the supervisor accepts no other
	// answer as its child's.
	ServiceNonceEnv = "OMNIROUTE_SERVICE_NONCE"
)

// EngineCapabilities is the capability vocabulary of the registry.
var EngineCapabilities = []string{"chat", "messages", "responses", "streaming", "tools", "vision",
	"oauth-backed", "dashboard-embed", "model-sync", "native-hot-path"}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

func init() { fileValidators = append(fileValidators, validateServiceSections) }

func validateServiceSections(f *File) []string {
	var errs problems
	for id, s := range sorted(f.Services) {
		p := "services." + id
		errs.id(p, "service id", id)
		if strings.TrimSpace(s.Command) == "" {
			errs.add("%s.command: required; give an absolute path, a name found in PATH, or %q for the gateway's own binary", p, SelfCommand)
		} else if strings.ContainsAny(s.Command, "{}") && s.Command != SelfCommand {
			errs.add("%s.command: %q: the only placeholder allowed here is %s", p, s.Command, SelfCommand)
		}
		for i, a := range s.Args {
			for _, ph := range placeholderRE.FindAllString(a, -1) {
				switch ph {
				case "{port}", "{host}", "{addr}", "{data_dir}":
				default:
					errs.add("%s.args[%d]: unknown placeholder %s; want {port}, {host}, {addr} or {data_dir}", p, i, ph)
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			if !envVarRE.MatchString(k) {
				errs.add("%s.env.%s: not an environment variable name", p, k)
			}
		}
		for i, k := range s.EnvPassthrough {
			if !envVarRE.MatchString(k) {
				errs.add("%s.env_passthrough[%d]: %q is not an environment variable name", p, i, k)
			}
		}
		if s.Port < 0 || s.Port > 65535 {
			errs.add("%s.port: %d is not a port; want 1-65535, or 0 to pick a free one", p, s.Port)
		}
		if !strings.HasPrefix(s.HealthPath, "/") || strings.ContainsAny(s.HealthPath, " \t\r\n#") {
			errs.add("%s.health_path: %q must be a path starting with '/', e.g. /health", p, s.HealthPath)
		}
		for _, r := range []struct {
			name    string
			v, max  int
			minimum int
		}{
			{"health_interval_ms", s.HealthIntervalMs, 3_600_000, 10},
			{"health_timeout_ms", s.HealthTimeoutMs, 600_000, 10},
			{"health_failures", s.HealthFailures, 100, 1},
			{"start_timeout_ms", s.StartTimeoutMs, 3_600_000, 10},
			{"stop_timeout_ms", s.StopTimeoutMs, 600_000, 10},
			{"restart.initial_backoff_ms", s.Restart.InitialBackoffMs, 3_600_000, 1},
			{"restart.max_backoff_ms", s.Restart.MaxBackoffMs, 86_400_000, 1},
			{"restart.stable_after_ms", s.Restart.StableAfterMs, 86_400_000, 1},
			{"restart.max_crashes", s.Restart.MaxCrashes, 1000, 1},
			{"restart.crash_window_ms", s.Restart.CrashWindowMs, 86_400_000, 1},
		} {
			if r.v != 0 && (r.v < r.minimum || r.v > r.max) {
				errs.add("%s.%s: %d is out of range; want %d-%d (or omit it for the default)", p, r.name, r.v, r.minimum, r.max)
			}
		}
		if s.LogBufferBytes != 0 && (s.LogBufferBytes < 64<<10 || s.LogBufferBytes > 1<<30) {
			errs.add("%s.log_buffer_bytes: %d is out of range; want 65536 to 1073741824 (or omit it for 5 MiB)", p, s.LogBufferBytes)
		}
		switch s.Restart.Policy {
		case "", RestartOnFailure, RestartNever:
		default:
			errs.add("%s.restart.policy: %q is not a policy; want on-failure or never", p, s.Restart.Policy)
		}
		if s.Restart.InitialBackoffMs > 0 && s.Restart.MaxBackoffMs > 0 && s.Restart.InitialBackoffMs > s.Restart.MaxBackoffMs {
			errs.add("%s.restart: initial_backoff_ms (%d) exceeds max_backoff_ms (%d)", p, s.Restart.InitialBackoffMs, s.Restart.MaxBackoffMs)
		}
	}
	for pid, p := range sorted(f.Providers) {
		u, err := url.Parse(p.BaseURL)
		if err == nil && u.Scheme == "service" {
			if _, ok := f.Services[u.Host]; !ok {
				errs.add("providers.%s.base_url: names service %q, which is not declared in services; add services.%s (command, health_path)", pid, u.Host, u.Host)
			}
		}
	}
	relayEngines := []string{}
	for id, e := range sorted(f.Engines) {
		p := "engines." + id
		errs.id(p, "engine id", id)
		if id == "native" || id == "ts" {
			errs.add("%s: %q is the built-in native pipeline and cannot be redeclared", p, id)
		}
		switch e.Lifecycle {
		case LifecycleSupervised:
			svc := e.Service
			if svc == "" {
				svc = id
			}
			if _, ok := f.Services[svc]; !ok {
				errs.add("%s.service: supervised engine needs services.%s to exist", p, svc)
			}
		case LifecycleExternal, LifecycleDisabled:
			if e.Service != "" {
				errs.add("%s.service: only supervised engines name a service", p)
			}
		case LifecycleInProcess:
			errs.add("%s.lifecycle: in-process is reserved for the built-in native pipeline; want supervised, external or disabled", p)
		default:
			errs.add("%s.lifecycle: %q is not a lifecycle; want supervised, external or disabled", p, e.Lifecycle)
		}
		switch e.Relay {
		case "", RelayRoleNone, RelayRoleProvider:
		case RelayRoleRelay:
			relayEngines = append(relayEngines, id)
		default:
			errs.add("%s.relay: %q is not a relay role; want relay, provider or none", p, e.Relay)
		}
		if e.BaseURL != "" {
			if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
				errs.add("%s.base_url: %s must be an http(s) URL without query or credentials", p, ShownURL(e.BaseURL))
			}
		}
		for i, c := range e.Capabilities {
			if !slices.Contains(EngineCapabilities, c) {
				errs.add("%s.capabilities[%d]: %q is not a capability; want one of %s", p, i, c, strings.Join(EngineCapabilities, ", "))
			}
		}
		if e.DefaultPort < 0 || e.DefaultPort > 65535 {
			errs.add("%s.default_port: %d is not a port", p, e.DefaultPort)
		}
		if e.HealthPath != "" && !strings.HasPrefix(e.HealthPath, "/") {
			errs.add("%s.health_path: %q must start with '/'", p, e.HealthPath)
		}
	}
	if len(relayEngines) > 1 {
		errs.add("engines: %s all have relay role \"relay\"; the relay has one backend, keep one", strings.Join(relayEngines, ", "))
	}
	if f.Relay != nil {
		errs = append(errs, validateRelay(f.Relay)...)
	}
	return errs
}

func validateRelay(r *RelayConfig) []string {
	var errs problems
	names := map[string]bool{}
	for i, t := range r.Tokens {
		p := fmt.Sprintf("relay.tokens[%d]", i)
		if !nameRE.MatchString(t.Name) {
			errs.add("%s.name: want %s", p, nameRule)
		}
		if names[t.Name] {
			errs.add("%s.name: %q is used twice", p, t.Name)
		}
		names[t.Name] = true
		switch {
		case (t.TokenEnv == "") == (t.TokenSHA256 == ""):
			errs.add("%s: set exactly one of token_env (variable holding the token) or token_sha256 (hex SHA-256 of the token)", p)
		case t.TokenEnv != "" && !envVarRE.MatchString(t.TokenEnv):
			errs.add("%s.token_env: %q is not an environment variable name", p, t.TokenEnv)
		case t.TokenSHA256 != "" && !hexRE.MatchString(t.TokenSHA256):
			errs.add("%s.token_sha256: want 64 lower-case hex digits (sha256sum of the token)", p)
		}
		if t.ExpiresAt != "" {
			if _, err := time.Parse(time.RFC3339, t.ExpiresAt); err != nil {
				errs.add("%s.expires_at: %q is not an RFC 3339 time such as 2027-01-31T00:00:00Z", p, t.ExpiresAt)
			}
		}
		for j, m := range t.Models {
			body := strings.TrimSuffix(m, "*")
			if m == "" || strings.Contains(body, "*") || (body != "" && !modelRE.MatchString(body) && !strings.HasSuffix(body, "/")) {
				errs.add("%s.models[%d]: %q must be a model name, a prefix ending in '*', or '*'", p, j, m)
			}
		}
		if rl := t.RateLimit; rl != nil {
			if rl.Requests < 1 || rl.Requests > 1_000_000 {
				errs.add("%s.rate_limit.requests: %d; want 1-1000000", p, rl.Requests)
			}
			if rl.WindowMs < 1 || rl.WindowMs > 86_400_000 {
				errs.add("%s.rate_limit.window_ms: %d; want 1-86400000", p, rl.WindowMs)
			}
		}
	}
	keys := make([]string, 0, len(r.Providers))
	for k := range r.Providers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs.id("relay.providers."+k, "provider id", k)
	}
	return errs
}
