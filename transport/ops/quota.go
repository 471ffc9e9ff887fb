package ops

import (
	"io"
	"time"

	"github.com/valyala/fasthttp"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/transport/edge"
)

// The quota report's and the route preview's paths.
const (
	QuotaPath   = edge.QuotaPath
	PreviewPath = edge.PreviewPath
)

// maxPreviewBody bounds a route preview request.
const maxPreviewBody = 1 << 20

// Preview ranks the candidates of POST /api/omniroute/route/preview
// with the live scoring rules. It sends no request upstream.
func (a *API) Preview(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	if !a.managed(ctx, rid, fasthttp.MethodPost) {
		return
	}
	if !a.edge.Body(ctx, rid) {
		return
	}
	body, tooLarge := readLimited(ctx, maxPreviewBody)
	if tooLarge {
		ctx.SetConnectionClose()
		a.edge.Error(ctx, rid, apierror.New(apierror.CodePayloadTooLarge, "a route preview body may not exceed 1 MiB (at most 100 candidates)"))
		return
	}
	cands, err := routing.ParsePreview(body)
	if err != nil {
		a.edge.Error(ctx, rid, apierror.New(apierror.CodeInvalidRoutePreview, err.Error()))
		return
	}
	ranked, sel := routing.Rank(cands)
	out := struct {
		Request struct {
			CandidateCount int `json:"candidateCount"`
		} `json:"request"`
		Selected            *string               `json:"selected"`
		Candidates          []routing.Explanation `json:"candidates"`
		LiveRequestExecuted bool                  `json:"liveRequestExecuted"`
	}{Candidates: ranked}
	out.Request.CandidateCount = len(cands)
	if sel >= 0 {
		out.Selected = &ranked[sel].ProviderID
	}
	writeJSON(ctx, 200, out)
}

// managed answers a request of another method than method with 405 and
// then holds it to the management guard: it reports whether to serve it.
func (a *API) managed(ctx *fasthttp.RequestCtx, rid []byte, method string) bool {
	if string(ctx.Method()) != method {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, method)
		a.edge.Error(ctx, rid, errMethod(method))
		return false
	}
	return a.edge.Management(ctx, rid)
}

// errMethod is the 405 of the routes that answer in the OpenAI dialect.
func errMethod(allow string) *apierror.Error {
	return apierror.New(apierror.CodeMethodNotAllowed, "method not allowed; use "+allow)
}

// readLimited returns the request body, or tooLarge past limit.
func readLimited(ctx *fasthttp.RequestCtx, limit int) ([]byte, bool) {
	if cl := ctx.Request.Header.ContentLength(); cl > limit {
		return nil, true
	}
	if !ctx.Request.IsBodyStream() {
		b := ctx.Request.Body()
		return b, len(b) > limit
	}
	b, err := io.ReadAll(io.LimitReader(ctx.RequestBodyStream(), int64(limit)+1))
	if err != nil {
		return nil, false
	}
	return b, len(b) > limit
}

// targetQuotaView is one target in GET /api/omniroute/quota.
type targetQuotaView struct {
	Target              string     `json:"target"`
	Model               string     `json:"model"`
	Quota               string     `json:"quota"`
	Circuit             string     `json:"circuit"`
	CooldownUntil       *time.Time `json:"cooldownUntil,omitempty"`
	CooldownReason      string     `json:"cooldownReason,omitempty"`
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	ErrorRate           float64    `json:"errorRate"`
	LastFailureReason   string     `json:"lastFailureReason,omitempty"`
	TokenBudget         string     `json:"tokenBudget"`
	Eligible            bool       `json:"eligible"`
}

type connQuotaView struct {
	*quotaactor.ConnState
	Ledger  []ledgeractor.SlotView `json:"ledger"`
	Targets []targetQuotaView      `json:"targets"`
}

var budgetNames = map[routing.Budget]string{routing.BudgetUnconfigured: "unlimited", routing.BudgetAffordable: "available",
	routing.BudgetExhausted: "exhausted", routing.BudgetInsufficient: "insufficient"}

// Quota serves GET /api/omniroute/quota: every connection's state,
// values and sources, its token budgets, and each target's circuit and
// cooldown. Credentials never appear: they are not in any snapshot.
func (a *API) Quota(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	if !a.managed(ctx, rid, fasthttp.MethodGet) {
		return
	}
	rt, quota, ledger := a.rt, a.rt.Quota(), a.rt.Ledger()
	now := rt.Now()
	lsnap := ledger.Snapshot()
	tsnap := rt.TargetStats()
	conns := make([]connQuotaView, quota.Len())
	for i := range conns {
		conns[i] = connQuotaView{ConnState: quota.State(i), Ledger: []ledgeractor.SlotView{}, Targets: []targetQuotaView{}}
	}
	cat := rt.Catalog() // the connections and targets in force
	if lsnap != nil {
		for _, c := range cat.Connections {
			for _, s := range lsnap.Slots {
				if s.Connection == c.Name && c.ID < len(conns) {
					conns[c.ID].Ledger = append(conns[c.ID].Ledger, s)
				}
			}
		}
	}
	for _, t := range cat.Targets {
		in := rt.Target(t.ID)
		v := targetQuotaView{Target: t.Name, Model: in.Upstream, Quota: quota.ModelStatus(in.Conn, in.Model, now).String(), Circuit: "closed"}
		cand := routing.Candidate{CapabilityScore: 1, HealthScore: 1, Quota: quota.ModelStatus(in.Conn, in.Model, now)}
		if tsnap != nil && t.ID < len(tsnap.Targets) {
			s := &tsnap.Targets[t.ID]
			v.Circuit, v.CooldownUntil, v.CooldownReason = circuitOf(s, now)
			cand.Cooling = v.CooldownUntil != nil && !s.Open
			if v.Circuit == "open" {
				cand.Circuit = routing.CircuitOpen
			}
			v.ConsecutiveFailures, v.ErrorRate, v.LastFailureReason = s.ConsecutiveFailures, s.ErrorRate, s.LastFailureReason
		}
		b, _ := ledger.Check(in.Slot, 0, now)
		cand.Budget = b
		v.TokenBudget = budgetNames[b]
		if !rt.QuotaAware() {
			cand.Quota, cand.Budget = 0, routing.BudgetUnconfigured
		}
		_, v.Eligible = routing.Score(&cand)
		conns[in.Conn].Targets = append(conns[in.Conn].Targets, v)
	}
	writeJSON(ctx, 200, struct {
		At                   time.Time       `json:"at"`
		QuotaAwareRouting    bool            `json:"quotaAwareRouting"`
		ApproachingThreshold float64         `json:"approachingThreshold"`
		Connections          []connQuotaView `json:"connections"`
	}{now, rt.QuotaAware(), rt.Threshold(), liveConns(conns)})
}

// liveConns drops the removed connections (their telemetry stopped and
// publishes no state).
func liveConns(conns []connQuotaView) []connQuotaView {
	out := conns[:0]
	for _, c := range conns {
		if c.ConnState != nil {
			out = append(out, c)
		}
	}
	return out
}

// circuitOf is a target's circuit state and, while it cools, until when
// and why: what the quota view and the dashboard both show.
func circuitOf(s *targets.Stats, now time.Time) (circuit string, until *time.Time, reason string) {
	circuit = targets.CircuitState(s.Open, s.CoolUntil, now)
	if s.CoolUntil.After(now) {
		u := s.CoolUntil
		return circuit, &u, s.CooldownReason
	}
	return circuit, nil, ""
}
