package config

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// File is the JSON configuration named by OMNIROUTE_CONFIG. It holds no
// secrets: provider credentials and tenant keys are referenced by the name of
// the environment variable that carries them, or (tenant keys) by a SHA-256.
type File struct {
	Providers map[string]Provider `json:"providers"`
	Models    map[string]Model    `json:"models"`
	Tenants   TenantList          `json:"tenants,omitempty"`
	Auth      Auth                `json:"auth,omitempty"`
	// Services are supervised sidecar processes (see file_services.go).
	Services map[string]ServiceConfig `json:"services,omitempty"`
	// Engines extend the router-backend registry (native is built in).
	Engines map[string]EngineConfig `json:"engines,omitempty"`
	// Relay configures POST /api/v1/relay/chat/completions.
	Relay *RelayConfig `json:"relay,omitempty"`
	// Prices override the shipped price table (internal/pricing): model
	// name or glob → US dollars per million tokens.
	Prices PriceTable `json:"prices,omitempty"`
	// ModelInfo overrides or adds entries of the shipped model table
	// (internal/modelinfo): upstream model name or glob → limits,
	// reasoning and refused parameters.
	ModelInfo ModelInfoTable `json:"model_info,omitempty"`
	// Aliases map another name to a configured model (exact match), e.g.
	// "claude-opus-4-8" → "smart", so clients with fixed default model
	// names need no model entry of their own.
	Aliases map[string]string `json:"aliases,omitempty"`
	// ModelPatterns map glob patterns ("claude-*", "gpt-*"; * is any run
	// of characters, ? one, as in allowed_models) to a configured model; the first pattern in list order that
	// matches a name that is neither a model nor an alias wins.
	ModelPatterns []ModelPattern `json:"model_patterns,omitempty"`
	// DefaultModel serves a request whose model matches nothing above;
	// empty: such a request answers 404 model_not_found.
	DefaultModel string `json:"default_model,omitempty"`
}

// ModelPattern is one entry of File.ModelPatterns.
type ModelPattern struct {
	Match string `json:"match"`
	Model string `json:"model"`
}

// Provider is one upstream API endpoint family, e.g. OpenAI or a local sidecar.
type Provider struct {
	// BaseURL is the API root the surface paths are appended to, as the
	// official SDKs take it: "https://api.openai.com/v1" + "/chat/completions".
	// "service://<name>/v1" points at a service the gateway runs itself.
	BaseURL string `json:"base_url"`
	// APIs lists the request formats the provider speaks: chat
	// (/chat/completions), messages (/messages), responses (/responses).
	APIs []string `json:"apis"`
	// Auth is how the connection's key is sent: bearer (default for chat and
	// responses), x-api-key (default for messages-only providers),
	// x-goog-api-key, or none.
	Auth string `json:"auth,omitempty"`
	// Headers are static, non-secret headers added to every upstream request.
	Headers map[string]string `json:"headers,omitempty"`
	// Connections are the credentials (accounts, keys) of this provider.
	Connections map[string]Connection `json:"connections"`
	// RateLimitHeaders names the explicit mapping of the provider's
	// rate-limit headers (file_quota.go); empty or "none" reads none.
	RateLimitHeaders string `json:"rate_limit_headers,omitempty"`
	// CustomRateLimitHeaders is the mapping when RateLimitHeaders is "custom".
	CustomRateLimitHeaders []HeaderDimension `json:"custom_rate_limit_headers,omitempty"`
	// QuotaAPI polls the provider's usage API for every connection.
	QuotaAPI *QuotaAPI `json:"quota_api,omitempty"`
	// AnthropicBeta decides which of a caller's anthropic-beta values reach
	// this provider (some Anthropic-compatible providers reject betas they
	// do not know); nil passes them all.
	AnthropicBeta *BetaPolicy `json:"anthropic_beta,omitempty"`
}

// BetaPolicy filters the comma-separated anthropic-beta header.
type BetaPolicy struct {
	// Mode: pass (default: every value), drop (all but List) or allow
	// (only List).
	Mode string   `json:"mode,omitempty"`
	List []string `json:"list,omitempty"`
}

// The beta policy modes.
const (
	BetaPass  = "pass"
	BetaDrop  = "drop"
	BetaAllow = "allow"
)

