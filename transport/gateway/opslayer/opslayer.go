// Package opslayer is the operator layer of the composition root: the
// operator APIs (package transport/ops) on the actors' handles the root
// spawned and the narrow reads of the pipeline it is given
// (port.Pipeline), the health report (GET /api/monitoring/health: the
// registry of sections, the pipeline's and the root's layers', and the
// handler), and the dashboard's history (the history actor and the
// sampler it reads). It hands the pipeline Layer, its implementation of
// the pipeline's port on it (port.Operator): the operator rows' handlers
// for the edge's route table, the health registry, and the history's
// stop.
//
// It does not import transport (whose internal tests compose a gateway
// with the root's packages); what it reads of the pipeline is
// port.Pipeline, every read of published state or atomics.
package opslayer

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// Source is what the root builds the operator layer from
// (*transport.Assembly): the clock, the logger, the pipeline's reads, and
// where it hands the port.
type Source interface {
	Clock() clock.Clock
	Logger() *slog.Logger
	Pipeline() port.Pipeline
	AttachOperator(port.Operator)
}

// Routing are the routing actors' handles the root spawned first, and
// the cluster's port in cluster mode (nil on a single node).
type Routing struct {
	Ledger  ops.Ledger
	Quota   *quotaactor.Handle
	Targets *targets.Handle
	Cluster port.Cluster
}

// LogsHeartbeat is the interval of heartbeat events on the services logs
// stream (transport's tests shorten it).
var LogsHeartbeat = 15 * time.Second

// Layer is the operator layer behind the pipeline's port. Its handles
// are set as the root spawns them, before the gateway serves; every
// port method reads them at call time.
type Layer struct {
	clk    clock.Clock
	pipe   port.Pipeline
	rt     Routing
	api    *ops.API
	health health

	keys     *keysPort // the tenant layer's port, once attached
	ingest   *ingest.Handle
	pressure *pressureactor.Handle
	lanes    *lanes.Handle
	services ops.Services
	hist     *history.Handle
}

// New builds the operator layer on src, the routing actors and the
// request log (the node's store), and hands the pipeline its port. It
// runs before the front end starts, which builds the edge with the
// layer's handlers; the edge itself is read when a request arrives.
func New(src Source, r Routing, requests ops.RequestLog) *Layer {
	l := &Layer{clk: src.Clock(), pipe: src.Pipeline(), rt: r}
	l.health.l = l
	l.keys = &keysPort{Pipeline: l.pipe}
	l.api = ops.New(ops.Ports{Edge: edgePort{l.pipe}, Routing: routing{Pipeline: l.pipe, l: l}, Keys: l.keys, RequestLog: requests,
		Services: servicesPort{l}, Reloader: l.pipe, Monitor: monitor{l},
		Logger: src.Logger(), LogsHeartbeat: LogsHeartbeat, DurationBuckets: l.pipe.DurationBuckets()})
	if r.Cluster != nil {
		l.health.add("cluster", r.Cluster.Health, r.Cluster.Brief)
	}
	src.AttachOperator(l)
	return l
}

// AttachTenants takes the tenant layer's port (the keys API, the
// tenants' windows) and adds its health section.
func (l *Layer) AttachTenants(t port.Tenants) {
	l.keys.Tenants = t
	l.health.add("tenants", t.Health, t.Brief)
}

// AttachAdmission takes the pressure and ingest actors (the dashboard's
// admission figures and history).
func (l *Layer) AttachAdmission(p *pressureactor.Handle, i *ingest.Handle) {
	l.pressure, l.ingest = p, i
}

// AttachLanes takes the admission lanes (the history's figures).
func (l *Layer) AttachLanes(h *lanes.Handle) { l.lanes = h }

// AttachServices takes the supervised services and engines, as the
// services and engines APIs serve them.
func (l *Layer) AttachServices(s ops.Services) { l.services = s }

// StartHistory spawns the history actor, which samples the figures the
// dashboard charts once a second (sample).
func (l *Layer) StartHistory(system *actor.ActorSystem) error {
	h, err := history.Spawn(system, history.Options{Clock: l.clk, Sample: l.sample})
	if err != nil {
		return err
	}
	l.hist = h
	return nil
}

// The pipeline's port (port.Operator).

// Handlers are the operator rows' functions.
func (l *Layer) Handlers() [edge.NumHandlers]edge.HandlerFunc {
	var h [edge.NumHandlers]edge.HandlerFunc
	h[edge.HandleHealth] = func(ctx *fasthttp.RequestCtx, _ edge.Request) bool {
		l.health.serve(ctx)
		return false
	}
	h[edge.HandleProbe] = func(ctx *fasthttp.RequestCtx, _ edge.Request) bool {
		l.probe(ctx) // probes.go
		return false
	}
	h[edge.HandlePreview] = answers(l.api.Preview)
	h[edge.HandleQuota] = answers(l.api.Quota)
	h[edge.HandleRequests] = answers(l.api.Requests)
	h[edge.HandleUsage] = answers(l.api.Usage)
	h[edge.HandleReload] = answers(l.api.Reload)
	h[edge.HandleKeys] = answers(l.api.Keys)
	h[edge.HandleDashboard] = func(ctx *fasthttp.RequestCtx, r edge.Request) bool {
		l.api.Dashboard(ctx, ctx.Path(), r.RID)
		return false
	}
	h[edge.HandleServices] = func(ctx *fasthttp.RequestCtx, r edge.Request) bool {
		l.api.Services(ctx, ctx.Path(), r.RID, r.Host)
		return false
	}
	return h
}

// answers adapts an operator API that answers in full given the request
// id.
func answers(f func(ctx *fasthttp.RequestCtx, rid []byte)) edge.HandlerFunc {
	return func(ctx *fasthttp.RequestCtx, r edge.Request) bool {
		f(ctx, r.RID)
		return false
	}
}

// AddHealthSection adds a section to the health report.
func (l *Layer) AddHealthSection(name string, fn func() (any, string), brief func(body any) any) {
	l.health.add(name, fn, brief)
}

// Stop stops the history sampler (before the actors it reads).
func (l *Layer) Stop() {
	if l.hist != nil {
		l.hist.Stop()
	}
}

// DashboardSnapshot is the body GET /api/dashboard/snapshot answers.
func (l *Layer) DashboardSnapshot() map[string]any { return l.api.DashboardSnapshot() }

// sample is the history's sampler: published snapshots and atomics only.
func (l *Layer) sample(now time.Time) history.Point {
	p := history.Point{At: now, Inflight: l.pipe.Inflight(), InflightBytes: l.ingest.InflightBytes(),
		Buckets: make([]uint64, len(l.pipe.DurationBuckets())+1)}
	p.Requests, p.Errors = l.pipe.Dash(p.Buckets)
	if ts := l.rt.Targets.Snapshot(); ts != nil {
		p.Targets = make([]history.TargetCount, len(ts.Targets))
		for i := range ts.Targets {
			p.Targets[i] = history.TargetCount{Attempts: ts.Targets[i].Attempts, Successes: ts.Targets[i].Successes}
		}
	}
	if s := l.lanes.Snapshot(); s != nil {
		p.Limit, p.ActiveCost, p.QueuedCost, p.QueuedRequests = s.CurrentLimit, s.ActiveCost, s.QueuedCost, s.QueuedCount
	}
	return p
}

// Layer is the pipeline's port on the operator layer.
var _ port.Operator = (*Layer)(nil)
