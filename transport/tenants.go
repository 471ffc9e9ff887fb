package transport

import (
	"log/slog"
	"os"
	"time"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/port"
)

// The tenant layer in the request path (docs/tenants.md): the
// tenant-limits stage, package transport/limits:
//
//	authentication (identify: the key snapshot, then the resolver)
//	→ tenant limits (reserveTenant: every counter in one step, no message)
//	→ admission → provider
//	→ settle (finishTenant: the limiter from the real usage, once; one
//	  record to the request log, handed over without waiting).
//
// This file is the stage's glue: the tenant layer's port and the
// Assembly's sources and attach for it, the model walk's reserveTenant
// step and the call's other hooks into the stage (thin: they call it with
// what it reads of the call). The pipeline reaches the tenant layer's
// actors (keys, tenant limits, request log, the tenants' shares) only
// through Tenants, the port it declares here; the composition root
// builds the layer and implements the port (transport/gateway/tenants);
// the stage holds the same port, narrowed to what a request uses
// (limits.Tenants). The management routes are in package ops
// (ops/keys.go, ops/requests.go).

// Store is the persistence the tenant layer uses (keys, request log,
// usage), re-exported for hosts that back it with their own store.
type Store = store.Store

// Tenants is the pipeline's port on the tenant layer (package port
// declares it once; the root's transport/gateway/tenants implements it).
type Tenants = port.Tenants

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
func (a *Assembly) AttachTenants(t Tenants) {
	a.g.ten = t
	a.g.lim.Attach(t, a.g.clk)
}

// stopTenants flushes the request log and stops the tenant actors (the
// database is the composition root's to close, after this).
func (g *Gateway) stopTenants() {
	if g.ten != nil {
		g.ten.Stop()
	}
}

// tenantWeight is a tenant's fair share for the ingest queue.
func (g *Gateway) tenantWeight(id [20]byte) int64 { return g.lim.Weight(tenant.ID(id)) }

// laneWeight is a tenant's fair share for the admission lanes.
func (g *Gateway) laneWeight(id tenant.ID) float64 { return float64(g.tenantWeight(id)) }

// tenantClass is the priority class of the caller's policy, if it sets one.
func (c *call) tenantClass() (admission.Class, bool) {
	if e := c.ten.Entry; e != nil && e.Policy.Class != "" {
		return admission.ParseClass(e.Policy.Class)
	}
	return 0, false
}

// pricing is what prices the call's usage: the prices of its routing
// config, the model it runs on now (a fallback's while one runs) and its
// API surface.
func (c *call) pricing() limits.Pricing {
	return limits.Pricing{Prices: c.rc.price, Model: c.model, Surface: c.surface}
}

// reserveTenant checks the caller's limits and reserves all of its
// counters in one step before admission (limits.State.Reserve: no
// message, no allocation when it passes); a refusal is answered here. It
// reports whether the request goes on.
func (c *call) reserveTenant() bool {
	a := limits.Ask{Pricing: c.pricing(), Fallbacks: c.fb.Models, // the model, then its fallbacks (transport/plan)
		Body: c.body.B, MaxTokens: c.scan.MaxTokens, N: c.scan.N, DefaultOut: c.g.qs.defOut, Name: c.scan.Model, Format: c.format}
	if ae, ok := c.ten.Reserve(&c.g.lim, &a); !ok {
		c.fail(&ae)
		return false
	}
	return true
}

// chargeRefusal charges a limited tenant one request for a request
// refused before its limits judged it (limits.State.ChargeRefusal); it
// returns the error to answer: the rate limit's 429 once the rate is
// spent.
func (c *call) chargeRefusal(e *apierror.Error) *apierror.Error {
	return c.ten.ChargeRefusal(&c.g.lim, e, c.format)
}

// chargeRequest charges a limited tenant one request that generates
// nothing, a token count (limits.State.Charge). It returns the refusal,
// or nil.
func (c *call) chargeRequest(model []byte) *apierror.Error {
	return c.ten.Charge(&c.g.lim, model, c.format)
}

// applyTenantHeaders sets the tenant's rate-limit headers on the answer,
// whatever it is, in place of a provider's own (limits.State.ApplyHeaders).
func (c *call) applyTenantHeaders() {
	c.ten.ApplyHeaders(&c.ctx.Response.Header, c.att.Target != nil)
}

// noteError remembers the code of the gateway's own error for the log.
func (c *call) noteError(e *apierror.Error) { c.ten.NoteError(e) }

// markFirstToken records the time to the first token: a stream's first
// content event, or a whole answer's arrival.
func (c *call) markFirstToken() { c.ten.FirstToken(time.Since(c.start)) }

// tenantAttemptEnded adds the cost of an attempt that did not serve the
// request (limits.State.AttemptEnded): its usage report, else its input
// when the provider may have started on it (a timeout, the caller gone).
// The attempt's usage is then cleared, so the next attempt starts from
// zero.
func (c *call) tenantAttemptEnded(class messages.FailureClass) {
	p, pr := &c.plan, c.pricing()
	if c.ten.AttemptEnded(p.Usage, p.Input, class == messages.Timeout || class == messages.Canceled, &pr) {
		p.Usage = ledger.Usage{}
	}
}

// finishTenant settles the tenant's reservation and logs the request
// (limits.State.Finish), from what the call did. It runs once, from
// settle, with everything the request used known; what only the log
// reads is read only when the log is on.
func (c *call) finishTenant() {
	o := limits.Outcome{Pricing: c.pricing(), Tenant: &c.tenant, Asked: c.scan.Model, RequestID: c.rid,
		Start: c.start, Took: c.life.took, Counting: c.counting,
		Attempts: c.plan.Attempts(), Target: c.att.Target, Upstream: c.att.Up, Metering: c.plan.Metering, Usage: c.plan.Usage,
		Stream: c.scan.Stream, Terminal: c.stream.Terminal(), Cut: c.stream.Cut(),
		Status: c.ctx.Response.StatusCode(), Reason: c.att.Reason, Fallbacks: c.att.Fallbacks, Waited: c.lane.Waited}
	if c.g.lim.Logging() {
		o.ClientIP, o.Changes = c.ctx.RemoteIP(), c.att.ChangesForLog()
	}
	c.ten.Finish(&c.g.lim, &o)
}
