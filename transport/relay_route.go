package transport

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/upstream"
)

// relayRoute is POST /api/v1/relay/chat/completions: relay-token auth,
// then either the native pipeline (in-process) or the Bifrost sidecar,
// chosen by OMNIROUTE_RELAY_BACKEND per request.
type relayRoute struct {
	env      config.RelayEnv
	tokens   *relay.Tokens
	manifest relay.Manifest
	cool     relay.Cooldowns
	engine   *engines.Engine // the registry's relay backend, or nil

	mu      sync.Mutex
	clients map[string]*upstream.Client
	m       relayMetrics
}

type relayMetrics struct {
	native, bifrost, bifrostFailures *metrics.Counter
	fallback                         [relay.NumFallbacks]*metrics.Counter
	rejected                         [relay.NumRejections]*metrics.Counter
}

func (g *Gateway) newRelayRoute() (*relayRoute, error) {
	r := &relayRoute{env: g.opts.Env.Relay, clients: map[string]*upstream.Client{}, engine: g.side.engines.RelayBackend()}
	var cfg []config.RelayToken
	if f := g.opts.File.Relay; f != nil {
		cfg = f.Tokens
		if f.Providers != nil {
			r.manifest = relay.Manifest(f.Providers)
		}
	}
	var err error
	if r.tokens, err = relay.NewTokens(cfg, g.opts.Getenv); err != nil {
		return nil, err
	}
	return r, nil
}

// backend resolves the backend for a request: the configured one, or,
// when none is configured, auto if a Bifrost endpoint is available now
// and native otherwise. forced reports a configured bifrost.
func (r *relayRoute) backend(base string) (b config.RelayBackend, forced bool) {
	b = r.env.Backend()
	if b == "" {
		if base != "" {
			return config.RelayAuto, false
		}
		return config.RelayNative, false
	}
	return b, b == config.RelayBifrost
}

