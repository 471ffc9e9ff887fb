package transport

import (
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
)

// healthSection is one subsystem's part of GET /api/monitoring/health.
// fn returns the section body and its status: "ok", "degraded" or "down".
// brief, when set, is what a caller not allowed on the management routes
// sees instead of the body (no pids, ports, addresses or error texts).
type healthSection struct {
	name  string
	fn    func() (any, string)
	brief func(body any) any
}

// AddHealthSection lets embedders and subsystems add a section.
func (g *Gateway) AddHealthSection(name string, fn func() (any, string)) {
	g.health = append(g.health, healthSection{name: name, fn: fn})
}

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

var statusRank = map[string]int{"ok": 0, "degraded": 1, "down": 2}

// healthHandler always answers 200 with one section per subsystem and an
// overall status (the worst section status), so monitors can read details
// instead of guessing from a status code. A panicking section is reported
// as down rather than failing the endpoint.
//
// Health answers any caller: monitors need it. The sections that describe
// supervised processes and their endpoints (services, engines, relay) show
// their full detail only to callers the management routes would let in;
// others see states only, as /api/services would refuse them.
func (g *Gateway) healthHandler(ctx *fasthttp.RequestCtx) {
	full := g.edge.ManagementAllowed(ctx)
	out := map[string]any{}
	overall := "ok"
	if g.edge.Draining() {
		overall = "draining"
	}
	for _, s := range g.health {
		body, st := safeSection(s)
		if s.brief != nil && !full {
			body = s.brief(body)
		}
		out[s.name] = body
		if statusRank[st] > statusRank[overall] && overall != "draining" {
			overall = st
		}
	}
	out["status"] = overall
	out["version"] = g.opts.Version
	out["uptimeSeconds"] = int64(g.clk.Now().Sub(g.started) / time.Second)
	b := encodeHealth(out)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

// encodeHealth encodes the health sections. One section's figure JSON
// cannot hold (a NaN, say) must not blank the whole health: that section
// alone says what failed, and an "ok" status becomes "degraded".
func encodeHealth(out map[string]any) []byte {
	b, err := json.Marshal(out)
	if err == nil {
		return b
	}
	for name, body := range out {
		if _, e := json.Marshal(body); e != nil {
			out[name] = map[string]any{"error": "section could not be encoded: " + e.Error()}
			if out["status"] == "ok" {
				out["status"] = "degraded"
			}
		}
	}
	if b, err = json.Marshal(out); err != nil {
		return []byte(`{"status":"degraded","error":"health snapshot could not be encoded"}`)
	}
	return b
}

func safeSection(s healthSection) (body any, status string) {
	defer func() {
		if r := recover(); r != nil {
			body, status = map[string]any{"error": "section failed"}, "down"
		}
	}()
	return s.fn()
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
