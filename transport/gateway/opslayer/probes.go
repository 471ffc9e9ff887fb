package opslayer

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/transport/edge"
)

// Orchestrator probes, with their Kubernetes meaning:
//
//   - GET /healthz (liveness): the process serves HTTP. Always 200 while it
//     answers at all; a provider outage or a drain never fails it, since a
//     restart would not cure either.
//   - GET /readyz (readiness): send traffic here. 200 only when every check
//     of readinessChecks passes; else 503 with the failing checks and why,
//     so the pod leaves the Service until it can serve again.
//
// They are the operator layer's, beside the health report: readiness reads
// the same handles (the targets, ingest, pressure and lanes actors) and
// the edge's drain.

// readinessCheck is one condition of /readyz: ok, or the reason it fails.
type readinessCheck struct {
	name string
	fn   func(l *Layer) (ok bool, reason string)
}

// readinessChecks is the one list of what readiness means.
var readinessChecks = []readinessCheck{
	{"not_draining", func(l *Layer) (bool, string) {
		if l.pipe.Edge().Draining() {
			return false, "the gateway is shutting down (draining in-flight requests)"
		}
		return true, ""
	}},
	{"actors_started", func(l *Layer) (bool, string) {
		if l.rt.Targets == nil || l.rt.Targets.Snapshot() == nil {
			return false, "the targets actor has not published its first snapshot"
		}
		if l.ingest == nil || l.pressure == nil {
			return false, "the ingest or pressure actor is not running"
		}
		if l.lanes == nil {
			return false, "admission has not started"
		}
		if s := l.lanes.Snapshot(); s == nil || s.Shutdown {
			return false, "admission has stopped"
		}
		return true, ""
	}},
	{"target_usable", func(l *Layer) (bool, string) {
		var s *targets.Snapshot
		if l.rt.Targets != nil {
			s = l.rt.Targets.Snapshot()
		}
		if s == nil || len(s.Targets) == 0 {
			return false, "no targets are configured"
		}
		now := l.clk.Now()
		for i := range s.Targets {
			if targets.CircuitState(s.Targets[i].Open, s.Targets[i].CoolUntil, now) != "open" {
				return true, ""
			}
		}
		return false, "every target is cooling down or has its circuit open (see /api/omniroute/quota)"
	}},
}

// probeCheck is one check's result in the /readyz body.
type probeCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// probe answers /healthz and /readyz (the edge answered any method but
// GET and HEAD before).
func (l *Layer) probe(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if string(ctx.Path()) == edge.HealthzPath {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBodyString(`{"status":"alive"}`)
		return
	}
	out := struct {
		Status string       `json:"status"`
		Reason string       `json:"reason,omitempty"`
		Checks []probeCheck `json:"checks"`
	}{Status: "ready"}
	for _, c := range readinessChecks {
		ok, reason := c.fn(l)
		out.Checks = append(out.Checks, probeCheck{c.name, ok, reason})
		if !ok && out.Status == "ready" {
			out.Status, out.Reason = "not_ready", c.name+": "+reason
		}
	}
	b, _ := json.Marshal(out)
	if out.Status != "ready" {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	} else {
		ctx.SetStatusCode(fasthttp.StatusOK)
	}
	ctx.SetBody(b)
}
