// Package config reads the gateway's settings: environment variables into one
// typed struct (caarlos0/env/v10) and the providers, models and tenants from a
// strictly decoded JSON file, with an embedded default that serves model
// "demo" through the bundled mock provider when no file is given.
//
// Every invalid value stops start-up with an error that names the variable or
// the JSON path, echoes the value (never for secrets) and says what is wanted.
// Nothing here falls back silently to a default after a parse failure.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	env "github.com/caarlos0/env/v10"
)

// Env is every environment setting of the gateway. Each subsystem owns one
// embedded struct in its own file so that its variables read together.
type Env struct {
	Server    ServerEnv
	HTTP      HTTPEnv
	Upstream  UpstreamEnv
	Ingest    IngestEnv
	Relay     RelayEnv
	Admission AdmissionEnv
	Pressure  PressureEnv
	Quota     QuotaEnv
	Lanes     LanesEnv
	// RequestLog configures the request log and its database.
	RequestLog RequestLogEnv
	// Cluster configures cluster mode (off by default).
	Cluster ClusterEnv
}

// ServerEnv configures the listener, logging, identity and shutdown.
type ServerEnv struct {
	Listen          string      `env:"OMNIROUTE_LISTEN" envDefault:"127.0.0.1:20128"`
	ConfigPath      string      `env:"OMNIROUTE_CONFIG"`
	DataDir         string      `env:"OMNIROUTE_DATA_DIR"`
	ShutdownTimeout Millis      `env:"OMNIROUTE_SHUTDOWN_TIMEOUT_MS" envDefault:"30000"`
	HeaderTimeout   Millis      `env:"OMNIROUTE_HEADER_TIMEOUT_MS" envDefault:"10000"`
	KeepAliveIdle   Millis      `env:"OMNIROUTE_KEEPALIVE_IDLE_MS" envDefault:"90000"`
	MaxConnections  PositiveInt `env:"OMNIROUTE_MAX_CONNECTIONS" envDefault:"65536"`
	LogFormat       LogFormat   `env:"OMNIROUTE_LOG_FORMAT" envDefault:"text"`
	LogLevel        LogLevel    `env:"OMNIROUTE_LOG_LEVEL" envDefault:"info"`
	TenantSecret    string      `env:"OMNIROUTE_TENANT_SECRET" secret:"true"`
	ManagementKey   string      `env:"OMNIROUTE_MANAGEMENT_KEY" secret:"true"`
}

// UpstreamEnv configures the client that talks to providers.
type UpstreamEnv struct {
	ConnectTimeout   Millis      `env:"OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS" envDefault:"10000"`
	TTFBTimeout      Millis      `env:"OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS" envDefault:"300000"`
	IdleTimeout      Millis      `env:"OMNIROUTE_UPSTREAM_IDLE_TIMEOUT_MS" envDefault:"120000"`
	TotalTimeout     Millis      `env:"OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS" envDefault:"900000"`
	MaxConns         PositiveInt `env:"OMNIROUTE_UPSTREAM_MAX_CONNS" envDefault:"1024"`
	MaxAttempts      PositiveInt `env:"OMNIROUTE_UPSTREAM_MAX_ATTEMPTS" envDefault:"3"`
	MaxResponseBytes Bytes       `env:"OMNIROUTE_MAX_RESPONSE_BODY_BYTES" envDefault:"64MiB"`
}

// IngestEnv configures how request bodies are read.
type IngestEnv struct {
	HardMaxBodyBytes Bytes `env:"OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES" envDefault:"52428800"`
}

