// Package relayroute is the external-gateway relay: POST
// /api/v1/relay/chat/completions with a relay token, served natively (the
// ordinary pipeline, in-process) or by the Bifrost sidecar, chosen per
// request (OMNIROUTE_RELAY_BACKEND: native, bifrost, auto). It owns the
// relay tokens and their rate limits, the backend's choice and its
// fallback reasons, the Bifrost endpoint, its cooldown and its client
// pool, and the relay's health section. It does not import transport:
// the pipeline walks the relay's entry with its own steps (transport's
// relayWalk: the ingest byte budget admits the body before it is read,
// as on every body route) and reaches the relay through Route's methods;
// the relay reaches the pipeline through the port it declares (Call).
package relayroute

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/upstream"
)

// Token is a relay token the route checked (Admit), which the pipeline
// holds for the request and hands back to Scope and Serve.
type Token = relay.Token

// Route is the relay route's state: its configuration, tokens, manifest
// and Bifrost cooldowns, and the pooled clients of the Bifrost endpoints
// it has used.
type Route struct {
	env      config.RelayEnv
	up       config.UpstreamEnv
	tokens   *relay.Tokens
	manifest relay.Manifest
	cool     relay.Cooldowns
	engine   *engines.Engine   // the registry's relay backend, or nil
	mgr      *services.Manager // the supervised services (a supervised Bifrost)
	clk      clock.Clock
	log      *slog.Logger
	m        counters

	mu      sync.Mutex
	clients map[string]*upstream.Client
}

// counters are the relay's counters, registered by New under the names of
// the gateway's one metric table (transport/metric): no family's name is
// written here.
type counters struct {
	Native, Bifrost, BifrostFailures *metrics.Counter
	Fallback                         [relay.NumFallbacks]*metrics.Counter
	Rejected                         [relay.NumRejections]*metrics.Counter
}

// Options are what a Route is built from.
type Options struct {
	Env      config.RelayEnv
	Upstream config.UpstreamEnv          // the upstream pool's limits, which Bifrost's clients share
	File     *config.RelayConfig         // the config file's relay section, or nil
	Getenv   func(string) (string, bool) // reads the tokens' environment variables
	Engine   *engines.Engine             // the registry's relay backend, or nil
	Services *services.Manager           // the supervised services
	Clock    clock.Clock
	Log      *slog.Logger
	// Metrics is the set the relay's counters and its cooldown gauge are
	// registered in.
	Metrics *metrics.Set
}

// New builds the relay route; a token that cannot be read is an error.
func New(o Options) (*Route, error) {
	r := &Route{env: o.Env, up: o.Upstream, engine: o.Engine, mgr: o.Services, clk: o.Clock, log: o.Log,
		clients: map[string]*upstream.Client{}}
	var cfg []config.RelayToken
	if f := o.File; f != nil {
		cfg = f.Tokens
		if f.Providers != nil {
			r.manifest = relay.Manifest(f.Providers)
		}
	}
	var err error
	if r.tokens, err = relay.NewTokens(cfg, o.Getenv); err != nil {
		return nil, err
	}
	r.register(o.Metrics)
	return r, nil
}

// register registers the relay's counters, one per backend, fallback
// reason and rejection reason (the reasons' own tables), and the gauge of
// the Bifrost cooldown.
func (r *Route) register(set *metrics.Set) {
	m := &r.m
	m.Native = set.NewCounter(metric.RelayRequestsTotal + `{backend="native"}`)
	m.Bifrost = set.NewCounter(metric.RelayRequestsTotal + `{backend="bifrost"}`)
	m.BifrostFailures = set.NewCounter(metric.RelayBifrostFailuresTotal)
	for _, reason := range relay.Fallbacks() {
		m.Fallback[reason] = set.NewCounter(fmt.Sprintf(metric.RelayFallbacksTotal+`{reason=%q}`, reason))
	}
	for _, reason := range relay.Rejections() {
		m.Rejected[reason] = set.NewCounter(fmt.Sprintf(metric.RelayRejectedTotal+`{reason=%q}`, reason))
	}
	set.NewGauge(metric.RelayBifrostCooldownSeconds, func() float64 { return r.CooldownRemaining().Seconds() })
}

// ErrNotEnabled answers the relay route when no relay token is configured.
var ErrNotEnabled = apierror.New(apierror.CodeRelayNotEnabled)

// Enabled reports whether any relay token is configured: without one the
// route answers ErrNotEnabled.
func (r *Route) Enabled() bool { return r.tokens.Len() > 0 }

// backend resolves the backend for a request: the configured one, or,
// when none is configured, auto if a Bifrost endpoint is available now
// and native otherwise. forced reports a configured bifrost.
func (r *Route) backend(base string) (b config.RelayBackend, forced bool) {
	b = r.env.Backend()
	if b == "" {
		if base != "" {
			return config.RelayAuto, false
		}
		return config.RelayNative, false
	}
	return b, b == config.RelayBifrost
}

