package config

import (
	"fmt"
	"net/url"
	"strings"
)

// RelayEnv configures the relay route's backend choice and the Bifrost
// sidecar it may dispatch to. The names are the reference's, so an
// existing OmniRoute deployment keeps its environment.
type RelayEnv struct {
	// RelayBackend (OMNIROUTE_RELAY_BACKEND) wins over RelayRoutingBackend
	// (RELAY_ROUTING_BACKEND); both unset = auto when a Bifrost endpoint is
	// configured and enabled, else native.
	RelayBackend        RelayBackend `env:"OMNIROUTE_RELAY_BACKEND"`
	RelayRoutingBackend RelayBackend `env:"RELAY_ROUTING_BACKEND"`
	BifrostBaseURL      string       `env:"BIFROST_BASE_URL"`
	BifrostEnabled      Flag         `env:"BIFROST_ENABLED" envDefault:"true"`
	BifrostAPIKey       string       `env:"BIFROST_API_KEY" secret:"true"`
	BifrostKeyAlias     string       `env:"OMNIROUTE_BIFROST_KEY" secret:"true"`
	BifrostTimeout      Millis       `env:"BIFROST_TIMEOUT_MS" envDefault:"30000"`
	BifrostStreaming    Flag         `env:"BIFROST_STREAMING_ENABLED" envDefault:"true"`
	BifrostPort         Port         `env:"BIFROST_PORT"`
	BifrostCooldown     Millis       `env:"OMNIROUTE_BIFROST_FAILURE_COOLDOWN_MS" envDefault:"5000"`
}

// RelayBackend is a relay backend name: native (alias ts), bifrost or auto;
// "" means unset.
type RelayBackend string

// The relay backends.
const (
	RelayNative  RelayBackend = "native"
	RelayBifrost RelayBackend = "bifrost"
	RelayAuto    RelayBackend = "auto"
)

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (b *RelayBackend) UnmarshalText(t []byte) error {
	switch v := strings.TrimSpace(string(t)); v {
	case "native", "ts":
		*b = RelayNative
	case "bifrost":
		*b = RelayBifrost
	case "auto":
		*b = RelayAuto
	default:
		return fmt.Errorf("want native (or ts), bifrost or auto")
	}
	return nil
}

// Port is a TCP port, 1-65535; 0 means unset.
type Port int

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *Port) UnmarshalText(b []byte) error {
	return setWhole(p, b, 1, 65535, "want a TCP port (1-65535)")
}

// Backend returns the configured backend ("" when neither variable is set).
func (r *RelayEnv) Backend() RelayBackend {
	if r.RelayBackend != "" {
		return r.RelayBackend
	}
	return r.RelayRoutingBackend
}

// BifrostKey returns BIFROST_API_KEY, else OMNIROUTE_BIFROST_KEY.
func (r *RelayEnv) BifrostKey() string {
	if r.BifrostAPIKey != "" {
		return r.BifrostAPIKey
	}
	return r.BifrostKeyAlias
}

// BifrostURL returns BIFROST_BASE_URL without its trailing slash.
func (r *RelayEnv) BifrostURL() string { return strings.TrimSuffix(r.BifrostBaseURL, "/") }

func init() { subsystemValidators = append(subsystemValidators, validateRelayEnv) }

func validateRelayEnv(e *Env) []string {
	var errs []string
	r := &e.Relay
	if s := r.BifrostBaseURL; s != "" {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Sprintf("cannot parse BIFROST_BASE_URL=%q: want an http(s) URL such as http://127.0.0.1:8080, without query or credentials (put the key in BIFROST_API_KEY)", s))
		}
	}
	if r.BifrostTimeout == 0 {
		errs = append(errs, "BIFROST_TIMEOUT_MS must be greater than 0")
	}
	if r.Backend() == RelayBifrost && !bool(r.BifrostEnabled) {
		errs = append(errs, "OMNIROUTE_RELAY_BACKEND (or RELAY_ROUTING_BACKEND) forces bifrost but BIFROST_ENABLED=0 disables it; unset one of them")
	}
	return errs
}