// Connection is one credential of a provider. Each gets its own upstream
// connection pool and, later, its own quota state.
type Connection struct {
	// APIKeyEnv names the environment variable holding the key. Empty means
	// the provider needs no key (auth "none" or a local sidecar).
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MaxConns caps concurrent upstream connections (default
	// OMNIROUTE_UPSTREAM_MAX_CONNS).
	MaxConns int `json:"max_conns,omitempty"`
	// Limits are the connection's per-minute token and request budgets,
	// applied to each model served through it (file_quota.go).
	Limits *Limits `json:"limits,omitempty"`
}

// Model is a name callers put in "model". With one target it is a plain
// alias; with several it is a combo whose strategy picks among them.
type Model struct {
	// Strategy is priority (default: first target, fail over in order),
	// round-robin or fusion.
	Strategy string   `json:"strategy,omitempty"`
	Targets  []Target `json:"targets"`
	// Description is shown by GET /v1/models.
	Description string `json:"description,omitempty"`
	// Fusion configures a model whose strategy is fusion.
	Fusion *Fusion `json:"fusion,omitempty"`
	// Strict refuses a request its target would need changed (an output
	// limit above the model's, a parameter the model refuses) with a 400
	// naming the field, instead of changing it (internal/fit).
	Strict bool `json:"strict,omitempty"`
}

// Target is one (connection, upstream model) a model can be served by.
type Target struct {
	// Connection is "provider/connection", or just "provider" when the
	// provider has exactly one connection.
	Connection string `json:"connection"`
	// Model is the upstream model name written into the forwarded body;
	// empty means the requested name is sent unchanged.
	Model string `json:"model,omitempty"`
	// Weight biases round-robin (default 1).
	Weight int `json:"weight,omitempty"`
	// MaxConcurrent caps the requests the gateway has in flight on this
	// target (0 = no cap); a target at its cap is skipped, never waited for.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// ModelInfo overrides what the model table says about this target's
	// upstream model, for this target only.
	ModelInfo *ModelInfo `json:"model_info,omitempty"`
}

// Tenant is a caller identity. The key itself never appears in the file.
// Its policy fields (limits, budgets, allowed models, class, weight) sit
// beside name and key, as in the management API's key bodies; see
// internal/tenantpolicy and docs/tenants.md.
type Tenant struct {
	Name      string `json:"name"`
	KeyEnv    string `json:"key_env,omitempty"`
	KeySHA256 string `json:"key_sha256,omitempty"`
	tenantpolicy.Policy
}

// Auth decides who may call the gateway.
type Auth struct {
	// Mode: "keys" (only configured tenant keys), "loopback" (configured keys
	// from anywhere; any other key from a loopback peer becomes its own
	// tenant) or "open" (any key from anywhere becomes its own tenant).
	// Default: "keys" when tenants are configured, else "loopback".
	Mode string `json:"mode,omitempty"`
	// AllowAnonymous lets callers without any key in, as tenant "anonymous",
	// subject to Mode's peer rule ("loopback" admits only loopback peers).
	AllowAnonymous bool `json:"allow_anonymous,omitempty"`
}

// Surfaces a provider may speak (the names of internal/dialect's table,
// which the validation below reads).
const (
	APIChat       = "chat"
	APIMessages   = "messages"
	APIResponses  = "responses"
	APIEmbeddings = "embeddings"
)

// Strategies a model may use.
const (
	StrategyPriority   = "priority"
	StrategyRoundRobin = "round-robin"
	StrategyFusion     = "fusion"
)

//go:embed default.json
var defaultJSON []byte

// DefaultFile is the embedded configuration used when OMNIROUTE_CONFIG is
// unset: model "demo" served by the bundled mock provider, callers accepted
// from loopback with any key or none.
func DefaultFile() (*File, error) { return DecodeFile(bytes.NewReader(defaultJSON)) }

// ReadFile loads and validates the configuration at path.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open OMNIROUTE_CONFIG file: %w", err)
	}
	defer f.Close()
	cfg, err := DecodeFile(f)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, nil
}

// maxConfigBytes bounds the file so a wrong path (a log, a binary) fails fast.
const maxConfigBytes = 4 << 20