// Endpoint returns the Bifrost base URL to use now, or "" and why there
// is none: BIFROST_BASE_URL first, else the registry's relay engine (an
// external base URL, or a supervised service that is running and not
// failing its health checks).
func (r *Route) Endpoint() (base, why string) {
	if !r.env.BifrostEnabled {
		return "", "Bifrost is disabled (BIFROST_ENABLED=0)"
	}
	e := r.engine
	if e != nil && e.Lifecycle == engines.Disabled {
		return "", "the relay engine " + e.ID + " is disabled in the config file"
	}
	if u := r.env.BifrostURL(); u != "" {
		return u, ""
	}
	if e == nil {
		return "", "no Bifrost endpoint is configured: set BIFROST_BASE_URL or declare a bifrost service"
	}
	switch e.Lifecycle {
	case engines.External:
		if e.BaseURL != "" {
			return strings.TrimSuffix(e.BaseURL, "/"), ""
		}
		return "", "engine " + e.ID + " has no base_url and BIFROST_BASE_URL is unset"
	case engines.Supervised:
		h, ok := r.mgr.Get(e.Service)
		if !ok {
			return "", "service " + e.Service + " is not declared"
		}
		if st := h.Status(); !st.Usable() {
			return "", "the " + e.Service + " service is " + string(st.State) + " (health " + string(st.Health) + "); POST /api/services/" + e.Service + "/start"
		}
		return "http://" + h.Addr(), ""
	}
	return "", "engine " + e.ID + " cannot serve as relay"
}

// Authenticate checks a relay token (raw, the caller's credential) at
// now: present, configured, not expired. A refusal is counted under its
// reason and returned. It is the ExpectHandler's check too, so an upload
// with a bad token is refused before its body is sent.
func (r *Route) Authenticate(raw []byte, now time.Time) (*relay.Token, *apierror.Error) {
	if len(raw) == 0 {
		r.m.Rejected[relay.RejectMissingToken].Inc()
		return nil, apierror.New(relay.RejectMissingToken.Code())
	}
	tok := r.tokens.Lookup(raw)
	if tok == nil {
		r.m.Rejected[relay.RejectInvalidToken].Inc()
		return nil, apierror.New(relay.RejectInvalidToken.Code(), "invalid relay token: it is not configured on this gateway")
	}
	if tok.Expired(now) {
		r.m.Rejected[relay.RejectExpiredToken].Inc()
		return nil, apierror.New(relay.RejectExpiredToken.Code(), tok.Name, tok.Expires.UTC().Format(time.RFC3339))
	}
	return tok, nil
}

// Admit is the relay route's identify: the token checked (Authenticate)
// and one request of its rate limit spent, with the token's name and
// limit in the answer's headers h. It returns the token, or the refusal
// to answer.
func (r *Route) Admit(h *fasthttp.ResponseHeader, raw []byte, now time.Time) (*relay.Token, *apierror.Error) {
	tok, e := r.Authenticate(raw, now)
	if e != nil {
		return nil, e
	}
	h.Set("X-Relay-Token", tok.Name)
	if l := tok.Limit; l != nil {
		ok, wait, remaining := l.Allow(now)
		h.Set("X-RateLimit-Limit", strconv.Itoa(l.Requests))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		if !ok {
			r.m.Rejected[relay.RejectRateLimited].Inc()
			secs := int((wait + time.Second - 1) / time.Second)
			h.Set("X-RateLimit-Scope", "token")
			return nil, apierror.New(relay.RejectRateLimited.Code(),
				"relay token "+strconv.Quote(tok.Name)+" is over its rate limit of "+strconv.Itoa(l.Requests)+" requests per window; retry after "+strconv.Itoa(max(secs, 1))+"s").Retry(max(secs, 1))
		}
	}
	return tok, nil
}

// Scope refuses a model the token does not allow (nil when it does).
func (r *Route) Scope(tok *relay.Token, model []byte) *apierror.Error {
	if tok.Allows(string(model)) {
		return nil
	}
	r.m.Rejected[relay.RejectModelNotAllowed].Inc()
	return apierror.New(relay.RejectModelNotAllowed.Code(), "model "+strconv.Quote(string(model))+" is not allowed by relay token "+strconv.Quote(tok.Name))
}

