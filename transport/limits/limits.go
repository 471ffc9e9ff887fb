// Package limits is the tenant-limits stage of the request pipeline and
// what settle does for the tenant (docs/tenants.md):
//
//	identify (Stage.Identify: the key snapshot, then the resolver)
//	→ tenant limits (State.Reserve: every counter in one step, no message)
//	→ admission → provider (the usage metered over the attempts)
//	→ settle (State.Finish: the limiter from the real usage, once; one
//	  record to the request log, handed over without waiting).
//
// A request that generates nothing (a token count, a refusal before the
// limits judged it) is charged one request instead (Charge,
// ChargeRefusal); the rate-limit headers are set on whatever the answer
// is (ApplyHeaders). The targets' prices that price a request are here
// (Prices, Pricing), the resolver identify runs against, built from the
// config file's tenants (Resolver, KeyDigest), and the rules a tenant's
// policy is held to (the config file's tenants and the keys API's:
// ConfigTenants, CheckModels, CheckTokenWindows).
//
// Stage is the process-wide part (the tenant layer's port and, in cluster
// mode, the cluster's, attached once by the composition root); State is
// one request's, a field of the pipeline's call, zeroed with it. The
// stage declares the ports it needs (Tenants, Shared), the parts of the
// pipeline's ports on the tenant and cluster layers (package port) that a
// request uses; what it reads of the call comes as values (Ask, Pricing,
// Outcome). It imports no other stage.
package limits

import (
	"crypto/sha256"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/port"
)

// Tenants is the stage's port on the tenant layer: the request path's
// part of the pipeline's port (port.Tenants, which the root's
// transport/gateway/tenants implements).
type Tenants = port.TenantRequests

// Shared is the stage's port on the cluster's shared pools (cluster mode
// only): the tenant's part of the pipeline's port on the cluster
// (port.Cluster, which the root's transport/gateway/clusterlayer
// implements). Its methods spend the node's pools with atomics.
type Shared interface {
	TakeTenant(s *port.ClusterShare, e *ikeys.Entry, tokens, cost int64, now time.Time) (tenantlimit.Kind, time.Time)
	TakeTenantRequest(e *ikeys.Entry, now time.Time) (tenantlimit.Kind, time.Time)
	// TenantWindows takes and returns r by value, so that r stays on the
	// caller's stack.
	TenantWindows(e *ikeys.Entry, r tenantlimit.Result) tenantlimit.Result
	Give(s *port.ClusterShare, tokens, cost int64, refund bool)
}

// Stage is the stage's process-wide part: the tenant layer's port (nil
// until attached: no limits, no log) and in cluster mode the cluster's
// (nil for a single node, where the request path checks one pointer),
// and the clock the limits run on.
type Stage struct {
	tenants Tenants
	shared  Shared
	clk     clock.Clock
}

// Attach hands the stage the tenant layer's port and the gateway's clock.
func (s *Stage) Attach(t Tenants, clk clock.Clock) { s.tenants, s.clk = t, clk }

// Share hands the stage the cluster's port (cluster mode only).
func (s *Stage) Share(c Shared) { s.shared = c }

// Logging reports whether the request log is on.
func (s *Stage) Logging() bool { return s.tenants != nil && s.tenants.Logging() }

// Identify authenticates a caller's key: against the key snapshot first
// (config-file tenants and run-time keys, one hash and a map read, no
// message), so a revoked or rotated key is refused on the very next
// request on every connection; then by the resolver's rules (anonymous
// callers, and unconfigured keys in the loopback and open auth modes).
// The entry is the caller's key, nil for anonymous callers and
// unconfigured keys the auth mode let in.
//
// res is the resolver of the routing config the request runs on: it
// knows the config-file tenants of that config.
func (s *Stage) Identify(res *tenant.Resolver, key []byte, loopback bool) (tenant.ID, *ikeys.Entry, tenant.Decision) {
	if len(key) == 0 || s.tenants == nil {
		id, _, d := res.Identify(key, loopback)
		return id, nil, d
	}
	snap := s.tenants.Keys()
	d := sha256.Sum256(key)
	if e, ok := snap.LookupDigest(d); ok {
		return e.TenantID, e, tenant.Allowed
	}
	id := res.IDForDigest(d)
	if snap.Retired(d, id) {
		return tenant.ID{}, nil, tenant.Retired
	}
	id, _, dec := res.IdentifyID(id, loopback)
	return id, nil, dec
}

// Weight is a tenant's fair share (the ingest queue's, the admission
// lanes'): its policy's, else the default.
func (s *Stage) Weight(id tenant.ID) int64 {
	if ts := s.tenants; ts != nil {
		return ts.Shares().Weight(id)
	}
	return tenantpolicy.DefaultWeight
}

