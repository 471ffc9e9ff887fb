// Package ops serves the operator APIs: the services and engines API,
// the key API, the request log and usage, the quota report and route
// preview, the dashboard and config reload.
//
// It sits on the HTTP edge (package transport/edge), which routes every
// path by its route table (the paths here are the table's constants),
// applies the browser policy before a handler runs, and owns the
// management guards, the error dialects and the hang-up and deadline
// machinery of streams; ops never imports transport. What ops needs of the
// running gateway it declares here as ports (Edge, Routing, Keys,
// RequestLog, Services, Reloader, Monitor), and transport supplies them,
// reading its published snapshots and the actors' handles at call time.
// The handlers call the guards through Edge at the same points, in the
// same order, as before they moved here, so a refusal's status and code
// do not depend on which room a route lives in.
package ops

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/edge"
)

// Edge is what the HTTP edge does for an operator route. Each guard
// writes its refusal and returns false when the request goes no further.
type Edge interface {
	// Management guards the quota, route-preview, key, request and usage
	// routes: the management key as a bearer token when one is set, else
	// loopback callers only (errors in the OpenAI dialect).
	Management(ctx *fasthttp.RequestCtx, rid []byte) bool
	// Access guards the routes that spawn processes or change the config
	// (services, engines, reload, the dashboard snapshot): 403 LOCAL_ONLY
	// for a remote peer before any key is looked at, then the key rules.
	Access(ctx *fasthttp.RequestCtx, rid []byte) bool
	// Local refuses a remote peer with 403 LOCAL_ONLY (the dashboard's
	// assets, which carry no data).
	Local(ctx *fasthttp.RequestCtx, rid []byte) bool
	// Body enforces the forgery rule of a request that changes state: a
	// JSON body, or no body and no Content-Type (415 otherwise).
	Body(ctx *fasthttp.RequestCtx, rid []byte) bool
	// JSON reports whether the request's Content-Type is a JSON media
	// type, by the rule inference bodies are held to.
	JSON(ctx *fasthttp.RequestCtx) bool
	// Error writes e in the OpenAI dialect (the route preview's errors).
	Error(ctx *fasthttp.RequestCtx, rid []byte, e *apierror.Error)
	// Stream answers ctx with body as a long-lived stream: the edge
	// watches for the caller's hang-up (host: the net/http request
	// context, nil on fasthttp), puts its write deadlines on every event,
	// contains a panic, and closes body once.
	Stream(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, body StreamBody)
}

// StreamBody is the content of a long-lived answer (Edge.Stream): the
// edge's own (edge.Stream serves it).
type StreamBody = edge.StreamBody

// Target is what the quota report and the dashboard need about a target
// beyond the catalog: its connection, its upstream model's index in the
// connection's quota spec, its ledger slot and the upstream model name.
type Target struct {
	Conn, Model, Slot int
	Upstream          string
}

// Ledger reads the token ledger's published state.
type Ledger interface {
	Snapshot() *ledgeractor.Snapshot
	Check(slot int, cost int64, now time.Time) (routing.Budget, time.Time)
}

// Routing reads what requests route by: the config in force, the
// targets' circuits and cooldowns, quota and token budgets.
type Routing interface {
	Now() time.Time
	// Catalog is the catalog of the config in force.
	Catalog() *catalog.Catalog
	TargetStats() *targets.Snapshot
	Target(id int) Target
	// Quota is the quota telemetry actors' handle (its reads are of
	// published state).
	Quota() *quotaactor.Handle
	Ledger() Ledger
	// QuotaAware and Threshold are OMNIROUTE_QUOTA_AWARE_ROUTING and
	// OMNIROUTE_QUOTA_APPROACHING_THRESHOLD.
	QuotaAware() bool
	Threshold() float64
}

// Keys is the keys actor's API, plus the check of a policy against the
// config in force.
type Keys interface {
	Snapshot() *ikeys.Snapshot
	Create(name string, p tenantpolicy.Policy) (ikeys.Info, string, error)
	UpdatePolicy(name string, p tenantpolicy.Policy) (ikeys.Info, error)
	Rotate(name string) (ikeys.Info, string, error)
	Revoke(name string) (ikeys.Info, error)
	// CheckPolicy refuses allowed_models that match no model and token
	// windows no request could fit, as a tenantpolicy.FieldError.
	CheckPolicy(p tenantpolicy.Policy) error
}

// RequestLog reads the request log and usage (internal/store).
type RequestLog interface {
	Requests(ctx context.Context, f store.Filter) (store.Page, error)
	Usage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error)
	UsageTotal(ctx context.Context, q store.UsageQuery) (store.UsageRow, error)
	Refusals(ctx context.Context, q store.UsageQuery) ([]store.Refusal, error)
}