// Serve serves a relay request the pipeline admitted (its token tok) on
// the backend chosen now: natively, or by Bifrost, falling back to native
// (unless bifrost is forced) when Bifrost is ineligible for the model,
// cooling down, or fails before anything reached the caller. It reports
// whether a stream now owns the call.
func (r *Route) Serve(c Call, tok *relay.Token) bool {
	base, why := r.Endpoint()
	backend, forced := r.backend(base)
	stream := c.Stream()
	switch backend {
	case config.RelayNative:
		return r.native(c, relay.ReasonNone, "")
	case config.RelayBifrost:
		if base == "" {
			c.Fail(apierror.New(apierror.CodeBifrostUnavailable, why))
			return false
		}
		if stream && !bool(r.env.BifrostStreaming) {
			c.Fail(apierror.New(apierror.CodeBifrostStreamingDisabled))
			return false
		}
	}
	if !forced {
		if base == "" {
			return r.native(c, relay.ReasonNone, "")
		}
		if r.manifest != nil {
			if ok, reason := r.manifest.Eligibility(providerOf(c.Catalog(), c.Model())); !ok {
				return r.native(c, reason, reason.String())
			}
		}
		if stream && !bool(r.env.BifrostStreaming) {
			return r.native(c, relay.ReasonIneligible, relay.ReasonIneligible.String()+"; streaming disabled (BIFROST_STREAMING_ENABLED=0)")
		}
		if rem := r.cool.Remaining(base, r.clk.Now()); rem > 0 {
			return r.native(c, relay.ReasonCooldown, relay.ReasonCooldown.String()+"; remaining="+strconv.FormatInt(rem.Milliseconds(), 10)+"ms")
		}
	}
	outcome, streaming, detail := r.bifrost(c, base, tok, forced)
	switch outcome {
	case bifrostDone:
		return streaming
	case bifrostCanceled:
		return false
	}
	r.m.BifrostFailures.Inc()
	if forced {
		c.Ctx().Response.Header.Set("X-Bifrost-Fallback", edge.RelayPath)
		c.Fail(apierror.New(apierror.CodeBadGateway, detail))
		return false
	}
	r.cool.Record(base, r.clk.Now(), r.env.BifrostCooldown.Duration())
	r.log.Warn("bifrost relay failed; cooling it and serving natively", "base", base, "cooldownMs", int64(r.env.BifrostCooldown), "err", detail)
	return r.native(c, relay.ReasonError, relay.ReasonError.String()+"; "+detail)
}

// native serves the request through the native pipeline. reason is the
// fallback reason (ReasonNone when native was chosen, not fallen back
// to); value is the X-Routing-Fallback header.
func (r *Route) native(c Call, reason relay.Fallback, value string) bool {
	h := &c.Ctx().Response.Header
	h.Set("X-Routing-Backend", "native")
	if reason != relay.ReasonNone {
		h.Set("X-Routing-Fallback", value)
		h.Set("X-Routing-Fallback-Reason", reason.String())
		r.m.Fallback[reason].Inc()
	}
	r.m.Native.Inc()
	return c.Native()
}

// providerOf returns the provider a relay request is for: the provider
// of the gateway model's first chat target, else the part before "/" of
// a "provider/model" name, else "".
func providerOf(cat *catalog.Catalog, model []byte) string {
	if m := cat.Model(model); m != nil {
		if ts := m.TargetsFor(catalog.Chat); len(ts) > 0 {
			return ts[0].Conn.Provider.ID
		}
	}
	if p, _, ok := strings.Cut(string(model), "/"); ok {
		return p
	}
	return ""
}

// CooldownRemaining is how long the Bifrost endpoint in use now stays
// cooled (the relay's cooldown gauge).
func (r *Route) CooldownRemaining() time.Duration {
	base, _ := r.Endpoint()
	return r.cool.Remaining(base, r.clk.Now())
}

// Health is the relay's section of /api/monitoring/health.
func (r *Route) Health() (any, string) {
	base, why := r.Endpoint()
	backend, _ := r.backend(base)
	out := map[string]any{
		"configuredBackend": string(r.env.Backend()),
		"backend":           string(backend),
		"tokens":            r.tokens.Len(),
		"bifrost": map[string]any{
			"enabled":             bool(r.env.BifrostEnabled),
			"streaming":           bool(r.env.BifrostStreaming),
			"endpoint":            base,
			"unavailableReason":   why,
			"cooldownRemainingMs": r.cool.Remaining(base, r.clk.Now()).Milliseconds(),
			"timeoutMs":           int64(r.env.BifrostTimeout),
		},
	}
	return out, "ok"
}

// Brief is the relay's health section for callers the management routes
// refuse: the backend choice, not the endpoint or why it is unavailable;
// detail says where the rest is shown.
func Brief(body any, detail string) any {
	full, _ := body.(map[string]any)
	return map[string]any{"backend": full["backend"], "configuredBackend": full["configuredBackend"], "detail": detail}
}

// client returns the pooled upstream client for a Bifrost host:port.
func (r *Route) client(hostport string, tls bool) *upstream.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[hostport]; ok {
		return c
	}
	u := r.up
	timeout := r.env.BifrostTimeout.Duration()
	o := upstream.Options{Addr: hostport, TLS: tls, MaxConns: int(u.MaxConns),
		ConnectTimeout: min(u.ConnectTimeout.Duration(), timeout), TTFBTimeout: timeout,
		TotalTimeout: max(u.TotalTimeout.Duration(), timeout), MaxResponseBytes: int(u.MaxResponseBytes)}
	for _, h := range r.mgr.All() {
		if !tls && h.Addr() == hostport {
			o.Verify = h.VerifyServer // a supervised Bifrost: only its own child
		}
	}
	c := upstream.New(o)
	r.clients[hostport] = c
	return c
}

// Close closes the Bifrost clients.
func (r *Route) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		c.Close()
	}
}
