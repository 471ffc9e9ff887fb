package tenantlimit

import (
	"strconv"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/rolling"
)

// Kind is the limit that refused a request.
type Kind uint8

// Kinds, in the order check tries them (the model check first).
const (
	KindNone Kind = iota
	KindModel
	KindDailyBudget
	KindMonthlyBudget
	KindConcurrency
	KindRequests
	KindTokens
	KindRequestsPerHour
	KindRequestsPerDay
	KindTokensPerHour
	KindTokensPerDay
	KindDailyBudgetHeld
	KindMonthlyBudgetHeld
	NumKinds
)

// kindInfo is everything a refusal needs; kinds is the one table of them.
type kindInfo struct {
	// Name is the machine-readable reason (the error's "reason" field),
	// named after the policy field that refused.
	Name string
	// Code is the error the refusal answers with; its status and type
	// are the table of error codes' (apierror).
	Code    apierror.Code
	Message string
}

var kinds = [NumKinds]kindInfo{
	KindNone: {Name: "none"},
	KindModel: {"allowed_models", apierror.CodeModelNotAllowed,
		"this key may not use the requested model (allowed_models); ask for one of its allowed models"},
	KindDailyBudget: {"daily_budget_usd", apierror.CodeBudgetExceeded,
		"this key's daily spend budget (daily_budget_usd) is used up; it resets at 00:00 UTC (see Retry-After)"},
	KindMonthlyBudget: {"monthly_budget_usd", apierror.CodeBudgetExceeded,
		"this key's monthly spend budget (monthly_budget_usd) is used up; it resets on the first of the month, 00:00 UTC (see Retry-After)"},
	KindConcurrency: {"max_concurrent", apierror.CodeRateLimitExceeded,
		"this key already has its maximum of requests in flight (max_concurrent); retry when one finishes"},
	KindRequests:        rateInfo("request", "requests_per_minute", ""),
	KindTokens:          rateInfo("token", "tokens_per_minute", ", or lower max_tokens"),
	KindRequestsPerHour: rateInfo("request", "requests_per_hour", ""),
	KindRequestsPerDay:  rateInfo("request", "requests_per_day", ""),
	KindTokensPerHour:   rateInfo("token", "tokens_per_hour", ", or lower max_tokens"),
	KindTokensPerDay:    rateInfo("token", "tokens_per_day", ", or lower max_tokens"),
	KindDailyBudgetHeld: {"daily_budget_usd_in_flight", apierror.CodeRateLimitExceeded,
		"the rest of this key's daily budget (daily_budget_usd) is held by requests in flight (in cluster mode, also by other nodes, or not yet leased to this one); retry after the time in Retry-After"},
	KindMonthlyBudgetHeld: {"monthly_budget_usd_in_flight", apierror.CodeRateLimitExceeded,
		"the rest of this key's monthly budget (monthly_budget_usd) is held by requests in flight (in cluster mode, also by other nodes, or not yet leased to this one); retry after the time in Retry-After"},
}

// rateInfo is the refusal of a rolling rate window: the policy field that
// refused is its reason.
func rateInfo(what, field, also string) kindInfo {
	return kindInfo{field, apierror.CodeRateLimitExceeded,
		"this key's " + what + " rate limit (" + field + ", counted over any such window, not a calendar one) is reached; retry after the time in Retry-After" + also}
}

// rateKinds are the rate windows' kinds by dimension and period.
var rateKinds = [rolling.NumDims][rolling.NumPeriods]Kind{
	rolling.Requests: {KindRequests, KindRequestsPerHour, KindRequestsPerDay},
	rolling.Tokens:   {KindTokens, KindTokensPerHour, KindTokensPerDay},
}

// RateKind is the kind of a refusal by rate window (d, p).
func RateKind(d rolling.Dim, p rolling.Period) Kind { return rateKinds[d][p] }

// String is the kind's reason name.
func (k Kind) String() string {
	if k < NumKinds {
		return kinds[k].Name
	}
	return "unknown"
}

// Kinds lists the refusal kinds (KindNone excluded), for metrics and docs.
func Kinds() []Kind {
	out := make([]Kind, 0, NumKinds-1)
	for k := KindNone + 1; k < NumKinds; k++ {
		out = append(out, k)
	}
	return out
}

// Budget reports whether the refusal is budget_exceeded (spend), not a rate.
func (k Kind) Budget() bool { return k == KindDailyBudget || k == KindMonthlyBudget }

