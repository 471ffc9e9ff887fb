package transport

import (
	"time"

	"github.com/omniroute/gateway/actors/history"
)

// The dashboard (package ops) charts figures the history actor samples
// once a second; the sampler reads the gateway's metrics, so it lives
// here, beside them.

// HistoryOptions are the options of the history actor, which samples the
// figures the dashboard charts once a second (from published snapshots
// and atomics only: dashSample).
func (a *Assembly) HistoryOptions() history.Options {
	return history.Options{Clock: a.g.clk, Sample: a.g.dashSample}
}

// AttachHistory hands the front end the spawned history actor.
func (a *Assembly) AttachHistory(h *history.Handle) { a.g.hist = h }

func (g *Gateway) stopDashboard() {
	if g.hist != nil {
		g.hist.Stop()
	}
}

// dashSample reads published snapshots and atomics only.
func (g *Gateway) dashSample(now time.Time) history.Point {
	p := history.Point{At: now, Inflight: g.metrics.inflight.Load(), InflightBytes: g.intake.Ingest().InflightBytes(),
		Requests: g.metrics.dash.requests.Load(), Errors: g.metrics.dash.errors.Load(),
		Buckets: make([]uint64, len(g.metrics.dash.buckets))}
	var cum uint64
	for i := range g.metrics.dash.buckets {
		cum += g.metrics.dash.buckets[i].Load()
		p.Buckets[i] = cum
	}
	if ts := g.targets.Snapshot(); ts != nil {
		p.Targets = make([]history.TargetCount, len(ts.Targets))
		for i := range ts.Targets {
			p.Targets[i] = history.TargetCount{Attempts: ts.Targets[i].Attempts, Successes: ts.Targets[i].Successes}
		}
	}
	if s := g.adm.Lanes().Snapshot(); s != nil {
		p.Limit, p.ActiveCost, p.QueuedCost, p.QueuedRequests = s.CurrentLimit, s.ActiveCost, s.QueuedCost, s.QueuedCount
	}
	return p
}
