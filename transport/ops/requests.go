package ops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/transport/edge"
)

// The request log and usage API (docs/tenants.md):
//
//	GET /api/requests?tenant=&model=&status=&since=&until=&cursor=&limit=
//	GET /api/usage?tenant=&model=&since=&until=&bucket=hour|day&cursor=&limit=
//
// Both are behind the management guard. Times are RFC 3339 (or a UTC date,
// 2025-11-25); status is a code (429) or a class (4, 4xx). Unknown
// parameters and bad values are 400 naming the parameter.
//
// What one call costs is bounded whatever the log holds: without since,
// requests are listed from the last day and usage from the last seven;
// a page holds at most limit rows (requests: 100 by default, at most
// 1000; usage: 500, at most 5000) and reads a bounded part of the log
// (sqlite.MaxScanBatches), with next to go on.

const (
	// RequestsPath and UsagePath are the request log's and usage's routes.
	RequestsPath = edge.RequestsPath
	UsagePath    = edge.UsagePath

	// The default windows when since is not given.
	requestsWindow = 24 * time.Hour
	usageWindow    = 7 * 24 * time.Hour
	// Usage page sizes.
	usagePageDefault = 500
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
	WriteFieldError(ctx, rid, apierror.CodeInvalidQuery, name, sanitize.Message(name, "?"), msg)
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
func (a *API) getQuery(ctx *fasthttp.RequestCtx, rid []byte, allowed ...string) (map[string]string, bool) {
	if !ctx.IsGet() {
		methodNotAllowed(ctx, rid, "GET")
		return nil, false
	}
	if !a.edge.Management(ctx, rid) {
		return nil, false
	}
	q, bad, why := queryParams(ctx, allowed...)
	if bad != "" {
		badParam(ctx, rid, bad, why)
		return nil, false
	}
	return q, true
}

// Requests serves GET /api/requests.
func (a *API) Requests(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	q, ok := a.getQuery(ctx, rid, "tenant", "model", "status", "since", "until", "cursor", "limit")
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
	if f.Since.IsZero() {
		f.Since = a.rt.Now().Add(-requestsWindow)
	}
	c, cancel := context.WithTimeout(context.Background(), mgmtQueryTimeout)
	defer cancel()
	page, err := a.reqlog.Requests(c, f)
	if err != nil {
		if f.Cursor != "" && strings.Contains(err.Error(), "cursor") {
			badParam(ctx, rid, "cursor", sanitize.Message(err.Error(), "not a cursor this gateway returned"))
			return
		}
		a.log.Warn("reading the request log failed", "err", err)
		WriteError(ctx, rid, apierror.CodeRequestLogUnavailable, store.PublicMessage(err, "the request log could not be read"))
		return
	}
	out := make([]requestView, 0, len(page.Records))
	for _, r := range page.Records {
		out = append(out, requestView{Time: r.Time, RequestID: r.RequestID, TenantID: r.TenantID, TenantName: r.TenantName, Model: r.Model,
			Target: r.Target, CallerDialect: r.CallerDialect, UpstreamDialect: r.UpstreamDialect, Status: r.Status, ErrorCode: r.ErrorCode,
			Attempts: r.Attempts, Fallbacks: r.Fallbacks, AdmissionWaitMs: ms(r.AdmissionWait), TTFTMs: ms(r.TTFT), LatencyMs: ms(r.Latency),
			TokensIn: r.TokensIn, TokensOut: r.TokensOut, TokensCached: r.TokensCached, CostUSD: r.CostUSD(), ClientIP: string(r.ClientIP), Changes: r.Changes})
	}
	body := map[string]any{"requests": out}
	if page.Next != "" {
		body["next"] = page.Next
	}
	writeJSON(ctx, 200, body)
}

// Usage serves GET /api/usage.
func (a *API) Usage(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	q, ok := a.getQuery(ctx, rid, "tenant", "model", "since", "until", "bucket", "cursor", "limit")
	if !ok {
		return
	}
	uq := store.UsageQuery{Tenant: q["tenant"], Model: q["model"], Bucket: store.Day, Limit: usagePageDefault}
	switch v := q["bucket"]; v {
	case "", "day":
	case "hour":
		uq.Bucket = store.Hour
	default:
		badParam(ctx, rid, "bucket", "want hour or day")
		return
	}
	if v := q["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxUsagePage {
			badParam(ctx, rid, "limit", "want a page size between 1 and "+strconv.Itoa(store.MaxUsagePage)+" (default "+strconv.Itoa(usagePageDefault)+")")
			return
		}
		uq.Limit = n
	}
	if v := q["cursor"]; v != "" {
		k, ok := decodeUsageCursor(v)
		if !ok {
			badParam(ctx, rid, "cursor", "not a cursor this gateway returned; pass the previous page's next value")
			return
		}
		uq.After = &k
	}
	if uq.Since, uq.Until, ok = timeRange(ctx, rid, q); !ok {
		return
	}
	if uq.Since.IsZero() {
		uq.Since = a.rt.Now().Add(-usageWindow).Truncate(time.Hour)
	}
	if uq.Bucket == store.Day {
		uq.Since = uq.Since.UTC().Truncate(24 * time.Hour) // day rows count whole days
	}
	c, cancel := context.WithTimeout(context.Background(), mgmtQueryTimeout)
	defer cancel()
	page := uq
	page.Limit++ // one more tells whether there is a next page
	rows, err := a.reqlog.Usage(c, page)
	var total store.UsageRow
	var refused []store.Refusal
	if err == nil {
		total, err = a.reqlog.UsageTotal(c, uq)
	}
	if err == nil {
		refused, err = a.reqlog.Refusals(c, store.UsageQuery{Since: uq.Since, Until: uq.Until, Tenant: uq.Tenant, Limit: uq.Limit})
	}
	if err != nil {
		a.log.Warn("reading usage failed", "err", err)
		WriteError(ctx, rid, apierror.CodeRequestLogUnavailable, store.PublicMessage(err, "usage could not be read"))
		return
	}
	var next string
	if len(rows) > uq.Limit {
		rows = rows[:uq.Limit]
		next = encodeUsageCursor(rows[len(rows)-1].Key())
	}
	out := make([]usageView, 0, len(rows))
	for _, u := range rows {
		out = append(out, usageView{Start: u.Start, TenantID: u.TenantID, TenantName: u.TenantName, Model: u.Model, Requests: u.Requests, Errors: u.Errors,
			TokensIn: u.TokensIn, TokensOut: u.TokensOut, TokensCached: u.TokensCached, CostUSD: u.CostUSD()})
	}
	refusedOut := make([]refusalView, 0, len(refused))
	var refusedTotal int64
	for _, r := range refused {
		refusedOut = append(refusedOut, refusalView{TenantID: r.TenantID, TenantName: r.TenantName, Code: r.Code, Count: r.Count})
		refusedTotal += r.Count
	}
	body := map[string]any{"bucket": string(uq.Bucket), "since": uq.Since.UTC(), "usage": out, "refused": refusedOut,
		"total": map[string]any{"requests": total.Requests, "errors": total.Errors, "tokensIn": total.TokensIn,
			"tokensOut": total.TokensOut, "tokensCached": total.TokensCached, "costUsd": total.CostUSD(), "refused": refusedTotal}}
	if !uq.Until.IsZero() {
		body["until"] = uq.Until.UTC()
	}
	if next != "" {
		body["next"] = next
	}
	writeJSON(ctx, 200, body)
}

// refusalView counts one tenant's requests refused with one code before
// its limits took them (in the window).
type refusalView struct {
	TenantID   string `json:"tenantId"`
	TenantName string `json:"tenantName"`
	Code       string `json:"code"`
	Count      int64  `json:"count"`
}

// A usage cursor is the last row's key as base64url JSON; the client
// passes it back unchanged.
func encodeUsageCursor(k store.UsageKey) string {
	b, _ := json.Marshal([]any{k.Start.Unix(), k.TenantID, k.Model})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeUsageCursor(s string) (store.UsageKey, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.UsageKey{}, false
	}
	var v []json.RawMessage
	var start int64
	var k store.UsageKey
	if json.Unmarshal(b, &v) != nil || len(v) != 3 || json.Unmarshal(v[0], &start) != nil ||
		json.Unmarshal(v[1], &k.TenantID) != nil || json.Unmarshal(v[2], &k.Model) != nil {
		return store.UsageKey{}, false
	}
	k.Start = time.Unix(start, 0).UTC()
	return k, true
}
