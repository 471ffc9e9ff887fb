package transport

import (
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
)

// The pipeline's sections of GET /api/monitoring/health (the report and
// its registry are the operator layer's, transport/gateway/opslayer):
// server and targets here, quota (quota.go), chatAdmission
// (admission.go), adaptiveAdmission (lanes.go) and relay (sidecars.go),
// added to the registry as their actors are attached.

// liveTargets is snap with only the targets cat routes to (a removed
// target keeps its state under its id, unused, until a reload brings it
// back), in id order.
func liveTargets(snap *targets.Snapshot, cat *catalog.Catalog) *targets.Snapshot {
	if snap == nil {
		return nil
	}
	live := make([]bool, len(snap.Targets))
	for _, t := range cat.Targets {
		if t.ID < len(live) {
			live[t.ID] = true
		}
	}
	out := &targets.Snapshot{At: snap.At, Targets: make([]targets.Stats, 0, len(cat.Targets))}
	for i := range snap.Targets {
		if live[i] {
			out.Targets = append(out.Targets, snap.Targets[i])
		}
	}
	return out
}

func (g *Gateway) serverHealth() (any, string) {
	return map[string]any{
		"inflightRequests":  g.active.Load(),
		"upstreamExchanges": g.inflight.Count(),
		"draining":          g.edge.Draining(),
		"models":            len(g.rc.Load().cat.Models),
		"targets":           len(g.rc.Load().cat.Targets),
		"config":            g.ConfigInfo(),
	}, "ok"
}

func (g *Gateway) targetsHealth() (any, string) {
	snap := liveTargets(g.targets.Snapshot(), g.rc.Load().cat)
	status := "ok"
	if snap != nil {
		failing := 0
		for _, t := range snap.Targets {
			if t.ConsecutiveFailures >= 3 {
				failing++
			}
		}
		if failing > 0 {
			status = "degraded"
		}
		if failing == len(snap.Targets) && failing > 0 {
			status = "down"
		}
	}
	return snap, status
}