// bifrostEndpoint returns the Bifrost base URL to use now, or "" and why
// there is none: BIFROST_BASE_URL first, else the registry's relay engine
// (an external base URL, or a supervised service that is running and not
// failing its health checks).
func (g *Gateway) bifrostEndpoint() (base, why string) {
	r := g.side.relay
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
		h, ok := g.side.mgr.Get(e.Service)
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

// relayChat handles the relay route. It runs on a pooled call so that the
// native path is exactly the /v1/chat/completions pipeline, in-process.
func (g *Gateway) relayChat(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, start time.Time) {
	g.run(g.acquireCall(ctx, edge.Relay, rid, host, start), (*call).relayHandle)
}

// relayHandle is the relay route's walk: the entry's steps around the
// relay token's own check (in place of identify), then the backend's
// choice; the native backend is the model walk (handle).
func (c *call) relayHandle() bool {
	g, ctx := c.g, c.ctx
	r := g.side.relay
	if !c.open() {
		return false
	}
	if r.tokens.Len() == 0 {
		c.fail(errRelayNotEnabled)
		return false
	}
	if !c.jsonBody() {
		return false
	}
	raw := credential(&ctx.Request.Header)
	now := g.clk.Now()
	tok, e := r.authenticate(raw, now)
	if e != nil {
		c.fail(e)
		return false
	}
	h := &ctx.Response.Header
	h.Set("X-Relay-Token", tok.Name)
	if l := tok.Limit; l != nil {
		ok, wait, remaining := l.Allow(now)
		h.Set("X-RateLimit-Limit", strconv.Itoa(l.Requests))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		if !ok {
			r.m.rejected[relay.RejectRateLimited].Inc()
			secs := int((wait + time.Second - 1) / time.Second)
			h.Set("X-RateLimit-Scope", "token")
			c.fail(apierror.New(relay.RejectRateLimited.Code(),
				"relay token "+strconv.Quote(tok.Name)+" is over its rate limit of "+strconv.Itoa(l.Requests)+" requests per window; retry after "+strconv.Itoa(max(secs, 1))+"s").Retry(max(secs, 1)))
			return false
		}
	}
	// The byte stage of admission, before any byte of the body is read
	// (like every body route; an Expect: 100-continue upload was decided
	// in the ExpectHandler and is adopted here), whichever backend serves
	// it: the body is read to choose the backend. The relay token's
	// tenant id is the fairness key in the ingest queue.
	c.tenant = c.rc.tenants.IDForKey(raw)
	if !c.ingest() || !c.scanBody() {
		return false
	}
	model := string(c.scan.Model)
	if !tok.Allows(model) {
		r.m.rejected[relay.RejectModelNotAllowed].Inc()
		c.fail(apierror.New(relay.RejectModelNotAllowed.Code(), "model "+strconv.Quote(model)+" is not allowed by relay token "+strconv.Quote(tok.Name)))
		return false
	}
	c.relayed = true

	base, why := g.bifrostEndpoint()
	backend, forced := r.backend(base)
	switch backend {
	case config.RelayNative:
		return c.relayNative(relay.ReasonNone, "")
	case config.RelayBifrost:
		if base == "" {
			c.fail(apierror.New(apierror.CodeBifrostUnavailable, why))
			return false
		}
		if c.scan.Stream && !bool(r.env.BifrostStreaming) {
			c.fail(apierror.New(apierror.CodeBifrostStreamingDisabled))
			return false
		}
	}
	if !forced {
		if base == "" {
			return c.relayNative(relay.ReasonNone, "")
		}
		if r.manifest != nil {
			if ok, reason := r.manifest.Eligibility(providerOf(c.rc.cat, model)); !ok {
				return c.relayNative(reason, reason.String())
			}
		}
		if c.scan.Stream && !bool(r.env.BifrostStreaming) {
			return c.relayNative(relay.ReasonIneligible, relay.ReasonIneligible.String()+"; streaming disabled (BIFROST_STREAMING_ENABLED=0)")
		}
		if rem := r.cool.Remaining(base, g.clk.Now()); rem > 0 {
			return c.relayNative(relay.ReasonCooldown, relay.ReasonCooldown.String()+"; remaining="+strconv.FormatInt(rem.Milliseconds(), 10)+"ms")
		}
	}
	outcome, streaming, detail := c.relayBifrost(base, tok, forced)
	switch outcome {
	case bifrostDone:
		return streaming
	case bifrostCanceled:
		return false
	}
	r.m.bifrostFailures.Inc()
	if forced {
		ctx.Response.Header.Set("X-Bifrost-Fallback", edge.RelayPath)
		c.fail(apierror.New(apierror.CodeBadGateway, detail))
		return false
	}
	r.cool.Record(base, g.clk.Now(), r.env.BifrostCooldown.Duration())
	g.log.Warn("bifrost relay failed; cooling it and serving natively", "base", base, "cooldownMs", int64(r.env.BifrostCooldown), "err", detail)
	return c.relayNative(relay.ReasonError, relay.ReasonError.String()+"; "+detail)
}

// relayNative serves the request through the native pipeline. reason is
// the fallback reason (ReasonNone when native was chosen, not fallen back
// to); value is the X-Routing-Fallback header.
func (c *call) relayNative(reason relay.Fallback, value string) bool {
	r := c.g.side.relay
	h := &c.ctx.Response.Header
	h.Set("X-Routing-Backend", "native")
	if reason != relay.ReasonNone {
		h.Set("X-Routing-Fallback", value)
		h.Set("X-Routing-Fallback-Reason", reason.String())
		r.m.fallback[reason].Inc()
	}
	r.m.native.Inc()
	return c.handle()
}

var errRelayNotEnabled = apierror.New(apierror.CodeRelayNotEnabled)

// authenticate checks a relay token (raw, the caller's credential) at now:
// present, configured, not expired. A refusal is counted under its reason
// and returned. It is the ExpectHandler's check too, so an upload with a
// bad token is refused before its body is sent.
func (r *relayRoute) authenticate(raw []byte, now time.Time) (*relay.Token, *apierror.Error) {
	if len(raw) == 0 {
		r.m.rejected[relay.RejectMissingToken].Inc()
		return nil, apierror.New(relay.RejectMissingToken.Code())
	}
	tok := r.tokens.Lookup(raw)
	if tok == nil {
		r.m.rejected[relay.RejectInvalidToken].Inc()
		return nil, apierror.New(relay.RejectInvalidToken.Code(), "invalid relay token: it is not configured on this gateway")
	}
	if tok.Expired(now) {
		r.m.rejected[relay.RejectExpiredToken].Inc()
		return nil, apierror.New(relay.RejectExpiredToken.Code(), tok.Name, tok.Expires.UTC().Format(time.RFC3339))
	}
	return tok, nil
}

// providerOf returns the provider a relay request is for: the part before
// "/" of a "provider/model" name, else the provider of the gateway model's
// first chat target, else "".
func providerOf(cat *catalog.Catalog, model string) string {
	if m := cat.Model([]byte(model)); m != nil {
		if ts := m.TargetsFor(catalog.Chat); len(ts) > 0 {
			return ts[0].Conn.Provider.ID
		}
	}
	if p, _, ok := strings.Cut(model, "/"); ok {
		return p
	}
	return ""
}

// caller returns the caller's tenant: the relay token's (already
// checked) for a relayed call, else the key resolution of the front door.
func (c *call) caller() (tenant.ID, tenant.Decision) {
	if c.relayed {
		return c.tenant, tenantAllowed
	}
	id, e, decision := c.g.identifyCaller(c.rc, credential(&c.ctx.Request.Header), edge.IsLoopback(c.ctx))
	c.ten.entry = e
	return id, decision
}

// untrack undoes track, so that a relay call that falls back to the native
// pipeline can be tracked again by it.
func (c *call) untrack() {
	g := c.g
	if c.life.token != (edge.Token{}) {
		g.inflight.Unregister(c.life.token)
		c.life.token = edge.Token{}
	}
	if c.life.stopCtx != nil {
		c.life.stopCtx()
		c.life.stopCtx = nil
	}
}

// splitBase splits a Bifrost base URL into host:port, TLS and path prefix.
func splitBase(base string) (hostport string, tls bool, prefix string, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", false, "", err
	}
	hostport = u.Host
	tls = u.Scheme == "https"
	if u.Port() == "" {
		if tls {
			hostport += ":443"
		} else {
			hostport += ":80"
		}
	}
	return hostport, tls, strings.TrimSuffix(u.Path, "/"), nil
}

// sanitizeDetail shortens an error for a header or message.
func sanitizeDetail(s string) string { return sanitize.Message(s, "relay failure") }
