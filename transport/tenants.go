package transport

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/port"
)

// The tenant layer in the request path (docs/tenants.md):
//
//	authentication (identifyCaller: the key snapshot, then the resolver)
//	→ tenant limits (reserveTenant: every counter in one step, no message)
//	→ admission → provider
//	→ settle (finishTenant: the limiter from the real usage, once; one
//	  record to the request log, handed over without waiting).
//
// The pipeline reaches the tenant layer's actors (keys, tenant limits,
// request log, the tenants' shares) only through Tenants, the port it
// declares here; the composition root builds the layer and implements
// the port (transport/gateway/tenants). The management routes are in
// package ops (ops/keys.go, ops/requests.go).

// Store is the persistence the tenant layer uses (keys, request log,
// usage), re-exported for hosts that back it with their own store.
type Store = store.Store

// Tenants is the pipeline's port on the tenant layer (package port
// declares it once; the root's transport/gateway/tenants implements it).
type Tenants = port.Tenants

type targetPrice struct {
	p  pricing.Price
	ok bool
}

// tenantCall is one request's part of the tenant layer; it lives in the
// pooled call and is zeroed with it.
type tenantCall struct {
	// entry is the caller's key (config-file tenant or run-time key);
	// nil for anonymous callers and unconfigured keys let in by the auth
	// mode.
	entry *ikeys.Entry
	res   tenantlimit.Reservation
	// req is the reservation's request, and rec the request's record for
	// the log: here in the pooled call, not on the stack, since they
	// pass through the port (an interface), whose pointer arguments the
	// compiler cannot keep on the stack.
	req tenantlimit.Request
	rec store.Record
	// hdr are the rate-limit headers, rendered at the reservation and set
	// on the answer whatever it is (applyTenantHeaders).
	hdr    tenantlimit.Headers
	hasHdr bool
	// shared is what the request took from the tenant's cluster pools
	// (cluster mode; cluster.go).
	shared sharedRes
	// charged: chargeRequest ran (a count, or a refusal before routing);
	// checked: the limiter judged the request (reserveTenant); passed: it
	// let it through (or the tenant has no limits), so the request is
	// logged as a record of its own. A request refused before it passed
	// is counted in aggregate (logRefusal).
	charged, checked, passed bool
	// meter: the provider's usage report is read (a limited tenant, or the
	// request log is on).
	meter bool
	// The reservation's estimate: tokens and nano-dollars, and the part of
	// the cost that is input (charged for an attempt the provider may have
	// started on, as the provider ledger charges it).
	est, estCost, inCost int64
	// What attempts that did not serve the request cost (summed), and the
	// tokens every usage report said.
	tokens, cost    int64
	in, out, cached int64
	errCode         string
	ttft            time.Duration
}

// The tenant layer's sources (transport/gateway/tenants.Source): what
// the composition root builds it from, and where it hands the port.

// Store is the node's store (Options.Store, opened by the root).
func (a *Assembly) Store() store.Store { return a.g.opts.Store }

// Env is the environment the gateway runs on.
func (a *Assembly) Env() config.Env { return a.g.opts.Env }

// RequestLogLines is the request log's line logger: on
// Options.RequestLogOutput (nil: stdout), in the gateway's log format,
// behind the gateway's redactor.
func (a *Assembly) RequestLogLines() *slog.Logger {
	out := a.g.opts.RequestLogOutput
	if out == nil {
		out = os.Stdout
	}
	return logging.Redacting(logging.New(string(a.g.opts.Env.Server.LogFormat), "info", out), a.g.redact)
}

// KeysConfig is the config in force's tenant resolver and config-file
// tenants, for the keys actor.
func (a *Assembly) KeysConfig() (*tenant.Resolver, []keys.ConfigTenant) {
	rc := a.g.rc.Load()
	return rc.tenants, rc.config
}

// AttachTenants hands the pipeline the tenant layer's port, which
// completes it (its health section is the root's to add).
func (a *Assembly) AttachTenants(t Tenants) { a.g.ten = t }

