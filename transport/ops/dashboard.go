package ops

import (
	"embed"
	"math"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/edge"
)

// The dashboard is a static page (dashboard/*: plain HTML, CSS and JS, no
// build step, nothing fetched from elsewhere) that polls one compact
// snapshot (GET /api/dashboard/snapshot) and calls the existing
// management endpoints for actions, requests and usage.
//
// The assets carry no data, so they are served to any peer the management
// guard does not refuse outright (loopback or private range; 403
// LOCAL_ONLY otherwise: Edge.Local). Everything with data or effect is
// behind the full guard (Edge.Access) and the edge's browser policy
// (Origin, Sec-Fetch-Site, content type); with OMNIROUTE_MANAGEMENT_KEY
// set the page asks for the key and sends it as a bearer token.
//
//go:embed dashboard
var dashboardFS embed.FS

const (
	// DashboardPath is the page; its assets are under DashboardPath + "/".
	DashboardPath = edge.DashboardPath
	// DashboardSnapshotPath is what the page polls.
	DashboardSnapshotPath = edge.DashboardSnapshotPath

	// Caps keep the snapshot small however many lanes and targets exist:
	// the page shows the busiest lanes and the most troubled targets first,
	// and says how many it left out.
	dashMaxLanes     = 50
	dashMaxProviders = 100
	dashMaxRates     = 20
	dashMaxLimits    = 50
)

var dashAssets = map[string]string{ // file → content type
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"app.css":    "text/css; charset=utf-8",
}

// Dashboard serves the page, its assets and the snapshot.
func (a *API) Dashboard(ctx *fasthttp.RequestCtx, p []byte, edgeRID []byte) {
	rid := own(edgeRID)
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET")
		WriteError(ctx, rid, apierror.CodeMethodNotAllowed, "use GET")
		return
	}
	if string(p) == DashboardSnapshotPath {
		if !a.edge.Access(ctx, rid) {
			return
		}
		ctx.Response.Header.Set("Cache-Control", "no-store")
		writeJSON(ctx, 200, a.DashboardSnapshot())
		return
	}
	if !a.edge.Local(ctx, rid) {
		return
	}
	name := strings.TrimPrefix(strings.TrimPrefix(string(p), DashboardPath), "/")
	if name == "" {
		name = "index.html"
	}
	ctype, ok := dashAssets[name]
	if !ok {
		WriteError(ctx, rid, apierror.CodeNotFound, "no dashboard asset "+path.Clean("/"+name)+"; open /dashboard")
		return
	}
	b, err := dashboardFS.ReadFile("dashboard/" + name)
	if err != nil {
		WriteError(ctx, rid, apierror.CodeInternalError, "dashboard asset missing from the build")
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ctx.SetContentType(ctype)
	ctx.SetStatusCode(200)
	ctx.SetBody(b)
}

type dashLane struct {
	Upstream    string `json:"upstream"`
	Tenant      string `json:"tenant"`
	QueuedCount int64  `json:"queuedCount"`
	QueuedCost  int64  `json:"queuedCost"`
}

type dashUpstream struct {
	Name        string  `json:"name"`
	Limit       int64   `json:"limit"`
	Knee        float64 `json:"knee"`
	ActiveCost  int64   `json:"activeCost"`
	QueuedCount int64   `json:"queuedCount"`
	Lanes       int     `json:"lanes"`
	Phase       string  `json:"phase"`
}

type dashProvider struct {
	Target         string     `json:"target"`
	Connection     string     `json:"connection"`
	Model          string     `json:"model"`
	Quota          string     `json:"quota"`
	QuotaSources   []string   `json:"quotaSources"`
	Circuit        string     `json:"circuit"`
	CooldownUntil  *time.Time `json:"cooldownUntil,omitempty"`
	CooldownReason string     `json:"cooldownReason,omitempty"`
	Failures       int        `json:"consecutiveFailures"`
	LastFailure    string     `json:"lastFailureReason,omitempty"`
	Attempts       uint64     `json:"attempts"`
	Successes      uint64     `json:"successes"`
}

type dashService struct {
	Tool     string `json:"tool"`
	State    string `json:"state"`
	Health   string `json:"health"`
	PID      *int   `json:"pid"`
	Restarts uint64 `json:"restarts"`
	GaveUp   bool   `json:"gaveUp"`
}

// dashHistory is the chart's series, column by column (compact JSON).
type dashHistory struct {
	T          []int64 `json:"t"` // Unix milliseconds
	Limit      []int64 `json:"limit"`
	ActiveCost []int64 `json:"activeCost"`
	QueuedCost []int64 `json:"queuedCost"`
	Inflight   []int64 `json:"inflight"`
}

