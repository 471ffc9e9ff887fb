package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// HTTPEnv configures what the front end accepts from browsers and how
// long it waits on a slow client.
type HTTPEnv struct {
	// AllowedHosts are host names (besides IP literals, localhost and the
	// listen host) accepted in the Host header: a name a DNS-rebinding page
	// controls is refused.
	AllowedHosts HostNames `env:"OMNIROUTE_ALLOWED_HOSTS"`
	// CORSOrigins are the browser origins allowed to call the gateway
	// cross-origin (empty: none).
	CORSOrigins Origins `env:"OMNIROUTE_CORS_ORIGINS"`
	// WriteTimeout bounds one write to the caller: a whole non-streaming
	// response, or one SSE event.
	WriteTimeout Millis `env:"OMNIROUTE_WRITE_TIMEOUT_MS" envDefault:"30000"`
	// UploadMinRate is the slowest average rate a request body may arrive
	// at: its read deadline is OMNIROUTE_HEADER_TIMEOUT_MS plus its size at
	// this rate.
	UploadMinRate Bytes `env:"OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC" envDefault:"16KiB"`
}

// HostNames is a comma-separated list of host names, lower-cased.
type HostNames []string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (h *HostNames) UnmarshalText(b []byte) error {
	var out HostNames
	for _, s := range strings.Split(string(b), ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if strings.ContainsAny(s, "/:@ *") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
			return fmt.Errorf("want host names separated by commas, without scheme, port or wildcard (such as gateway.internal,gw.example.com); %q is not one", s)
		}
		out = append(out, s)
	}
	*h = out
	return nil
}

// Origins is a comma-separated list of browser origins
// (scheme://host[:port]), normalised to lower case without a trailing
// slash.
type Origins []string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (o *Origins) UnmarshalText(b []byte) error {
	var out Origins
	for _, s := range strings.Split(string(b), ",") {
		s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "/")
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil ||
			strings.Contains(u.Host, "*") {
			return fmt.Errorf("want origins such as https://app.example.com or http://localhost:5173 separated by commas (no path, no wildcard); %q is not one", s)
		}
		out = append(out, s)
	}
	*o = out
	return nil
}

func validateHTTPEnv(e *Env) []string {
	var errs []string
	if e.HTTP.WriteTimeout == 0 {
		errs = append(errs, "OMNIROUTE_WRITE_TIMEOUT_MS must be greater than 0")
	}
	if e.HTTP.UploadMinRate < 1024 {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC=%d is too small: want at least 1024 (1KiB)", e.HTTP.UploadMinRate))
	}
	return errs
}

// ListenHost is the host part of OMNIROUTE_LISTEN ("" for a wildcard).
func (e *Env) ListenHost() string {
	h, _, _ := net.SplitHostPort(e.Server.Listen)
	return strings.ToLower(h)
}

func init() { subsystemValidators = append(subsystemValidators, validateHTTPEnv) }