// LoadEnv parses environ (as from os.Environ, or a map in tests) into Env and
// validates cross-field rules. The error lists every bad variable at once.
func LoadEnv(environ map[string]string) (Env, error) {
	var e Env
	if environ == nil {
		environ = environMap(os.Environ())
	}
	err := env.ParseWithOptions(&e, env.Options{Environment: environ})
	if err != nil {
		return e, describeEnvError(err, environ)
	}
	if err := e.validate(); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Env) validate() error {
	var errs []string
	if _, port, err := net.SplitHostPort(e.Server.Listen); err != nil {
		errs = append(errs, fmt.Sprintf("cannot parse OMNIROUTE_LISTEN=%q: want host:port such as 127.0.0.1:20128", e.Server.Listen))
	} else if n, ok := parseNonNegative(port); !ok || n > 65535 {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_LISTEN=%q has no valid port: want host:port with a port from 0 (any free port) to 65535, such as 127.0.0.1:20128", e.Server.Listen))
	}
	if s := e.Server.TenantSecret; s != "" && len(s) < 16 {
		errs = append(errs, "OMNIROUTE_TENANT_SECRET is too short: want at least 16 characters of random data (or unset it to generate one in the data directory)")
	}
	u := e.Upstream
	for _, c := range []struct {
		name string
		v    Millis
	}{
		{"OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS", u.ConnectTimeout},
		{"OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS", u.TTFBTimeout},
		{"OMNIROUTE_UPSTREAM_IDLE_TIMEOUT_MS", u.IdleTimeout},
		{"OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS", u.TotalTimeout},
		{"OMNIROUTE_HEADER_TIMEOUT_MS", e.Server.HeaderTimeout},
	} {
		if c.v == 0 {
			errs = append(errs, fmt.Sprintf("%s must be greater than 0", c.name))
		}
	}
	if u.TTFBTimeout > u.TotalTimeout {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS (%d) must not exceed OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS (%d)", u.TTFBTimeout, u.TotalTimeout))
	}
	if u.MaxResponseBytes < 1024 {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_MAX_RESPONSE_BODY_BYTES=%d is too small: want at least 1024", u.MaxResponseBytes))
	}
	if e.Ingest.HardMaxBodyBytes < 1024 {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES=%d is too small: want at least 1024", e.Ingest.HardMaxBodyBytes))
	}
	errs = append(errs, e.validateSubsystems()...)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// subsystemValidators lets each subsystem's env file add its own rules
// without editing validate.
var subsystemValidators []func(*Env) []string

func (e *Env) validateSubsystems() []string {
	var errs []string
	for _, v := range subsystemValidators {
		errs = append(errs, v(e)...)
	}
	return errs
}

// DefaultDataDir is where the install secret and service state live when
// OMNIROUTE_DATA_DIR is unset.
func (e *Env) ResolvedDataDir() string {
	if e.Server.DataDir != "" {
		return e.Server.DataDir
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "omniroute")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "omniroute")
	}
	return ".omniroute"
}

func environMap(kv []string) map[string]string {
	m := make(map[string]string, len(kv))
	for _, s := range kv {
		if i := strings.IndexByte(s, '='); i > 0 {
			m[s[:i]] = s[i+1:]
		}
	}
	return m
}

// envField describes one variable of Env, for error messages and docs.
type envField struct {
	Name    string // Go field name (unique across Env)
	Var     string // environment variable
	Default string
	Secret  bool
}

// EnvFields lists every variable Env reads, in declaration order.
func EnvFields() []envField {
	var out []envField
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if v := f.Tag.Get("env"); v != "" {
				out = append(out, envField{Name: f.Name, Var: strings.Split(v, ",")[0], Default: f.Tag.Get("envDefault"), Secret: f.Tag.Get("secret") == "true"})
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeOf(Env{}))
	return out
}

// describeEnvError turns caarlos0's field-named errors into messages that
// name the variable, echo its value and say what is wanted.
func describeEnvError(err error, environ map[string]string) error {
	byField := map[string]envField{}
	for _, f := range EnvFields() {
		byField[f.Name] = f
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	var msgs []string
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			f, ok := byField[pe.Name]
			if ok {
				val := strconv.Quote(environ[f.Var])
				if f.Secret {
					val = "(hidden)"
				}
				msgs = append(msgs, fmt.Sprintf("cannot parse %s=%s: %v", f.Var, val, pe.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "; "))
}