// DecodeFile decodes strictly (unknown fields, trailing data and wrong types
// are errors) and validates references.
func DecodeFile(r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config is larger than %d bytes", maxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, describeJSONError(err, data)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := position(data, dec.InputOffset())
		return nil, fmt.Errorf("unexpected data after the top-level JSON object near line %d column %d; the file must hold exactly one object", line, col)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

func describeJSONError(err error, data []byte) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Errorf("invalid JSON at line %d column %d: %v", line, col, se)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		return fmt.Errorf("wrong type at line %d column %d: field %q wants %v, got JSON %s", line, col, te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if path, off, ok := unknownField(data, reflect.TypeOf(File{})); ok {
			line, col := position(data, off)
			key := path[strings.LastIndexAny(path, ".]")+1:]
			return fmt.Errorf("line %d column %d: unknown field %q at %s; check the spelling against the schema in README.md", line, col, key, path)
		}
		return fmt.Errorf("%s; check the spelling against the schema in README.md", strings.TrimPrefix(err.Error(), "json: "))
	case errors.Is(err, io.EOF):
		return errors.New("config is empty; want a JSON object with providers and models")
	}
	var fe tenantpolicy.FieldError
	if errors.As(err, &fe) { // from a section decoded entry by entry
		return fe
	}
	return fmt.Errorf("invalid config: %w", err)
}

func position(data []byte, off int64) (line, col int) {
	// encoding/json reports offset -1 for some errors (a type error in a
	// map key that is not valid UTF-8): clamp, never slice out of range.
	off = min(max(off, 0), int64(len(data)))
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// The rules for names, model names, variable names, digests and header
// names: a character class and a length. The length is checked on the
// string (every allowed character is ASCII, so bytes are characters), not
// written as a counted repetition: `{0,127}` compiles to a program of some
// 50 KB, and the five held 160 KB of heap for the life of the process.
var (
	nameRE   = bounded{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`), 1, 64}
	modelRE  = bounded{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`), 1, 128}
	envVarRE = bounded{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), 1, 128}
	hexRE    = bounded{regexp.MustCompile(`^[0-9a-f]*$`), 64, 64}
	headerRE = bounded{regexp.MustCompile(`^[A-Za-z0-9-]*$`), 1, 64}
)

// problems collects a validation's messages, each a JSON path and what
// is wrong there.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// nameRule says what nameRE accepts, for the messages of every id and name
// it checks (one wording beside the one rule).
const nameRule = "1-64 letters, digits, '.', '_' or '-'"

// id adds the problem at path when id, which is what ("provider id"),
// breaks nameRE.
func (p *problems) id(path, what, id string) {
	if !nameRE.MatchString(id) {
		p.add("%s: %s must be %s", path, what, nameRule)
	}
}