// stopTenants flushes the request log and stops the tenant actors (the
// database is the composition root's to close, after this).
func (g *Gateway) stopTenants() {
	if g.ten != nil {
		g.ten.Stop()
	}
}

// buildPrices prices each target (by target ID; n is the number of
// IDs): its upstream model's price, else the gateway model's name.
func buildPrices(prices *pricing.Table, cat *catalog.Catalog, n int) []targetPrice {
	out := make([]targetPrice, n)
	for _, m := range cat.Models {
		for _, t := range m.Targets {
			name := t.UpstreamModel
			if name == "" {
				name = m.Name
			}
			p, _, ok := prices.LookupString(name)
			if !ok {
				p, _, ok = prices.LookupString(m.Name)
			}
			out[t.ID] = targetPrice{p, ok}
		}
	}
	return out
}

// configTenants reads the config file's tenants for the keys actor, and
// checks their allowed models against the catalog and their token
// windows against the default output reservation.
func configTenants(o Options, cat *catalog.Catalog) ([]keys.ConfigTenant, error) {
	var out []keys.ConfigTenant
	for i, t := range o.File.Tenants {
		d, err := tenantDigest(o, i, t)
		if err != nil {
			return nil, err
		}
		prefix := fmt.Sprintf("tenants[%d].", i)
		if err := checkModels(cat, prefix, t.Policy.AllowedModels); err != nil {
			return nil, err
		}
		if err := checkTokenWindows(&t.Policy, int64(o.Env.Quota.DefaultOutputTokens), prefix); err != nil {
			return nil, err
		}
		out = append(out, keys.ConfigTenant{Name: t.Name, KeySHA256: d, Policy: t.Policy})
	}
	return out, nil
}

// checkTokenWindows refuses a token window a request without max_tokens
// could never fit (config.MinCostProblems).
func checkTokenWindows(p *tenantpolicy.Policy, minTokens int64, prefix string) error {
	if probs := config.MinCostProblems(p.Rates(), minTokens); len(probs) > 0 {
		return tenantpolicy.FieldError{Path: prefix + probs[0].Field, Message: probs[0].Message}
	}
	return nil
}

// checkModels refuses an allowed_models entry that names or matches none
// of the gateway's models: it could only refuse the tenant's requests.
func checkModels(cat *catalog.Catalog, prefix string, patterns []string) error {
	for i, pat := range patterns {
		found := false
		for _, m := range cat.Models {
			if tenantpolicy.MatchString(pat, m.Name) {
				found = true
				break
			}
		}
		if !found {
			return tenantpolicy.FieldError{Path: fmt.Sprintf("%sallowed_models[%d]", prefix, i),
				Message: fmt.Sprintf("%q matches none of this gateway's models (GET /v1/models lists them); fix the name or pattern", pat)}
		}
	}
	return nil
}

// tenantWeight is a tenant's fair share for the ingest queue.
func (g *Gateway) tenantWeight(id [20]byte) int64 {
	if ts := g.ten; ts != nil {
		return ts.Shares().Weight(tenant.ID(id))
	}
	return tenantpolicy.DefaultWeight
}

// laneWeight is a tenant's fair share for the admission lanes.
func (g *Gateway) laneWeight(id tenant.ID) float64 { return float64(g.tenantWeight(id)) }

// identifyCaller authenticates a caller's key: against the key snapshot
// first (config-file tenants and run-time keys, one hash and a map read,
// no message), so a revoked or rotated key is refused on the very next
// request on every connection; then by the resolver's rules (anonymous
// callers, and unconfigured keys in the loopback and open auth modes).
//
// rc is the routing config the request runs on; its resolver knows the
// config-file tenants of that config.
func (g *Gateway) identifyCaller(rc *routingConfig, key []byte, loopback bool) (tenant.ID, *ikeys.Entry, tenant.Decision) {
	if len(key) == 0 || g.ten == nil {
		id, _, d := rc.tenants.Identify(key, loopback)
		return id, nil, d
	}
	snap := g.ten.Keys()
	d := sha256.Sum256(key)
	if e, ok := snap.LookupDigest(d); ok {
		return e.TenantID, e, tenant.Allowed
	}
	id := rc.tenants.IDForDigest(d)
	if snap.Retired(d, id) {
		return tenant.ID{}, nil, tenant.Retired
	}
	id, _, dec := rc.tenants.IdentifyID(id, loopback)
	return id, nil, dec
}

