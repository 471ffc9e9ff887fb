// Package port declares the request pipeline's ports on the actor
// layers the composition root builds: what package transport calls on
// the tenant layer (Tenants), on the cluster (Cluster), per request and
// for reload, the operator APIs and shutdown, and on the operator layer
// (Operator: the operator routes' handlers, health, the dashboard's
// history); and, the other way, the narrow reads of the pipeline the
// operator layer is given (Pipeline). The pipeline holds the first three;
// the root's layers (transport/gateway/tenants,
// transport/gateway/clusterlayer and transport/gateway/opslayer)
// implement them. They live here, not in
// transport, so that the root names the same types without importing
// transport (whose internal tests compose a gateway with the root's
// packages), and each list is written once.
package port

import (
	"time"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/ops"
)

// Tenants is the pipeline's port on the tenant layer: identify a caller
// (the key snapshot), reserve and settle a tenant's limits, log a request
// or a refusal, read the tenants' shares (admission's weights, the
// cluster grains' policies), and for the operator APIs and reload, key
// management, the limiter's windows and the layer's health. The request
// path sends no message through it (the reservation and the log's
// hand-over are atomics and a bounded list behind it).
type Tenants interface {
	TenantRequests
	Create(name string, p tenantpolicy.Policy) (ikeys.Info, string, error)
	UpdatePolicy(name string, p tenantpolicy.Policy) (ikeys.Info, error)
	Rotate(name string) (ikeys.Info, string, error)
	Revoke(name string) (ikeys.Info, error)
	SetConfig(cfg []keys.ConfigTenant) error
	Windows() []ops.LimitWindow
	// Health is the tenants section of the health report, and Brief what
	// of it callers the management routes refuse see (no names, no
	// windows).
	Health() (body any, status string)
	Brief(body any) any
	Stop()
}

// TenantRequests is the request path's part of Tenants (what the
// tenant-limits stage, transport/limits, is handed): the key snapshot and
// the tenants' shares, the limiter's one-step reservation and its settle,
// and the request log.
type TenantRequests interface {
	Keys() *ikeys.Snapshot
	Shares() *ikeys.Shares
	Reserve(id tenant.ID, req *tenantlimit.Request, now time.Time) (tenantlimit.Reservation, tenantlimit.Result)
	Settle(res *tenantlimit.Reservation, u tenantlimit.Usage, now time.Time)
	Logging() bool
	Log(r *store.Record, requestID, tenantID []byte)
	Refused(tenantID []byte, tenantName, code string)
}

// Cluster is the pipeline's port on the cluster (cluster mode only). The
// per-request methods spend the node's pools with atomics; a pool's
// refill is the lease actor's, asynchronous, and a request waits only
// for a cold pool's first lease or the grain's word on an empty one.
type Cluster interface {
	// TakeLedger takes a ledger reservation's share of slot's shared
	// pools (nothing when the slot is not shared); on refusal it says
	// when to try again.
	TakeLedger(s *ClusterShare, slot int, tokens int64, now time.Time) (bool, time.Time)
	// TakeTenant takes a limited tenant's request from its shared pools:
	// a slot, a request, the token estimate and the cost estimate
	// (nano-dollars); on refusal it names the limit.
	TakeTenant(s *ClusterShare, e *ikeys.Entry, tokens, cost int64, now time.Time) (tenantlimit.Kind, time.Time)
	// TakeTenantRequest takes one request of a limited tenant's shared
	// request windows, never given back (a call that generates nothing).
	TakeTenantRequest(e *ikeys.Entry, now time.Time) (tenantlimit.Kind, time.Time)
	// TenantWindows is r with the cluster's view of the tenant's tightest
	// request and token windows where it has less left than this node's
	// own (the rate-limit headers).
	TenantWindows(e *ikeys.Entry, r tenantlimit.Result) tenantlimit.Result
	// Give settles what s took: tokens were used and cost nano-dollars
	// (more than taken is charged without refusing); refund gives the
	// request back too. s is zero after.
	Give(s *ClusterShare, tokens, cost int64, refund bool)
	// AddSlots shares the budgets of ledger slots a reload added.
	AddSlots(slots []ledgeractor.SlotSpec)
	// Summary is the operator APIs' view: the cluster's name, this node
	// and the members it sees.
	Summary() map[string]any
	// Health is the cluster section of the health report, and Brief what
	// of it callers the management routes refuse see.
	Health() (body any, status string)
	Brief(body any) any
	// Stop gives the node's credit back and leaves the cluster; it stops
	// the actor system (protoactor's cluster shutdown does), so it runs
	// last.
	Stop()
}