// sorted walks a section's entries in name order, so that the problems
// are listed (and the first one is) the same on every run.
func sorted[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// bounded is a pattern of ASCII characters with a length from min to max.
type bounded struct {
	re       *regexp.Regexp
	min, max int
}

// MatchString reports whether s has the length and matches the pattern.
func (b bounded) MatchString(s string) bool {
	return len(s) >= b.min && len(s) <= b.max && b.re.MatchString(s)
}

// Validate checks every field and cross-reference, reporting all problems
// with their JSON paths.
func (f *File) Validate() error {
	var errs problems
	if len(f.Providers) == 0 {
		errs.add("providers: at least one provider is required")
	}
	for pid, p := range sorted(f.Providers) {
		path := "providers." + pid
		errs.id(path, "provider id", pid)
		if err := validateBaseURL(p.BaseURL); err != nil {
			errs.add("%s.base_url: %v", path, err)
		}
		if len(p.APIs) == 0 {
			errs.add("%s.apis: list at least one of %s", path, apiNames())
		}
		seen := map[string]bool{}
		for i, a := range p.APIs {
			if _, ok := dialect.ByName(a); !ok {
				errs.add("%s.apis[%d]: %q is not an API; want one of %s", path, i, a, apiNames())
			}
			if seen[a] {
				errs.add("%s.apis[%d]: %q is listed twice", path, i, a)
			}
			seen[a] = true
		}
		if p.Auth != "" && !slices.Contains(dialect.AuthStyles[:], p.Auth) {
			errs.add("%s.auth: %q is not an auth style; want %s", path, p.Auth, authStyleList)
		}
		if b := p.AnthropicBeta; b != nil {
			switch b.Mode {
			case "", BetaPass, BetaDrop, BetaAllow:
			default:
				errs.add("%s.anthropic_beta.mode: %q is not a mode; want pass, drop or allow", path, b.Mode)
			}
			for i, v := range b.List {
				if v == "" || strings.ContainsAny(v, ", \t") {
					errs.add("%s.anthropic_beta.list[%d]: %q is not one beta name (no commas or spaces)", path, i, v)
				}
			}
		}
		for _, h := range slices.Sorted(maps.Keys(p.Headers)) {
			if !headerRE.MatchString(h) || isReservedHeader(h) {
				errs.add("%s.headers.%s: not an allowed header name (letters, digits and '-'; not a hop-by-hop, auth or length header)", path, h)
			}
		}
		if len(p.Connections) == 0 {
			errs.add("%s.connections: at least one connection is required (use {\"default\": {}} for a keyless provider)", path)
		}
		for cid, c := range sorted(p.Connections) {
			cpath := path + ".connections." + cid
			errs.id(cpath, "connection id", cid)
			if c.APIKeyEnv != "" && !envVarRE.MatchString(c.APIKeyEnv) {
				errs.add("%s.api_key_env: %q is not an environment variable name", cpath, c.APIKeyEnv)
			}
			if c.APIKeyEnv == "" && p.Auth != "none" && !strings.HasPrefix(p.BaseURL, "service://") && !isLoopbackURL(p.BaseURL) {
				errs.add("%s.api_key_env: a remote provider needs the name of the variable holding its key (or set providers.%s.auth to \"none\")", cpath, pid)
			}
			if c.MaxConns < 0 {
				errs.add("%s.max_conns: must be 0 (default) or positive", cpath)
			}
		}
	}
	if len(f.Models) == 0 {
		errs.add("models: at least one model is required")
	}
	for name, m := range sorted(f.Models) {
		path := "models." + name
		if !modelRE.MatchString(name) {
			errs.add("%s: model name must be 1-128 characters of letters, digits and ._:/@+-", path)
		}
		switch m.Strategy {
		case "", StrategyPriority, StrategyRoundRobin, StrategyFusion:
		default:
			errs.add("%s.strategy: %q is not a strategy; want priority, round-robin or fusion", path, m.Strategy)
		}
		if len(m.Targets) == 0 {
			errs.add("%s.targets: at least one target is required", path)
		}
		for i, t := range m.Targets {
			tpath := fmt.Sprintf("%s.targets[%d]", path, i)
			if _, _, err := f.ResolveConnection(t.Connection); err != nil {
				errs.add("%s.connection: %v", tpath, err)
			}
			if t.Model != "" && !modelRE.MatchString(t.Model) {
				errs.add("%s.model: %q is not a valid upstream model name", tpath, t.Model)
			}
			if t.Weight < 0 || t.Weight > 1000 {
				errs.add("%s.weight: must be between 0 (default 1) and 1000", tpath)
			}
		}
	}
	f.validateModelRouting(&errs)
	names := map[string]bool{}
	for i, t := range f.Tenants {
		path := fmt.Sprintf("tenants[%d]", i)
		if !nameRE.MatchString(t.Name) {
			errs.add("%s.name: want %s", path, nameRule)
		}
		if names[t.Name] {
			errs.add("%s.name: %q is used twice", path, t.Name)
		}
		names[t.Name] = true
		switch {
		case (t.KeyEnv == "") == (t.KeySHA256 == ""):
			errs.add("%s: set exactly one of key_env (variable holding the key) or key_sha256 (hex SHA-256 of the key)", path)
		case t.KeyEnv != "" && !envVarRE.MatchString(t.KeyEnv):
			errs.add("%s.key_env: %q is not an environment variable name", path, t.KeyEnv)
		case t.KeySHA256 != "" && !hexRE.MatchString(t.KeySHA256):
			errs.add("%s.key_sha256: want 64 lower-case hex digits (sha256sum of the key)", path)
		}
	}
	switch f.Auth.Mode {
	case "", "keys", "loopback", "open":
	default:
		errs.add("auth.mode: %q is not a mode; want keys, loopback or open", f.Auth.Mode)
	}
	if f.Auth.Mode == "keys" && len(f.Tenants) == 0 && !f.Auth.AllowAnonymous {
		errs.add("auth.mode: \"keys\" with no tenants would reject every caller; add tenants or set allow_anonymous")
	}
	for _, v := range fileValidators {
		errs = append(errs, v(f)...)
	}
	if len(errs) > 0 {
		return Errors(errs)
	}
	return nil
}

// fileValidators lets each subsystem's file (file_<subsystem>.go) check the
// sections it owns without editing Validate. Each returns messages that
// start with the JSON path they are about.
var fileValidators []func(*File) []string

// AuthMode returns the effective mode after defaults.
func (f *File) AuthMode() string {
	if f.Auth.Mode != "" {
		return f.Auth.Mode
	}
	if len(f.Tenants) > 0 {
		return "keys"
	}
	return "loopback"
}

// ResolveConnection splits "provider/connection" (or "provider" with a single
// connection) and checks both exist.
func (f *File) ResolveConnection(ref string) (provider, connection string, err error) {
	pid, cid, hasConn := strings.Cut(ref, "/")
	p, ok := f.Providers[pid]
	if !ok {
		return "", "", fmt.Errorf("unknown provider %q in %q; want provider/connection naming an entry of providers", pid, ref)
	}
	if !hasConn {
		if len(p.Connections) != 1 {
			return "", "", fmt.Errorf("provider %q has %d connections; name one as %s/<connection>", pid, len(p.Connections), pid)
		}
		for c := range p.Connections {
			cid = c
		}
	}
	if _, ok := p.Connections[cid]; !ok {
		return "", "", fmt.Errorf("unknown connection %q of provider %q", cid, pid)
	}
	return pid, cid, nil
}

func validateBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return fmt.Errorf("%s is not a URL; want e.g. https://api.openai.com/v1", ShownURL(s))
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%s has no host", ShownURL(s))
		}
	case "service":
		if u.Host == "" {
			return fmt.Errorf("%s names no service; want service://<name>/v1", ShownURL(s))
		}
	default:
		return fmt.Errorf("%s has scheme %q; want http, https or service", ShownURL(s), u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s must not carry a query, fragment or credentials; put keys in api_key_env", ShownURL(s))
	}
	return nil
}