// DashboardSnapshot is everything the page shows but requests and usage,
// bounded in size (dashMaxLanes, dashMaxProviders).
func (a *API) DashboardSnapshot() map[string]any {
	mon := a.mon
	now := a.rt.Now()
	pts := mon.History()
	overview := map[string]any{"inflight": mon.Inflight()}
	if len(pts) > 1 {
		last := pts[len(pts)-1]
		prev := pts[max(0, len(pts)-11)] // ten seconds back
		if dt := last.At.Sub(prev.At).Seconds(); dt > 0 {
			overview["requestsPerSecond"] = round2(float64(last.Requests-prev.Requests) / dt)
		}
		if n := last.Requests - prev.Requests; n > 0 {
			overview["errorRate"] = round2(float64(last.Errors-prev.Errors) / float64(n))
		}
		base := pts[max(0, len(pts)-61)] // the last minute
		delta := make([]uint64, len(last.Buckets))
		for i := range delta {
			delta[i] = last.Buckets[i] - base.Buckets[i]
		}
		if q := bucketQuantile(a.buckets, 0.5, delta); !math.IsNaN(q) {
			overview["p50Seconds"] = round2(q)
		}
		if q := bucketQuantile(a.buckets, 0.99, delta); !math.IsNaN(q) {
			overview["p99Seconds"] = round2(q)
		}
		overview["byTarget"], overview["byModel"] = a.dashRates(prev, last)
	}
	hist := dashHistory{}
	for _, p := range pts {
		hist.T = append(hist.T, p.At.UnixMilli())
		hist.Limit = append(hist.Limit, p.Limit)
		hist.ActiveCost = append(hist.ActiveCost, p.ActiveCost)
		hist.QueuedCost = append(hist.QueuedCost, p.QueuedCost)
		hist.Inflight = append(hist.Inflight, p.Inflight)
	}

	adm := map[string]any{"history": hist}
	var lanesOut []dashLane
	laneTotal := 0
	upstreams := []dashUpstream{}
	rejections := map[string]int64{}
	if s := mon.Lanes(); s != nil {
		adm["mode"], adm["limit"], adm["activeCost"], adm["queuedCost"], adm["queuedRequests"] = s.Mode, s.CurrentLimit, s.ActiveCost, s.QueuedCost, s.QueuedCount
		adm["globalLimit"], adm["laneCount"] = s.GlobalLimit, s.LaneCount
		for k, v := range s.RejectedByReason {
			rejections[k] += v
		}
		for i := range s.Upstreams {
			u := &s.Upstreams[i]
			upstreams = append(upstreams, dashUpstream{u.Name, u.CurrentLimit, u.KneeEstimate, u.ActiveCost, u.QueuedCount, u.LaneCount, u.Phase})
			for _, lt := range u.LaneTenants {
				if lt.QueuedCount == 0 {
					continue
				}
				laneTotal++
				lanesOut = append(lanesOut, dashLane{u.Name, lt.TenantKey, lt.QueuedCount, lt.QueuedCost})
			}
		}
	}
	sort.Slice(lanesOut, func(i, j int) bool {
		if lanesOut[i].QueuedCost != lanesOut[j].QueuedCost {
			return lanesOut[i].QueuedCost > lanesOut[j].QueuedCost
		}
		return lanesOut[i].Upstream+lanesOut[i].Tenant < lanesOut[j].Upstream+lanesOut[j].Tenant
	})
	if len(lanesOut) > dashMaxLanes {
		lanesOut = lanesOut[:dashMaxLanes]
	}
	if len(upstreams) > dashMaxProviders {
		upstreams = upstreams[:dashMaxProviders]
	}
	ingest, pressure, sheds := mon.Admission()
	for k, n := range sheds {
		rejections[k] += n
	}
	adm["lanes"], adm["queuedLanes"], adm["upstreams"], adm["rejections"] = nonNil(lanesOut), laneTotal, upstreams, rejections
	adm["ingest"] = ingest
	if pressure != nil {
		adm["pressure"] = pressure
	}

	providers, troubled := a.dashProviders(now)
	services := []dashService{}
	for _, h := range a.svc.All() {
		st := h.Status()
		services = append(services, dashService{st.Tool, string(st.State), string(st.Health), st.PID, st.Restarts, st.GaveUp})
	}
	out := map[string]any{
		"at": now.UnixMilli(), "status": mon.Status(), "version": mon.Version(),
		"uptimeSeconds": int64(now.Sub(mon.Started()) / time.Second),
		"overview":      overview, "admission": adm,
		"providers": providers, "providerCount": len(a.rt.Catalog().Targets), "config": mon.ConfigInfo(), "troubledProviders": troubled,
		"services": services,
	}
	// Every rolling window's use, the fullest first.
	windows := mon.Windows()
	fullestFirst(windows)
	out["limitCount"] = len(windows)
	out["limits"] = windows[:min(len(windows), dashMaxLimits)]
	if c := mon.Cluster(); c != nil { // cluster mode: the members this node sees
		out["cluster"] = c
	}
	return out
}