// ClusterShare is what one request took from the cluster's pools, given
// back at settle (Cluster.Give); zero when nothing was taken. The
// pipeline holds it in its pooled call and never reads it; the pools are
// *credit.Pool held as any (a pointer in an interface: no allocation),
// so that the pipeline need not import the credit actor to hold them.
type ClusterShare struct {
	// Slot, Tok and Req are the concurrency slot (tenants only), the
	// token pool and the request pool taken from; TokWin and ReqWin the
	// pools' tickets for what was taken, Tokens how many.
	Slot, Tok, Req any
	TokWin, ReqWin uint64
	Tokens         int64
	// Spend are the cost estimate's takings from the day and month
	// budgets (tenants only), in their units.
	Spend [2]struct {
		Pool  any
		Win   uint64
		Units int64
	}
}

// Services is the pipeline's port on the supervised services
// (transport/gateway/sidecars): the planner passes over a target whose
// service is down, a service:// connection verifies the process it
// reached, and the answer when every target's service is down says its
// state. A name the gateway does not supervise (an embedder that
// resolves service names itself) is never down and needs no check.
type Services interface {
	// Down reports that the supervised service name is not serving as
	// the gateway's own child.
	Down(name string) bool
	// Verify checks that the process that accepted a new connection to
	// service name is the service's own child.
	Verify(name string) error
	// State is the supervised service's state and whether it is on its
	// way back (starting, or a restart scheduled); ok is false when the
	// gateway supervises no service of that name.
	State(name string) (state string, recovering, ok bool)
}

// Operator is the pipeline's port on the operator layer
// (transport/gateway/opslayer): the handlers of the route table's
// operator rows, the health sections' registry, and its stop. The
// pipeline builds the edge with these handlers and adds its own health
// sections (server, targets, quota, admission, the relay) to the
// registry; the root adds those of the layers it built.
type Operator interface {
	// Handlers has a function for every operator row of the route table
	// (health, the dashboard, the services, keys, request log, usage,
	// quota, route preview and reload APIs) and nil for the pipeline's.
	Handlers() [edge.NumHandlers]edge.HandlerFunc
	// AddHealthSection adds a section to GET /api/monitoring/health: fn
	// returns its body and status ("ok", "degraded" or "down"); brief,
	// when not nil, is what callers the management routes refuse see of
	// the body.
	AddHealthSection(name string, fn func() (any, string), brief func(body any) any)
	// Stop stops the dashboard's history sampler; it runs before the
	// actors the sampler reads stop.
	Stop()
}

// Pipeline is what the operator layer reads of the pipeline beyond the
// actors' handles the root holds: the config in force and what it
// derives, the pipeline's own counters, and config reload. Every read is
// of published state or atomics.
type Pipeline interface {
	// Catalog is the catalog of the config in force.
	Catalog() *catalog.Catalog
	// Target is a target's connection, quota model index, ledger slot
	// and upstream model name.
	Target(id int) ops.Target
	// QuotaAware and Threshold are OMNIROUTE_QUOTA_AWARE_ROUTING and
	// OMNIROUTE_QUOTA_APPROACHING_THRESHOLD.
	QuotaAware() bool
	Threshold() float64
	// CheckPolicy holds a run-time key's policy to the rules a
	// config-file tenant's is held to.
	CheckPolicy(p tenantpolicy.Policy) error
	// Inflight is the number of requests being served.
	Inflight() int64
	// ConnectionWindows are the ledger's limited windows of the
	// connections the config in force routes to.
	ConnectionWindows() []ops.LimitWindow
	// Dash is what the dashboard's history samples of the request
	// metrics: requests and errors so far, and the cumulative counts of
	// the duration histogram's buckets (len(DurationBuckets())+1) put in
	// into.
	Dash(into []uint64) (requests, errors uint64)
	// DurationBuckets are the upper bounds of the request duration
	// histogram.
	DurationBuckets() []float64
	// Lanes is the admission lanes' snapshot of the upstreams the config
	// in force routes to.
	Lanes() *lanes.Snapshot
	ConfigInfo() ops.ConfigInfo
	ReloadConfig() ops.ReloadResult
	// Version and Started are the gateway's version and start time.
	Version() string
	Started() time.Time
	// Edge is the HTTP edge: its guards, error writer and streams; nil
	// before the front end starts.
	Edge() *edge.Edge
}

