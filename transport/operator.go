package transport

import (
	"time"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// The operator layer (the operator APIs of package ops, the health
// report, the dashboard's history) is the composition root's
// (transport/gateway/opslayer), built from the actors' handles the root
// spawned. The pipeline reaches it only through Operator, the port it
// declares here: the edge's operator rows are its handlers, and the
// pipeline's health sections go to its registry. What the layer reads of
// the pipeline is the Pipeline view below.

// Operator is the pipeline's port on the operator layer (package port
// declares it once; transport/gateway/opslayer implements it).
type Operator = port.Operator

// AttachOperator hands the pipeline the operator layer's port, before
// StartFront (the edge's operator rows are its handlers).
func (a *Assembly) AttachOperator(o Operator) { a.g.op = o }

// Pipeline is what the operator layer reads of the pipeline.
func (a *Assembly) Pipeline() port.Pipeline { return (*opsReads)(a.g) }

// File is the config file the gateway started on.
func (a *Assembly) File() *config.File { return a.g.opts.File }

// Redact removes secrets from s, as from every log line (redact.go).
func (a *Assembly) Redact(s string) string { return a.g.redact.String(s) }

// AddHealthSection lets embedders and subsystems add a section to
// GET /api/monitoring/health (the operator layer's registry).
func (g *Gateway) AddHealthSection(name string, fn func() (any, string)) {
	g.op.AddHealthSection(name, fn, nil)
}

// opsReads is the gateway as the operator layer reads it (port.Pipeline):
// published snapshots and atomics. It is a view of Gateway rather than
// methods on it, so that the port's method names stay out of the
// Gateway's own set.
type opsReads Gateway

func (p *opsReads) Catalog() *catalog.Catalog { return p.rc.Load().cat }

func (p *opsReads) Target(id int) ops.Target {
	in := p.qs.info.At(id)
	return ops.Target{Conn: in.Conn, Model: in.Model, Slot: in.Slot, Upstream: in.Upstream}
}

func (p *opsReads) QuotaAware() bool   { return p.qs.aware }
func (p *opsReads) Threshold() float64 { return p.qs.threshold }

// CheckPolicy holds a key's policy to the rules a config-file tenant's
// is held to (transport/limits).
func (p *opsReads) CheckPolicy(pol tenantpolicy.Policy) error {
	err := limits.CheckModels(p.rc.Load().cat, "", pol.AllowedModels)
	if err == nil {
		err = limits.CheckTokenWindows(&pol, p.qs.defOut, "")
	}
	return err
}

func (p *opsReads) Inflight() int64 { return p.metrics.inflight.Load() }

func (p *opsReads) ConnectionWindows() []ops.LimitWindow { return p.routing.ConnectionWindows() }

// Dash reads the dashboard's counters (metrics.go) into the history's
// point: the buckets made cumulative.
func (p *opsReads) Dash(into []uint64) (requests, errors uint64) {
	d := &p.metrics.dash
	requests, errors = d.requests.Load(), d.errors.Load()
	var cum uint64
	for i := range d.buckets {
		cum += d.buckets[i].Load()
		into[i] = cum
	}
	return requests, errors
}

func (p *opsReads) DurationBuckets() []float64     { return metric.DurationBuckets }
func (p *opsReads) Lanes() *lanes.Snapshot         { return (*Gateway)(p).adm.Snapshot() }
func (p *opsReads) ConfigInfo() ops.ConfigInfo     { return (*Gateway)(p).ConfigInfo() }
func (p *opsReads) ReloadConfig() ops.ReloadResult { return (*Gateway)(p).ReloadConfig() }
func (p *opsReads) Version() string                { return p.opts.Version }
func (p *opsReads) Started() time.Time             { return p.started }
func (p *opsReads) Edge() *edge.Edge               { return p.edge }