// dashProviders lists targets, the troubled ones (cooling, circuit not
// closed, failing, quota not healthy) first, at most dashMaxProviders.
func (a *API) dashProviders(now time.Time) ([]dashProvider, int) {
	rt, quota := a.rt, a.rt.Quota()
	tsnap := rt.TargetStats()
	cat := rt.Catalog() // the targets the config in force routes to
	out := make([]dashProvider, 0, len(cat.Targets))
	troubled := 0
	rank := func(p *dashProvider) int {
		switch {
		case p.Circuit != "closed" || p.CooldownUntil != nil:
			return 0
		case p.Failures > 0 || (p.Quota != "healthy" && p.Quota != "unknown"):
			return 1
		}
		return 2
	}
	for _, t := range cat.Targets {
		in := rt.Target(t.ID)
		p := dashProvider{Target: t.Name, Connection: t.Conn.Name, Model: in.Upstream,
			Quota: quota.ModelStatus(in.Conn, in.Model, now).String(), QuotaSources: []string{}, Circuit: "closed"}
		if cs := quota.State(in.Conn); cs != nil {
			p.QuotaSources = cs.Sources
		}
		if tsnap != nil && t.ID < len(tsnap.Targets) {
			s := &tsnap.Targets[t.ID]
			p.Circuit, p.CooldownUntil, p.CooldownReason = circuitOf(s, now)
			p.Failures, p.LastFailure, p.Attempts, p.Successes = s.ConsecutiveFailures, s.LastFailureReason, s.Attempts, s.Successes
		}
		if rank(&p) < 2 {
			troubled++
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(&out[i]) < rank(&out[j]) })
	if len(out) > dashMaxProviders {
		out = out[:dashMaxProviders]
	}
	return out, troubled
}

// dashRate is one target's or model's upstream attempts per second and the
// share of them that failed, over the last ten seconds.
type dashRate struct {
	Name              string  `json:"name"`
	AttemptsPerSecond float64 `json:"attemptsPerSecond"`
	ErrorRate         float64 `json:"errorRate"`
}

// dashRates are the busiest targets and models (a model's figures are
// its targets' together), at most dashMaxRates of each.
func (a *API) dashRates(prev, last history.Point) (byTarget, byModel []dashRate) {
	dt := last.At.Sub(prev.At).Seconds()
	byTarget, byModel = []dashRate{}, []dashRate{}
	if dt <= 0 || len(prev.Targets) != len(last.Targets) {
		return
	}
	rate := func(name string, att, ok uint64) dashRate {
		r := dashRate{Name: name, AttemptsPerSecond: round2(float64(att) / dt)}
		if att > 0 && ok <= att {
			r.ErrorRate = round2(float64(att-ok) / float64(att))
		}
		return r
	}
	cat := a.rt.Catalog()
	for _, t := range cat.Targets {
		if t.ID >= len(last.Targets) {
			continue
		}
		att, ok := last.Targets[t.ID].Attempts-prev.Targets[t.ID].Attempts, last.Targets[t.ID].Successes-prev.Targets[t.ID].Successes
		if att > 0 {
			byTarget = append(byTarget, rate(t.Name, att, ok))
		}
	}
	for _, m := range cat.Models {
		var att, ok uint64
		for _, t := range m.Targets {
			if t.ID < len(last.Targets) {
				att += last.Targets[t.ID].Attempts - prev.Targets[t.ID].Attempts
				ok += last.Targets[t.ID].Successes - prev.Targets[t.ID].Successes
			}
		}
		if att > 0 {
			byModel = append(byModel, rate(m.Name, att, ok))
		}
	}
	busiest := func(s []dashRate) []dashRate {
		sort.Slice(s, func(i, j int) bool { return s[i].AttemptsPerSecond > s[j].AttemptsPerSecond })
		return s[:min(len(s), dashMaxRates)]
	}
	return busiest(byTarget), busiest(byModel)
}

// bucketQuantile estimates the q-quantile from per-bound cumulative counts
// (the bounds, then +Inf) by linear interpolation inside the bucket, as
// Prometheus' histogram_quantile does; NaN without observations.
func bucketQuantile(durationBuckets []float64, q float64, cum []uint64) float64 {
	if len(cum) == 0 || cum[len(cum)-1] == 0 {
		return math.NaN()
	}
	rank := q * float64(cum[len(cum)-1])
	for i, c := range cum {
		if float64(c) < rank {
			continue
		}
		if i == len(durationBuckets) { // +Inf: the highest finite bound
			return durationBuckets[len(durationBuckets)-1]
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = durationBuckets[i-1], cum[i-1]
		}
		in := c - below
		if in == 0 {
			return durationBuckets[i]
		}
		return lo + (durationBuckets[i]-lo)*(rank-float64(below))/float64(in)
	}
	return durationBuckets[len(durationBuckets)-1]
}

func round2(v float64) float64 { return math.Round(v*1000) / 1000 }

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
