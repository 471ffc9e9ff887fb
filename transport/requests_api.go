package transport

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/store"
)

// The request log and usage API (docs/tenants.md):
//
//	GET /api/requests?tenant=&model=&status=&since=&until=&cursor=&limit=
//	GET /api/usage?tenant=&model=&since=&until=&bucket=hour|day
//
// Both are behind the management guard. Times are RFC 3339 (or a UTC date,
// 2025-11-25); status is a code (429) or a class (4, 4xx). Unknown
// parameters and bad values are 400 naming the parameter.

const (
	requestsPath = "/api/requests"
	usagePath    = "/api/usage"
)

// requestView is one request record as the API shows it.
type requestView struct {
	Time            time.Time `json:"time"`
	RequestID       string    `json:"requestId"`
	TenantID        string    `json:"tenantId"`
	TenantName      string    `json:"tenantName"`
	Model           string    `json:"model"`
	Target          string    `json:"target"`
	CallerDialect   string    `json:"callerDialect"`
	UpstreamDialect string    `json:"upstreamDialect"`
	Status          int       `json:"status"`
	ErrorCode       string    `json:"errorCode,omitempty"`
	Attempts        int       `json:"attempts"`
	Fallbacks       int       `json:"fallbacks"`
	AdmissionWaitMs float64   `json:"admissionWaitMs"`
	TTFTMs          float64   `json:"ttftMs"`
	LatencyMs       float64   `json:"latencyMs"`
	TokensIn        int64     `json:"tokensIn"`
	TokensOut       int64     `json:"tokensOut"`
	TokensCached    int64     `json:"tokensCached"`
	CostUSD         float64   `json:"costUsd"`
	ClientIP        string    `json:"clientIp"`
	Changes         string    `json:"changes,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// usageView is one usage row.
type usageView struct {
	Start        time.Time `json:"start"`
	TenantID     string    `json:"tenantId"`
	TenantName   string    `json:"tenantName"`
	Model        string    `json:"model"`
	Requests     int64     `json:"requests"`
	Errors       int64     `json:"errors"`
	TokensIn     int64     `json:"tokensIn"`
	TokensOut    int64     `json:"tokensOut"`
	TokensCached int64     `json:"tokensCached"`
	CostUSD      float64   `json:"costUsd"`
}

// queryParams reads a GET query strictly: only the allowed parameters,
// each at most once.
func queryParams(ctx *fasthttp.RequestCtx, allowed ...string) (map[string]string, string, string) {
	out := map[string]string{}
	var bad, why string
	for k, v := range ctx.QueryArgs().All() {
		name := string(k)
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		switch {
		case bad != "":
		case !ok:
			bad, why = name, "unknown parameter; use "+strings.Join(allowed, ", ")
		case out[name] != "":
			bad, why = name, "given twice"
		default:
			out[name] = string(v)
		}
	}
	return out, bad, why
}

// parseTime reads an RFC 3339 time or a UTC date.
func parseTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func badParam(ctx *fasthttp.RequestCtx, rid []byte, name, msg string) {
	writeMgmtFieldError(ctx, rid, 400, "", "invalid_query", name, sanitize.Message(name, "?")+": "+msg)
}

// timeRange reads since and until.
func timeRange(ctx *fasthttp.RequestCtx, rid []byte, q map[string]string) (since, until time.Time, ok bool) {
	for _, n := range []string{"since", "until"} {
		v := q[n]
		if v == "" {
			continue
		}
		t, good := parseTime(v)
		if !good {
			badParam(ctx, rid, n, "want an RFC 3339 time such as 2025-11-25T14:00:00Z, or a date such as 2025-11-25")
			return since, until, false
		}
		if n == "since" {
			since = t
		} else {
			until = t
		}
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		badParam(ctx, rid, "until", "must be after since")
		return since, until, false
	}
	return since, until, true
}

const mgmtQueryTimeout = 10 * time.Second

// getQuery starts a query route: GET only, the management guard, strict
// parameters. It answers and reports false when the request goes no
// further.
func (g *Gateway) getQuery(ctx *fasthttp.RequestCtx, rid []byte, allowed ...string) (map[string]string, bool) {
	if !ctx.IsGet() {
		g.mgmtMethod(ctx, rid, "GET")
		return nil, false
	}
	if !g.management(ctx, string(rid)) {
		return nil, false
	}
	q, bad, why := queryParams(ctx, allowed...)
	if bad != "" {
		badParam(ctx, rid, bad, why)
		return nil, false
	}
	return q, true
}

func (g *Gateway) requestsAPI(ctx *fasthttp.RequestCtx, rid []byte) {
	q, ok := g.getQuery(ctx, rid, "tenant", "model", "status", "since", "until", "cursor", "limit")
	if !ok {
		return
	}
	f := store.Filter{Tenant: q["tenant"], Model: q["model"], Cursor: q["cursor"]}
	if v := q["status"]; v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToLower(v), "xx"))
		switch {
		case err != nil, n < 2, n > 5 && n < 100, n > 599:
			badParam(ctx, rid, "status", "want a status code (429) or a class (2-5, or 4xx)")
			return
		}
		f.Status = n
	}
	if v := q["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			badParam(ctx, rid, "limit", "want a page size between 1 and 1000 (default 100)")
			return
		}
		f.Limit = n
	}
	if f.Since, f.Until, ok = timeRange(ctx, rid, q); !ok {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), mgmtQueryTimeout)
	defer cancel()
	page, err := g.ten.db.Requests(c, f)
	if err != nil {
		if f.Cursor != "" && strings.Contains(err.Error(), "cursor") {
			badParam(ctx, rid, "cursor", sanitize.Message(err.Error(), "not a cursor this gateway returned"))
			return
		}
		writeMgmtError(ctx, rid, 503, "", "request_log_unavailable", sanitize.Message(err.Error(), "the request log could not be read")+"; retry")
		return
	}
	out := make([]requestView, 0, len(page.Records))
	for _, r := range page.Records {
		out = append(out, requestView{Time: r.Time, RequestID: r.RequestID, TenantID: r.TenantID, TenantName: r.TenantName, Model: r.Model,
			Target: r.Target, CallerDialect: r.CallerDialect, UpstreamDialect: r.UpstreamDialect, Status: r.Status, ErrorCode: r.ErrorCode,
			Attempts: r.Attempts, Fallbacks: r.Fallbacks, AdmissionWaitMs: ms(r.AdmissionWait), TTFTMs: ms(r.TTFT), LatencyMs: ms(r.Latency),
			TokensIn: r.TokensIn, TokensOut: r.TokensOut, TokensCached: r.TokensCached, CostUSD: pricing.USD(r.CostNano), ClientIP: string(r.ClientIP), Changes: r.Changes})
	}
	body := map[string]any{"requests": out}
	if page.Next != "" {
		body["next"] = page.Next
	}
	writeJSON(ctx, 200, body)
}

func (g *Gateway) usageAPI(ctx *fasthttp.RequestCtx, rid []byte) {
	q, ok := g.getQuery(ctx, rid, "tenant", "model", "since", "until", "bucket")
	if !ok {
		return
	}
	uq := store.UsageQuery{Tenant: q["tenant"], Bucket: store.Day}
	switch v := q["bucket"]; v {
	case "", "day":
	case "hour":
		uq.Bucket = store.Hour
	default:
		badParam(ctx, rid, "bucket", "want hour or day")
		return
	}
	if uq.Since, uq.Until, ok = timeRange(ctx, rid, q); !ok {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), mgmtQueryTimeout)
	defer cancel()
	rows, err := g.ten.db.Usage(c, uq)
	if err != nil {
		writeMgmtError(ctx, rid, 503, "", "request_log_unavailable", sanitize.Message(err.Error(), "usage could not be read")+"; retry")
		return
	}
	out := make([]usageView, 0, len(rows))
	var total usageView
	var totalNano int64
	for _, u := range rows {
		if m := q["model"]; m != "" && u.Model != m {
			continue
		}
		v := usageView{Start: u.Start, TenantID: u.TenantID, TenantName: u.TenantName, Model: u.Model, Requests: u.Requests, Errors: u.Errors,
			TokensIn: u.TokensIn, TokensOut: u.TokensOut, TokensCached: u.TokensCached, CostUSD: pricing.USD(u.CostNano)}
		out = append(out, v)
		total.Requests += v.Requests
		total.Errors += v.Errors
		total.TokensIn += v.TokensIn
		total.TokensOut += v.TokensOut
		total.TokensCached += v.TokensCached
		totalNano += u.CostNano
	}
	writeJSON(ctx, 200, map[string]any{"bucket": string(uq.Bucket), "usage": out,
		"total": map[string]any{"requests": total.Requests, "errors": total.Errors, "tokensIn": total.TokensIn,
			"tokensOut": total.TokensOut, "tokensCached": total.TokensCached, "costUsd": pricing.USD(totalNano)}})
}
