package transport

import (
	"bytes"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/routing"
)

// management guards the quota and route-preview routes (they spawn
// nothing, so no LOCAL_ONLY guard). With OMNIROUTE_MANAGEMENT_KEY set, the
// caller must send it as a bearer token (managementKeyOK); without it, only
// loopback callers are answered.
func (g *Gateway) management(ctx *fasthttp.RequestCtx, rid string) bool {
	key := g.opts.Env.Server.ManagementKey
	if key == "" {
		if isLoopback(ctx) {
			return true
		}
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 403, Type: "permission_error", Code: "management_loopback_only",
			Message: "management routes answer only loopback callers while OMNIROUTE_MANAGEMENT_KEY is unset; set it and send it as a bearer token"})
		return false
	}
	if auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(auth) < 7 || !bytes.EqualFold(auth[:7], []byte("bearer ")) {
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 401, Type: "authentication_error", Code: "missing_management_key",
			Message: "management routes need Authorization: Bearer <OMNIROUTE_MANAGEMENT_KEY>"})
		return false
	}
	if w := g.keyGuessWait(ctx); w > 0 {
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 429, Type: "rate_limit_error", Code: "too_many_key_attempts",
			Message: tooManyGuesses(ctx, w)})
		return false
	}
	if !g.managementKeyOK(ctx) {
		g.keyGuessFailed(ctx)
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 401, Type: "authentication_error", Code: "invalid_management_key",
			Message: "the bearer token is not OMNIROUTE_MANAGEMENT_KEY"})
		return false
	}
	return true
}

// maxPreviewBody bounds a route preview request.
const maxPreviewBody = 1 << 20

// routePreview ranks the candidates of POST /api/omniroute/route/preview
// with the live scoring rules. It sends no request upstream.
func (g *Gateway) routePreview(ctx *fasthttp.RequestCtx, rid string) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "POST")
		writeError(ctx, apierror.OpenAI, rid, errMethod("POST"))
		return
	}
	if !g.management(ctx, rid) {
		return
	}
	if !managementBodyOK(ctx) {
		g.refuse(ctx, routeManagement, []byte(rid), errMgmtMediaType)
		return
	}
	body, tooLarge := readLimited(ctx, maxPreviewBody)
	if tooLarge {
		ctx.SetConnectionClose()
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 413, Type: "invalid_request_error", Code: "payload_too_large",
			Message: "a route preview body may not exceed 1 MiB (at most 100 candidates)"})
		return
	}
	cands, err := routing.ParsePreview(body)
	if err != nil {
		writeError(ctx, apierror.OpenAI, rid, &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_route_preview", Message: err.Error()})
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
	Ledger  []ledger.SlotView `json:"ledger"`
	Targets []targetQuotaView `json:"targets"`
}

var budgetNames = map[routing.Budget]string{routing.BudgetUnconfigured: "unlimited", routing.BudgetAffordable: "available",
	routing.BudgetExhausted: "exhausted", routing.BudgetInsufficient: "insufficient"}

// quotaReport serves GET /api/omniroute/quota: every connection's state,
// values and sources, its token budgets, and each target's circuit and
// cooldown. Credentials never appear: they are not in any snapshot.
func (g *Gateway) quotaReport(ctx *fasthttp.RequestCtx, rid string) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET")
		writeError(ctx, apierror.OpenAI, rid, errMethod("GET"))
		return
	}
	if !g.management(ctx, rid) {
		return
	}
	qs := g.qs
	now := g.clk.Now()
	lsnap := qs.ledger.Snapshot()
	tsnap := g.targets.Snapshot()
	conns := make([]connQuotaView, qs.quota.Len())
	for i := range conns {
		conns[i] = connQuotaView{ConnState: qs.quota.State(i), Ledger: []ledger.SlotView{}, Targets: []targetQuotaView{}}
	}
	cat := g.rc.Load().cat // the connections and targets in force
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
		in := qs.info.At(t.ID)
		v := targetQuotaView{Target: t.Name, Model: in.upstream, Quota: qs.quota.ModelStatus(in.conn, in.model, now).String(), Circuit: "closed"}
		cand := routing.Candidate{CapabilityScore: 1, HealthScore: 1, Quota: qs.quota.ModelStatus(in.conn, in.model, now)}
		if tsnap != nil && t.ID < len(tsnap.Targets) {
			s := &tsnap.Targets[t.ID]
			v.Circuit, v.CooldownUntil, v.CooldownReason = circuitOf(s, now)
			cand.Cooling = v.CooldownUntil != nil && !s.Open
			if v.Circuit == "open" {
				cand.Circuit = routing.CircuitOpen
			}
			v.ConsecutiveFailures, v.ErrorRate, v.LastFailureReason = s.ConsecutiveFailures, s.ErrorRate, s.LastFailureReason
		}
		b, _ := qs.ledger.Check(in.slot, 0, now)
		cand.Budget = b
		v.TokenBudget = budgetNames[b]
		if !qs.aware {
			cand.Quota, cand.Budget = 0, routing.BudgetUnconfigured
		}
		_, v.Eligible = routing.Score(&cand)
		conns[in.conn].Targets = append(conns[in.conn].Targets, v)
	}
	writeJSON(ctx, 200, struct {
		At                   time.Time       `json:"at"`
		QuotaAwareRouting    bool            `json:"quotaAwareRouting"`
		ApproachingThreshold float64         `json:"approachingThreshold"`
		Connections          []connQuotaView `json:"connections"`
	}{now, qs.aware, qs.threshold, liveConns(conns)})
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