var errRetiredKey = apierror.New(apierror.CodeInvalidAPIKey,
	"the API key was revoked or rotated; use the key's current secret or ask the gateway operator for a new key")

// tenantClass is the priority class of the caller's policy, if it sets one.
func (c *call) tenantClass() (admission.Class, bool) {
	if e := c.ten.entry; e != nil && e.Policy.Class != "" {
		return admission.ParseClass(e.Policy.Class)
	}
	return 0, false
}

// reserveTenant checks the caller's limits and reserves all of its
// counters in one step before admission (no message, no allocation when
// it passes); a refusal is answered here. It reports whether the request
// goes on.
func (c *call) reserveTenant() bool {
	g, tc := c.g, &c.ten
	ts := g.ten
	if ts == nil {
		return true
	}
	e := tc.entry
	tc.meter = ts.Logging()
	if e == nil || !e.Policy.Limited() {
		tc.passed = true
		return true
	}
	tc.meter, tc.checked = true, true
	in, out := g.plan.Estimate(c.body.B, &c.scan)
	tc.est = in + out
	// The dearest target of the model prices the reservation, so a
	// fail-over cannot overshoot a budget by more than the estimate.
	for i := -1; i < len(c.fb.Models); i++ { // the model, then its fallbacks (transport/plan)
		m := c.model
		if i >= 0 {
			m = c.fb.Models[i]
		}
		for _, t := range m.TargetsFor(c.surface) {
			if tp := &c.rc.price[t.ID]; tp.ok {
				if v := tp.p.Cost(pricing.Usage{Input: in, Output: out}); v > tc.estCost {
					tc.estCost, tc.inCost = v, tp.p.Cost(pricing.Usage{Input: in})
				}
			}
		}
	}
	tc.req = tenantlimit.Request{Model: c.scan.Model, Tokens: tc.est, Cost: tc.estCost}
	res, r := ts.Reserve(e.TenantID, &tc.req, g.clk.Now())
	tc.res = res
	if r.Limited() || !r.Allowed {
		tc.hdr, tc.hasHdr = r.Headers(hdrFamily(c.format)), true
	}
	if r.Allowed && res.Active() && g.cs != nil {
		// Cluster mode: the tenant's limits are shared by every node; this
		// node's share comes from its pools (atomics, no cross-node call),
		// and the headers show the cluster's windows where they have less
		// left than this node's.
		if kind, retry := g.cs.takeTenant(&tc.shared, e, tc.est, tc.estCost, r.Now); kind != tenantlimit.KindNone {
			ts.Settle(&tc.res, tenantlimit.Usage{Refund: true}, r.Now)
			r.Allowed, r.Kind, r.RetryAt = false, kind, retry.UnixNano()
		}
		g.cs.tenantWindows(e, &r)
		tc.hdr, tc.hasHdr = r.Headers(hdrFamily(c.format)), r.Limited() || !r.Allowed
	}
	if !r.Allowed {
		ae := r.APIError()
		c.fail(&ae)
		return false
	}
	tc.passed = true
	return true
}

// chargeRefusal charges a limited tenant one request for a request
// refused before its limits judged it (an unknown model, a malformed
// body, a wrong surface): a flood of them from a limited key spends its
// rate like any other request. When the rate is spent, the answer is the
// rate limit's 429 instead. It returns the error to answer.
func (c *call) chargeRefusal(e *apierror.Error) *apierror.Error {
	tc := &c.ten
	if tc.passed || tc.checked || tc.charged || tc.entry == nil {
		return e
	}
	if r := c.chargeRequest(nil); r != nil {
		return r
	}
	return e
}