// State is one request's part of the tenant layer; it lives in the
// pooled call and is zeroed with it.
type State struct {
	// Entry is the caller's key (config-file tenant or run-time key);
	// nil for anonymous callers and unconfigured keys let in by the auth
	// mode.
	Entry *ikeys.Entry
	res   tenantlimit.Reservation
	// req is the reservation's request, and rec the request's record for
	// the log: here in the pooled call, not on the stack, since they
	// pass through the port (an interface), whose pointer arguments the
	// compiler cannot keep on the stack.
	req tenantlimit.Request
	rec store.Record
	// hdr are the rate-limit headers, rendered at the reservation and set
	// on the answer whatever it is (ApplyHeaders).
	hdr    tenantlimit.Headers
	hasHdr bool
	// shared is what the request took from the tenant's cluster pools
	// (cluster mode).
	shared port.ClusterShare
	// charged: Charge ran (a count, or a refusal before routing);
	// checked: the limiter judged the request (Reserve); passed: it let
	// it through (or the tenant has no limits), so the request is logged
	// as a record of its own. A request refused before it passed is
	// counted in aggregate (logRefusal).
	charged, checked, passed bool
	// Meter: the provider's usage report is read (a limited tenant, or
	// the request log is on).
	Meter bool
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

// Reserved reports whether the request holds a reservation of its
// tenant's counters, which Finish gives back.
func (st *State) Reserved() bool { return st.res.Active() }

// Ask is the request as its tenant's reservation prices it.
type Ask struct {
	// Pricing prices it: its Model is the model the request asks for.
	Pricing
	// Fallbacks are the caller's fallback models, priced after Model.
	Fallbacks []*catalog.Model
	// Body, MaxTokens and N estimate its tokens (ledger.Estimate, with
	// DefaultOut when the body sets no output limit); Name is the model
	// as the caller named it (the policy's allowed_models).
	Body                     []byte
	MaxTokens, N, DefaultOut int64
	Name                     []byte
	// Format is the caller's error dialect: it chooses the rate-limit
	// headers' family.
	Format apierror.Format
}

// Reserve checks the caller's limits and reserves all of its counters in
// one step before admission (no message, no allocation when it passes).
// It returns the refusal to answer, if ok is false.
func (st *State) Reserve(s *Stage, a *Ask) (refusal apierror.Error, ok bool) {
	ts := s.tenants
	if ts == nil {
		return refusal, true
	}
	e := st.Entry
	st.Meter = ts.Logging()
	if e == nil || !e.Policy.Limited() {
		st.passed = true
		return refusal, true
	}
	st.Meter, st.checked = true, true
	in, out := ledger.Estimate(a.Body, a.MaxTokens, a.N, a.DefaultOut)
	st.est = in + out
	// The dearest target of the model prices the reservation, so a
	// fail-over cannot overshoot a budget by more than the estimate.
	for i := -1; i < len(a.Fallbacks); i++ { // the model, then its fallbacks
		m := a.Model
		if i >= 0 {
			m = a.Fallbacks[i]
		}
		for _, t := range m.TargetsFor(a.Surface) {
			if tp := &a.Prices[t.ID]; tp.ok {
				if v := tp.p.Cost(pricing.Usage{Input: in, Output: out}); v > st.estCost {
					st.estCost, st.inCost = v, tp.p.Cost(pricing.Usage{Input: in})
				}
			}
		}
	}
	st.req = tenantlimit.Request{Model: a.Name, Tokens: st.est, Cost: st.estCost}
	res, r := ts.Reserve(e.TenantID, &st.req, s.clk.Now())
	st.res = res
	if r.Limited() || !r.Allowed {
		st.hdr, st.hasHdr = r.Headers(hdrFamily(a.Format)), true
	}
	if r.Allowed && res.Active() && s.shared != nil {
		// Cluster mode: the tenant's limits are shared by every node; this
		// node's share comes from its pools (atomics, no cross-node call),
		// and the headers show the cluster's windows where they have less
		// left than this node's.
		if kind, retry := s.shared.TakeTenant(&st.shared, e, st.est, st.estCost, r.Now); kind != tenantlimit.KindNone {
			ts.Settle(&st.res, tenantlimit.Usage{Refund: true}, r.Now)
			r.Allowed, r.Kind, r.RetryAt = false, kind, retry.UnixNano()
		}
		r = s.shared.TenantWindows(e, r)
		st.hdr, st.hasHdr = r.Headers(hdrFamily(a.Format)), r.Limited() || !r.Allowed
	}
	if !r.Allowed {
		return r.APIError(), false
	}
	st.passed = true
	return refusal, true
}

// ChargeRefusal charges a limited tenant one request for a request
// refused before its limits judged it (an unknown model, a malformed
// body, a wrong surface): a flood of them from a limited key spends its
// rate like any other request. When the rate is spent, the answer is the
// rate limit's 429 instead. It returns the error to answer.
func (st *State) ChargeRefusal(s *Stage, e *apierror.Error, f apierror.Format) *apierror.Error {
	if st.passed || st.checked || st.charged || st.Entry == nil {
		return e
	}
	if r := st.Charge(s, nil, f); r != nil {
		return r
	}
	return e
}

// ModelRefused is the answer when the caller's key's allowed_models
// exclude name (a fallback model the body names: transport/plan asks
// before it resolves one), nil when the key may use it.
func (st *State) ModelRefused(name []byte) *apierror.Error {
	if e := st.Entry; e != nil && e.Policy != nil && !e.Policy.AllowsModel(name) {
		r := tenantlimit.Result{Kind: tenantlimit.KindModel}
		ae := r.APIError()
		return &ae
	}
	return nil
}

// Charge charges a limited tenant one request that generates nothing (a
// token count, a request refused before it was routed): allowed_models
// when model is set, and one request of its request windows, in cluster
// mode of the tenant's shared windows too (tenantlimit.Request.RequestOnly:
// no concurrency slot, tokens or budget, nothing to settle). The
// rate-limit headers, the cluster's windows where they have less left,
// are set on the answer either way. It returns the refusal, or nil.
func (st *State) Charge(s *Stage, model []byte, f apierror.Format) *apierror.Error {
	ts, e := s.tenants, st.Entry
	if ts == nil || e == nil || !e.Policy.Limited() {
		return nil
	}
	st.charged = true
	st.req = tenantlimit.Request{Model: model, RequestOnly: true}
	_, r := ts.Reserve(e.TenantID, &st.req, s.clk.Now())
	if r.Allowed && s.shared != nil {
		if kind, retry := s.shared.TakeTenantRequest(e, r.Now); kind != tenantlimit.KindNone {
			r.Allowed, r.Kind, r.RetryAt = false, kind, retry.UnixNano()
		}
		r = s.shared.TenantWindows(e, r)
	}
	if r.Limited() || !r.Allowed {
		st.hdr, st.hasHdr = r.Headers(hdrFamily(f)), true
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

// ApplyHeaders sets the tenant's rate-limit headers on the answer h,
// whatever it is. The provider's own headers of these names describe the
// gateway's account with the provider, not the tenant's limits: they are
// removed first. provider reports an answer an attempt brought (only a
// provider's answer brings its own).
func (st *State) ApplyHeaders(h *fasthttp.ResponseHeader, provider bool) {
	if !st.hasHdr {
		return
	}
	if provider && hasRateLimitHeader(h) {
		for n, canon := range headerCanon {
			if n != tenantlimit.RetryAfterMsHeader { // the provider's retry hint stays
				h.DelBytes(canon)
			}
		}
	}
	for i := 0; i < st.hdr.Len(); i++ {
		h.SetCanonical(headerCanon[st.hdr.Name(i)], st.hdr.Value(i))
	}
}

// hasRateLimitHeader reports a header of either rate-limit family.
func hasRateLimitHeader(h *fasthttp.ResponseHeader) bool {
	for k := range h.All() {
		if ascii.HasPrefixFold(k, "x-ratelimit-") || ascii.HasPrefixFold(k, "anthropic-ratelimit-") {
			return true
		}
	}
	return false
}

// headerCanon maps every rate-limit header name to its canonical
// spelling, so setting the headers skips fasthttp's normalising (the most
// expensive part of the fast path otherwise).
var headerCanon = func() map[string][]byte {
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

// NoteError remembers the code of the gateway's own error for the log.
func (st *State) NoteError(e *apierror.Error) { st.errCode = e.Code }

// FirstToken records the time to the first token: a stream's first
// content event, or a whole answer's arrival.
func (st *State) FirstToken(ttft time.Duration) { st.ttft = ttft }

// AttemptEnded adds the cost of an attempt that did not serve the
// request, as the provider ledger settles it: its usage report u if it
// sent one, else its input estimate when the provider may have started on
// it (started: a timeout, the caller gone), else nothing. It reports
// whether the request is metered; if so, the caller clears the attempt's
// usage, so the next attempt starts from zero.
func (st *State) AttemptEnded(u pricing.Usage, input int64, started bool, p *Pricing) bool {
	if !st.Meter {
		return false
	}
	if u.Seen {
		st.addUsage(u)
		st.tokens += u.Tokens()
		st.cost += p.CostOf(nil, u)
	} else if started {
		st.tokens += input
		st.cost += st.inCost
	}
	return true
}

func (st *State) addUsage(u pricing.Usage) {
	st.in += u.Input
	st.out += u.Output
	st.cached += u.Cached
}