// Services are the supervised services and the engines registry.
type Services interface {
	All() []*services.Handle
	Get(tool string) (*services.Handle, bool)
	// Engines lists the engines with the capability ("" for all), as
	// GET /api/engines and health show them.
	Engines(capability string) any
}

// Reloader re-reads the config file (POST /api/config/reload).
type Reloader interface {
	ReloadConfig() ReloadResult
}

// Monitor is what the dashboard shows besides routing: published
// snapshots and atomics only, so a poll never waits on an actor.
type Monitor interface {
	Version() string
	Started() time.Time
	// Status is the overall health status: "draining", or the worst of
	// the health sections' ("ok", "degraded", "down").
	Status() string
	Inflight() int64
	History() []history.Point
	Lanes() *lanes.Snapshot
	// Admission is the ingest budget's and the pressure actor's part of
	// the snapshot's "admission" object (inflight and queued bytes, the
	// pressure's severity) and the ingest's shed counts by reason.
	Admission() (ingest map[string]any, pressure map[string]any, sheds map[string]int64)
	// Windows are every limited rolling window, connections' and tenants'.
	Windows() []LimitWindow
	// Cluster is the cluster this node sees, nil on a single node.
	Cluster() map[string]any
	ConfigInfo() ConfigInfo
}

// DetailHint is what the health sections that describe supervised
// processes and their endpoints (services, engines, relay) tell callers
// the management routes refuse, in place of the detail.
const DetailHint = "pids, ports, endpoints and errors are shown to callers allowed on the management routes (loopback, or the management key)"

// Ports are the gateway's side of the operator APIs.
type Ports struct {
	Edge       Edge
	Routing    Routing
	Keys       Keys
	RequestLog RequestLog
	Services   Services
	Reloader   Reloader
	Monitor    Monitor
	Logger     *slog.Logger
	// LogsHeartbeat is the interval of the services logs stream's
	// heartbeat events.
	LogsHeartbeat time.Duration
	// DurationBuckets are the upper bounds of the request duration
	// histogram the dashboard's latency quantiles are read from.
	DurationBuckets []float64
}

// API serves the operator routes on its ports.
type API struct {
	edge      Edge
	rt        Routing
	keys      Keys
	reqlog    RequestLog
	svc       Services
	reload    Reloader
	mon       Monitor
	log       *slog.Logger
	heartbeat time.Duration
	buckets   []float64
}

// New serves the operator APIs on p.
func New(p Ports) *API {
	return &API{edge: p.Edge, rt: p.Routing, keys: p.Keys, reqlog: p.RequestLog, svc: p.Services, reload: p.Reloader,
		mon: p.Monitor, log: p.Logger, heartbeat: p.LogsHeartbeat, buckets: p.DurationBuckets}
}

// methodNotAllowed answers 405 naming the methods allowed.
func methodNotAllowed(ctx *fasthttp.RequestCtx, rid []byte, allow string) {
	ctx.Response.Header.Set(fasthttp.HeaderAllow, allow)
	WriteError(ctx, rid, apierror.CodeMethodNotAllowed, "method not allowed; use "+allow)
}

// WriteError writes the management error body
// {"error":{"message","type","code"},"requestId"}
// (edge.WriteManagementError, which the edge's refusals on operator
// routes use too) of code c: its status and code from the table of error
// codes, its message the table's filled in with args. The type follows
// the reference: server_error (5xx), not_found (404), conflict (409),
// invalid_request (others) (apierror.ManagementType).
func WriteError(ctx *fasthttp.RequestCtx, rid []byte, c apierror.Code, args ...any) {
	WriteFieldError(ctx, rid, c, "", args...)
}

// WriteFieldError is WriteError naming the field to blame (as "field",
// when not empty) for a body that failed validation.
func WriteFieldError(ctx *fasthttp.RequestCtx, rid []byte, c apierror.Code, field string, args ...any) {
	e := apierror.New(c, args...)
	edge.WriteManagementFieldError(ctx, rid, e.Status, "", e.Code, field, e.Message)
}

// writeJSON answers status with v as JSON, never cached.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(ctx, nil, apierror.CodeInternalError, "response could not be encoded")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

// own copies the request id an entry point is given (edgeRID) before
// anything uses it. The ops handlers pass it on through the Edge
// interface, which makes a parameter escape; without the copy the front
// end's stack buffer for the id would move to the heap on every request
// it serves, model calls included (160 B each), to spare the rare
// operator request one small copy.
func own(edgeRID []byte) []byte { return append([]byte(nil), edgeRID...) }