// ShownURL is a configured URL as an error or a log may show it, quoted:
// its user information, query and fragment (where credentials and
// tokens go) are replaced by [REDACTED], so that a refused base_url
// never echoes its secret into the reload API's answer or the log. Text
// that does not parse as a URL is not shown at all.
func ShownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the value, not shown: it does not parse as a URL)"
	}
	out := ""
	if u.Scheme != "" {
		out = u.Scheme + ":"
	}
	if u.Host != "" || u.User != nil {
		out += "//"
		if u.User != nil {
			out += "[REDACTED]@"
		}
		out += u.Host
	}
	out += u.EscapedPath()
	if u.Opaque != "" {
		out += "[REDACTED]"
	}
	if u.RawQuery != "" || u.ForceQuery {
		out += "?[REDACTED]"
	}
	if u.Fragment != "" {
		out += "#[REDACTED]"
	}
	return strconv.Quote(out)
}

func isLoopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "127.0.0.1" || h == "localhost" || h == "::1"
}

// authStyleList names the auth styles for the error that refuses another
// ("bearer, x-api-key, x-goog-api-key or none").
var authStyleList = strings.Join(dialect.AuthStyles[:len(dialect.AuthStyles)-1], ", ") + " or " + dialect.AuthStyles[len(dialect.AuthStyles)-1]

// isReservedHeader reports headers a provider config may not set because the
// gateway owns them: the hop-by-hop ones and every auth style's key header
// (the dialect table's).
func isReservedHeader(h string) bool {
	h = strings.ToLower(h)
	switch h {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
		"te", "trailer", "proxy-authorization", "cookie":
		return true
	}
	for _, s := range dialect.AuthStyles {
		if a := dialect.AuthHeader(s); a != "" && strings.EqualFold(a, h) {
			return true
		}
	}
	return false
}

// validateModelRouting checks aliases, model patterns and the default
// model: each must name a configured model, an alias must not shadow a
// model, and a pattern must be a valid model glob.
func (f *File) validateModelRouting(errs *problems) {
	known := func(m string) bool { _, ok := f.Models[m]; return ok }
	for _, a := range slices.Sorted(maps.Keys(f.Aliases)) {
		path := "aliases." + a
		if !modelRE.MatchString(a) {
			errs.add("%s: alias name must be 1-128 characters of letters, digits and ._:/@+-", path)
		}
		if known(a) {
			errs.add("%s: %q is already a model; an alias may not shadow it", path, a)
		}
		if !known(f.Aliases[a]) {
			errs.add("%s: %q is not a configured model; name one of models.*", path, f.Aliases[a])
		}
	}
	for i, p := range f.ModelPatterns {
		path := fmt.Sprintf("model_patterns[%d]", i)
		if err := tenantpolicy.ValidPattern(p.Match); err != nil {
			errs.add("%s.match: %v", path, err)
		}
		if !known(p.Model) {
			errs.add("%s.model: %q is not a configured model; name one of models.*", path, p.Model)
		}
	}
	if f.DefaultModel != "" && !known(f.DefaultModel) {
		errs.add("default_model: %q is not a configured model; name one of models.*", f.DefaultModel)
	}
}

// apiNames lists the API names a provider may give, for error messages.
func apiNames() string {
	var names []string
	for _, id := range dialect.All {
		names = append(names, id.String())
	}
	return strings.Join(names, ", ")
}