// chargeRequest charges a limited tenant one request that generates
// nothing (a token count, a request refused before it was routed):
// allowed_models when model is set, and one request of its request
// windows, in cluster mode of the tenant's shared windows too
// (tenantlimit.Request.RequestOnly: no concurrency slot, tokens or
// budget, nothing to settle). The rate-limit headers, the cluster's
// windows where they have less left, are set on the answer either way. It returns the refusal, or nil.
func (c *call) chargeRequest(model []byte) *apierror.Error {
	g, tc := c.g, &c.ten
	ts, e := g.ten, tc.entry
	if ts == nil || e == nil || !e.Policy.Limited() {
		return nil
	}
	tc.charged = true
	tc.req = tenantlimit.Request{Model: model, RequestOnly: true}
	_, r := ts.Reserve(e.TenantID, &tc.req, g.clk.Now())
	if r.Allowed && g.cs != nil {
		if kind, retry := g.cs.takeTenantRequest(e, r.Now); kind != tenantlimit.KindNone {
			r.Allowed, r.Kind, r.RetryAt = false, kind, retry.UnixNano()
		}
		g.cs.tenantWindows(e, &r)
	}
	if r.Limited() || !r.Allowed {
		tc.hdr, tc.hasHdr = r.Headers(hdrFamily(c.format)), true
	}
	if r.Allowed {
		return nil
	}
	ae := r.APIError()
	return &ae
}

func hdrFamily(f apierror.Format) tenantlimit.Family {
	if f == apierror.Anthropic {
		return tenantlimit.Anthropic
	}
	return tenantlimit.OpenAI
}

// applyTenantHeaders sets the tenant's rate-limit headers on the answer,
// whatever it is. The provider's own headers of these names describe the
// gateway's account with the provider, not the tenant's limits: they are
// removed first.
func (c *call) applyTenantHeaders() {
	tc := &c.ten
	if !tc.hasHdr {
		return
	}
	h := &c.ctx.Response.Header
	if c.att.target != nil && hasRateLimitHeader(h) { // only a provider's answer brings its own
		for n, canon := range tenantHeaderCanon {
			if n != tenantlimit.RetryAfterMsHeader { // the provider's retry hint stays
				h.DelBytes(canon)
			}
		}
	}
	for i := 0; i < tc.hdr.Len(); i++ {
		h.SetCanonical(tenantHeaderCanon[tc.hdr.Name(i)], tc.hdr.Value(i))
	}
}