// Routing is the pipeline's port on the registration of connections and
// targets with the routing actors (the root's transport/gateway/routing):
// it plans what a catalog's new connections and targets take, registers
// a plan with every actor the root spawned (ledger budgets, quota
// connections and models, the targets actor's names, the lanes' gates)
// waiting for each acknowledgement, and retires what a reload removed.
// The pipeline keeps the tables requests index (the upstream clients,
// the names, each target's route) and fills them from the plan before it
// calls Register, and publishes the config naming the new ids only after
// Register returned nil: no request sees a target half registered.
type Routing interface {
	// Plan works out the registration of conns and targets, which
	// catalog.Onto (or the first Build) found new. cat is the reloaded
	// catalog (nil at start-up): its known connections are compared with
	// the running ones. It changes nothing; an error says what cannot be
	// started.
	Plan(conns []*catalog.Connection, targets []*catalog.Target, cat *catalog.Catalog, f *config.File) (*RoutingPlan, error)
	// Register records p and registers it with every routing actor, each
	// call waited for. On an error the actors may hold part of p.
	Register(p *RoutingPlan) error
	// Retire runs once a reload's config, whose catalog is cat, is in
	// force: the removed connections' quota telemetry stops, and the
	// lanes snapshot shows only the targets cat routes to.
	Retire(p *RoutingPlan, cat *catalog.Catalog)
	// Health is the quota section of the health report.
	Health() (body any, status string)
	// ConnectionWindows are the ledger's limited windows of the
	// connections the config in force routes to.
	ConnectionWindows() []ops.LimitWindow
	// Ledger and Quota are the spawned ledger and quota actors, which the
	// plan stage reads (transport/plan).
	Ledger() *ledgeractor.Handle
	Quota() *quotaactor.Handle
	// Stop stops the quota actors and the ledger (the targets actor is
	// the pipeline's to stop, before them).
	Stop()
}

// RoutingPlan is a plan of Routing: what the pipeline's tables take, and
// the routing actors' part, which only the root reads.
type RoutingPlan struct {
	// Conns are the new connections, in id order, and Clients the known
	// ones whose endpoint or max_conns changed, with the endpoint each
	// one's new upstream client dials.
	Conns, Clients []Endpoint
	// Targets are the new targets, in id order, and Routes their routes.
	Targets []*catalog.Target
	Routes  []TargetRoute
	// Restarted and Removed count the known connections whose quota
	// telemetry restarts and the connections removed (the reload's log).
	Restarted, Removed int
	// Actors is the routing actors' part, the root's own.
	Actors any
}

// Endpoint is a connection's resolved endpoint.
type Endpoint struct {
	Conn *catalog.Connection
	Addr string
	TLS  bool
}

// TargetRoute is what routing needs about a target beyond the catalog.
type TargetRoute struct {
	Conn     int            // connection index (catalog.Connection.ID)
	Model    int            // index of the upstream model in the connection's quota spec
	Slot     int            // ledger slot: one per (connection, upstream model)
	Mapping  *quota.Mapping // rate-limit header mapping; nil reads none
	Upstream string         // the upstream model name as the provider meters it
}