// APIError is the gateway error for a refused result, in either dialect via
// apierror: status, code, the limit as reason, and Retry-After in whole
// seconds. The message is a constant, so building it does not allocate.
func (r *Result) APIError() apierror.Error {
	k := kinds[r.Kind]
	e := apierror.Make(k.Code, k.Message)
	e.Reason = k.Name
	if r.Kind != KindModel {
		e.RetryAfter = r.RetryAfterSeconds()
	}
	return e
}

// Family is a rate-limit header vocabulary.
type Family uint8

// Families.
const (
	OpenAI Family = iota
	Anthropic
)

// headerNames is the one table of header names: per family, requests
// limit, remaining, reset, then tokens limit, remaining, reset.
var headerNames = [2][6]string{
	OpenAI: {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
		"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	Anthropic: {"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
		"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
}

// RetryAfterMsHeader carries the exact wait on refusals; the OpenAI and
// Anthropic SDKs prefer it to Retry-After's whole seconds.
const RetryAfterMsHeader = "retry-after-ms"

// HeaderNames lists every header Headers may set, for docs and tests.
func HeaderNames() []string {
	out := append([]string(nil), headerNames[OpenAI][:]...)
	out = append(out, headerNames[Anthropic][:]...)
	return append(out, RetryAfterMsHeader)
}

// Headers are rendered rate-limit headers, held in fixed arrays so that
// rendering them does not allocate. Set them with
//
//	for i := 0; i < h.Len(); i++ { resp.Header.SetBytesV(h.Name(i), h.Value(i)) }
type Headers struct {
	n     int
	names [7]string
	end   [7]uint16
	buf   [256]byte
}

// Len is the number of headers.
func (h *Headers) Len() int { return h.n }

// Name is header i's name.
func (h *Headers) Name(i int) string { return h.names[i] }

// Value is header i's value; it aliases h.
func (h *Headers) Value(i int) []byte {
	start := uint16(0)
	if i > 0 {
		start = h.end[i-1]
	}
	return h.buf[start:h.end[i]]
}

func (h *Headers) add(name string, value []byte) {
	h.names[h.n] = name
	h.end[h.n] = uint16(len(value))
	h.n++
}

// Headers renders r's buckets (the tightest window of requests and of
// tokens) in family f: OpenAI's resets are Go-style durations until the
// window holds nothing again ("1s", "6m0s", "12ms"), Anthropic's are RFC
// 3339 instants. Limits the tenant does not have are left out; a refusal
// adds retry-after-ms.
func (r *Result) Headers(f Family) Headers {
	var h Headers
	names := &headerNames[f&1]
	b := h.buf[:0]
	for i, bk := range [2]*Bucket{&r.Requests, &r.Tokens} {
		if bk.Limit <= 0 {
			continue
		}
		b = strconv.AppendInt(b, bk.Limit, 10)
		h.add(names[3*i], b)
		b = strconv.AppendInt(b, bk.Remaining, 10)
		h.add(names[3*i+1], b)
		if f == Anthropic {
			b = r.Now.Add(bk.Reset+time.Second-1).UTC().Truncate(time.Second).AppendFormat(b, time.RFC3339) // rounded up
		} else {
			b = AppendDuration(b, bk.Reset)
		}
		h.add(names[3*i+2], b)
	}
	if !r.Allowed && r.Kind != KindModel {
		b = strconv.AppendInt(b, int64(r.RetryAfter()/time.Millisecond), 10)
		h.add(RetryAfterMsHeader, b)
	}
	return h
}

// AppendDuration writes d rounded up to the millisecond the way OpenAI's
// reset headers (and Go's Duration.String) do: "0s", "12ms", "1s",
// "1.5s", "6m0s", "1h2m3.25s".
func AppendDuration(b []byte, d time.Duration) []byte {
	ms := int64((max(d, 0) + time.Millisecond - 1) / time.Millisecond)
	switch {
	case ms == 0:
		return append(b, "0s"...)
	case ms < 1000:
		b = strconv.AppendInt(b, ms, 10)
		return append(b, "ms"...)
	}
	h, m := ms/3_600_000, ms/60_000%60
	if h > 0 {
		b = strconv.AppendInt(b, h, 10)
		b = append(b, 'h')
	}
	if h > 0 || m > 0 {
		b = strconv.AppendInt(b, m, 10)
		b = append(b, 'm')
	}
	b = strconv.AppendInt(b, ms/1000%60, 10)
	if frac := ms % 1000; frac > 0 {
		digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		n := 3
		for digits[n-1] == '0' {
			n--
		}
		b = append(b, '.')
		b = append(b, digits[:n]...)
	}
	return append(b, 's')
}