// hasRateLimitHeader reports a header of either rate-limit family.
func hasRateLimitHeader(h *fasthttp.ResponseHeader) bool {
	for k := range h.All() {
		if hasPrefixFold(k, "x-ratelimit-") || hasPrefixFold(k, "anthropic-ratelimit-") {
			return true
		}
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && equalFoldASCII(b[:len(prefix)], prefix)
}

// tenantHeaderCanon maps every rate-limit header name to its canonical
// spelling, so setting the headers skips fasthttp's normalising (the most
// expensive part of the fast path otherwise).
var tenantHeaderCanon = func() map[string][]byte {
	m := map[string][]byte{}
	for _, n := range tenantlimit.HeaderNames() {
		b := []byte(n)
		up := true
		for i, ch := range b {
			if up && ch >= 'a' && ch <= 'z' {
				b[i] = ch - 'a' + 'A'
			}
			up = ch == '-'
		}
		m[n] = b
	}
	return m
}()

// noteError remembers the code of the gateway's own error for the log.
func (c *call) noteError(e *apierror.Error) { c.ten.errCode = e.Code }

// markFirstToken records the time to the first token: a stream's first
// content event, or a whole answer's arrival.
func (c *call) markFirstToken() { c.ten.ttft = time.Since(c.start) }

// tenantAttemptEnded adds the cost of an attempt that did not serve the
// request, as the provider ledger settles it: its usage report if it sent
// one, else the input estimate when the provider may have started on it
// (a timeout, the caller gone), else nothing. The attempt's usage is then
// cleared, so the next attempt starts from zero.
func (c *call) tenantAttemptEnded(class messages.FailureClass) {
	p, tc := &c.plan, &c.ten
	if !tc.meter {
		return
	}
	if p.Usage.Seen {
		u := p.Usage
		tc.addUsage(u)
		tc.tokens += u.Tokens()
		tc.cost += c.costOf(nil, u)
	} else if class == messages.Timeout || class == messages.Canceled {
		tc.tokens += p.Input
		tc.cost += tc.inCost
	}
	p.Usage = pricing.Usage{}
}

func (tc *tenantCall) addUsage(u pricing.Usage) {
	tc.in += u.Input
	tc.out += u.Output
	tc.cached += u.Cached
}

// costOf prices u at target t's price (nil: the estimate's price ratio).
func (c *call) costOf(t *catalog.Target, u pricing.Usage) int64 {
	if t != nil && c.rc.price[t.ID].ok {
		return c.rc.price[t.ID].p.Cost(u)
	}
	if c.model != nil {
		for _, t := range c.model.TargetsFor(c.surface) {
			if tp := &c.rc.price[t.ID]; tp.ok {
				return tp.p.Cost(u)
			}
		}
	}
	return 0
}

// finishTenant settles the tenant's reservation and logs the request. It
// runs once, from settle, with everything the request used known.
//
// The serving attempt's usage report settles it when the report is final
// (a whole answer's, a stream's usage chunk or terminal event; an
// Anthropic stream's counts are final only at message_stop). A stream
// that ended without one (the caller left, the provider broke off) keeps
// what was reserved, or what was reported so far if that is more: the
// provider may have generated the whole answer. Attempts that failed over
// add what tenantAttemptEnded counted. A request that never reached a
// provider gives everything back.
func (c *call) finishTenant() {
	g, tc, p := c.g, &c.ten, &c.plan
	ts := g.ten
	logOn := ts != nil && ts.Logging()
	if ts == nil || (!tc.meter && !logOn) || c.counting { // a count is no model call: not logged
		return
	}
	if !tc.passed {
		// Refused before the tenant's limits let it through: nothing was
		// reserved, and it is counted, not logged one record each.
		c.logRefusal()
		return
	}
	reached := p.Attempts() > 0 || (c.model != nil && c.model.Strategy == config.StrategyFusion && c.att.target != nil)
	if tc.meter && p.Metering && p.Attempts() > 0 { // the serving attempt is still open
		seen := p.Usage
		seenCost := c.costOf(c.att.target, seen)
		final := p.Usage.Seen && (!c.scan.Stream || c.trans.up != catalog.Messages || c.stream.terminal)
		if p.Usage.Seen {
			tc.addUsage(seen)
		}
		if final {
			tc.tokens += seen.Tokens()
			tc.cost += seenCost
		} else {
			tc.tokens += max(seen.Tokens(), tc.est)
			tc.cost += max(seenCost, tc.estCost)
		}
	} else if !reached {
		tc.tokens, tc.cost = 0, 0
	}
	if c.model != nil && c.model.Strategy == config.StrategyFusion && reached {
		// The panel's answers are not metered: the reservation stands.
		tc.tokens, tc.cost = max(tc.tokens, tc.est), max(tc.cost, tc.estCost)
	}
	if g.cs != nil {
		g.cs.give(&tc.shared, tc.tokens, tc.cost, !reached)
	}
	if tc.res.Active() {
		ts.Settle(&tc.res, tenantlimit.Usage{Tokens: tc.tokens, Cost: tc.cost, Known: reached, Refund: !reached}, g.clk.Now())
	}
	if logOn {
		c.logRequest(reached)
	}
}

// maxLoggedModel bounds the model name a record keeps for a request whose
// model is not configured (it is the caller's text).
const maxLoggedModel = 128

// logRequest hands the request's record to the writer, which never
// blocks. Nothing secret is in it: ids, names, numbers, the address class.
func (c *call) logRequest(reached bool) {
	g, tc, ctx := c.g, &c.ten, c.ctx
	// The record is the pooled call's (tenantCall.rec): Log copies it, and
	// copies the ids from the bytes they are in, so logging a request
	// allocates nothing.
	r := &tc.rec
	*r = store.Record{}
	lat := c.life.took
	if _, real := g.clk.(clock.Real); real {
		r.Time = c.start // the same instant, without another clock read
	} else {
		r.Time = g.clk.Now().Add(-lat) // arrival on the injected clock
	}
	var tid []byte
	switch {
	case tc.entry != nil:
		tid, r.TenantName = tc.entry.TenantID.Bytes(), tc.entry.Name
	case c.tenant == tenant.Anonymous:
		r.TenantID, r.TenantName = "anonymous", "anonymous"
	case !c.tenant.IsZero():
		tid = c.tenant.Bytes()
	}
	if c.model != nil {
		r.Model = c.model.Name
	} else if len(c.scan.Model) > 0 {
		r.Model = strings.ToValidUTF8(string(c.scan.Model[:min(len(c.scan.Model), maxLoggedModel)]), "?")
	}
	// Caller and upstream dialect: the route's API surface, and the API
	// the serving attempt spoke (they differ when it was translated).
	r.CallerDialect = c.surface.String()
	if c.att.target != nil {
		r.Target, r.UpstreamDialect = c.att.target.Name, c.trans.up.String()
	}
	r.Status = ctx.Response.StatusCode()
	switch {
	case c.stream.cut:
		r.ErrorCode = apierror.CodeStreamInterrupted.String()
	case r.Status == 499:
		r.ErrorCode = apierror.CodeClientClosedRequest.String()
	case r.Status < 400:
	case tc.errCode != "":
		r.ErrorCode = tc.errCode
	case c.att.reason != "":
		r.ErrorCode = c.att.reason
	default:
		r.ErrorCode = "upstream_error"
	}
	r.Attempts, r.Fallbacks = c.plan.Attempts(), c.att.fallbacks
	r.AdmissionWait, r.TTFT, r.Latency = c.lane.Waited, tc.ttft, lat
	r.TokensIn, r.TokensOut, r.TokensCached = tc.in, tc.out, tc.cached
	if reached {
		r.CostNano = tc.cost
	}
	r.ClientIP = clientIPClass(ctx.RemoteIP())
	r.Changes = c.changesForLog()
	g.ten.Log(r, c.rid, tid)
}

// Refusal buckets for callers without a key entry: anonymous callers,
// and everyone else (no key, a refused key, an unconfigured key the auth
// mode let in). Keyed tenants are counted under their own id.
var (
	refusedAnonymous    = []byte("anonymous")
	refusedUnidentified = []byte("unidentified")
)

// logRefusal hands the request log one refusal: the tenant (its key
// entry, or a fixed bucket, so the set stays bounded) and the gateway's
// error code.
func (c *call) logRefusal() {
	tc := &c.ten
	id, name := refusedUnidentified, "unidentified"
	switch {
	case tc.entry != nil:
		id, name = tc.entry.TenantID.Bytes(), tc.entry.Name
	case c.tenant == tenant.Anonymous:
		id, name = refusedAnonymous, "anonymous"
	}
	code := tc.errCode
	switch {
	case code != "":
	case c.ctx.Response.StatusCode() == 499:
		code = "client_closed_request"
	default:
		code = "internal_error" // a panic before the limits (panic.go)
	}
	c.g.ten.Refused(id, name, code)
}

func clientIPClass(ip []byte) store.IPClass {
	a, _ := netip.AddrFromSlice(ip)
	return store.ClassifyIP(a)
}
