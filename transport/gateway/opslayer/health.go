package opslayer

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// section is one subsystem's part of GET /api/monitoring/health. fn
// returns the section body and its status: "ok", "degraded" or "down".
// brief, when set, is what a caller not allowed on the management routes
// sees instead of the body (no pids, ports, addresses or error texts).
type section struct {
	name  string
	fn    func() (any, string)
	brief func(body any) any
}

// health is the registry of health sections: the pipeline's (server,
// targets, quota, admission, the relay), the root's layers' (cluster,
// tenants, services, engines) and the embedders'
// (Gateway.AddHealthSection, which may run while the gateway serves).
type health struct {
	l        *Layer
	mu       sync.RWMutex
	sections []section
}

func (h *health) add(name string, fn func() (any, string), brief func(any) any) {
	h.mu.Lock()
	h.sections = append(h.sections, section{name: name, fn: fn, brief: brief})
	h.mu.Unlock()
}

func (h *health) list() []section {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.sections
}

var statusRank = map[string]int{"ok": 0, "degraded": 1, "down": 2}

// status is the overall health status, as serve computes it.
func (h *health) status() string {
	if h.l.pipe.Edge().Draining() {
		return "draining"
	}
	overall := "ok"
	for _, s := range h.list() {
		if _, st := safeSection(s); statusRank[st] > statusRank[overall] {
			overall = st
		}
	}
	return overall
}

// serve always answers 200 with one section per subsystem and an overall
// status (the worst section status), so monitors can read details
// instead of guessing from a status code. A panicking section is reported
// as down rather than failing the endpoint.
//
// Health answers any caller: monitors need it. The sections that describe
// supervised processes and their endpoints (services, engines, relay) show
// their full detail only to callers the management routes would let in;
// others see states only, as /api/services would refuse them.
func (h *health) serve(ctx *fasthttp.RequestCtx) {
	e := h.l.pipe.Edge()
	full := e.ManagementAllowed(ctx)
	out := map[string]any{}
	overall := "ok"
	if e.Draining() {
		overall = "draining"
	}
	for _, s := range h.list() {
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
	out["version"] = h.l.pipe.Version()
	out["uptimeSeconds"] = int64(h.l.clk.Now().Sub(h.l.pipe.Started()) / time.Second)
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

func safeSection(s section) (body any, status string) {
	defer func() {
		if r := recover(); r != nil {
			body, status = map[string]any{"error": "section failed"}, "down"
		}
	}()
	return s.fn()
}
