package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

// HeaderDimension maps one quota dimension to a provider's headers, for a
// custom rate-limit header mapping.
type HeaderDimension struct {
	// Dimension is requests, tokens, input_tokens, output_tokens, credits,
	// currency, daily_requests, weekly_requests, monthly_requests or
	// rate_limit.
	Dimension string `json:"dimension"`
	// Limit, Remaining and Reset are header names (case-insensitive).
	Limit     string `json:"limit,omitempty"`
	Remaining string `json:"remaining,omitempty"`
	Reset     string `json:"reset,omitempty"`
	// ResetUnit says how Reset is written: go_duration, seconds,
	// milliseconds, rfc3339, epoch_seconds, epoch_milliseconds, epoch_auto.
	ResetUnit string `json:"reset_unit,omitempty"`
	// Window is the metering window: second, minute (default), hour, day.
	// Only per-minute token and request dimensions feed the token ledger.
	Window string `json:"window,omitempty"`
	// Unit is what the numbers count, shown in the quota endpoint.
	Unit string `json:"unit,omitempty"`
}

// QuotaAPI configures polling of a provider's usage API.
type QuotaAPI struct {
	// Kind is openrouter (GET <base_url>/key and /credits) or deepseek
	// (GET <origin>/user/balance).
	Kind string `json:"kind"`
	// IntervalMS is the time between polls (default 60000, at least 1000);
	// failures back off exponentially.
	IntervalMS int `json:"interval_ms,omitempty"`
	// TimeoutMS bounds one poll (default 10000).
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// BaseURL overrides the API root derived from the provider's base_url.
	BaseURL string `json:"base_url,omitempty"`
}

// Rates are rolling request and token limits the token ledger enforces
// before a request is sent: never more than the limit in any minute, hour
// or 24 hours (internal/rolling). 0 means no limit of that kind.
type Rates struct {
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	TokensPerHour     int64 `json:"tokens_per_hour,omitempty"`
	RequestsPerHour   int64 `json:"requests_per_hour,omitempty"`
	TokensPerDay      int64 `json:"tokens_per_day,omitempty"`
	RequestsPerDay    int64 `json:"requests_per_day,omitempty"`
}

// Windows are the rates as rolling limits.
func (r *Rates) Windows() rolling.Limits {
	var l rolling.Limits
	l[rolling.Requests] = [rolling.NumPeriods]int64{r.RequestsPerMinute, r.RequestsPerHour, r.RequestsPerDay}
	l[rolling.Tokens] = [rolling.NumPeriods]int64{r.TokensPerMinute, r.TokensPerHour, r.TokensPerDay}
	return l
}

// rateFields name Rates' windows as the file does, by dimension and
// period.
var rateFields = [rolling.NumDims][rolling.NumPeriods]string{
	rolling.Requests: {"requests_per_minute", "requests_per_hour", "requests_per_day"},
	rolling.Tokens:   {"tokens_per_minute", "tokens_per_hour", "tokens_per_day"},
}

// Limits are a connection's rates, applied to each model served through
// it (providers meter per model), and per-model rates that replace the
// connection's windows they set for that upstream model.
type Limits struct {
	Rates
	Models map[string]Rates `json:"models,omitempty"`
}

// For are the rolling limits of upstream model through the connection:
// the model's own rates where it sets them, else the connection's.
func (l *Limits) For(model string) rolling.Limits {
	w := l.Windows()
	if m, ok := l.Models[model]; ok {
		mw := m.Windows()
		for d := range mw {
			for p, v := range mw[d] {
				if v > 0 {
					w[d][p] = v
				}
			}
		}
	}
	return w
}

// Any reports whether any window is limited, for any model.
func (l *Limits) Any() bool {
	if w := l.Windows(); w.Any() {
		return true
	}
	for _, m := range l.Models {
		if w := m.Windows(); w.Any() {
			return true
		}
	}
	return false
}

// CheckWindows explains the windows of l that could never work as
// written: a longer window's limit below a shorter one's (the shorter
// could never be used up). path names l in the messages.
func CheckWindows(l rolling.Limits, path string) []string {
	var errs []string
	for d := range l {
		shorter := rolling.Period(0)
		for p := rolling.Period(1); p < rolling.NumPeriods; p++ {
			if l[d][shorter] == 0 {
				shorter = p
				continue
			}
			if v := l[d][p]; v > 0 && v < l[d][shorter] {
				errs = append(errs, fmt.Sprintf("%s.%s: %d is below %s (%d): that limit could never be reached; raise this one or lower %s",
					path, rateFields[d][p], v, rateFields[d][shorter], l[d][shorter], rateFields[d][shorter]))
			}
			if l[d][p] > 0 {
				shorter = p
			}
		}
	}
	return errs
}

// RateProblem is one rate window that cannot work as written.
type RateProblem struct {
	Field   string // "tokens_per_minute"
	Message string
}

// MinCostProblems are the token windows of l below minTokens, what a
// request without max_tokens reserves at the least (its output
// reservation, OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS): such a request
// would be larger than the whole window and pass only when the window
// holds nothing, one per window.
func MinCostProblems(l rolling.Limits, minTokens int64) []RateProblem {
	var out []RateProblem
	for p, v := range l[rolling.Tokens] {
		if v > 0 && v < minTokens {
			out = append(out, RateProblem{rateFields[rolling.Tokens][p], fmt.Sprintf("%d is below the %d tokens a request without max_tokens reserves (OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS), "+
				"so such a request could pass only into an empty window, one per %s; raise it to at least %d or lower OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS",
				v, minTokens, rolling.Period(p), minTokens)})
		}
	}
	return out
}

// CheckMinCost is MinCostProblems as messages naming path.
func CheckMinCost(l rolling.Limits, minTokens int64, path string) []string {
	var errs []string
	for _, p := range MinCostProblems(l, minTokens) {
		errs = append(errs, path+"."+p.Field+": "+p.Message)
	}
	return errs
}

// Windows of a custom header dimension.
var headerWindows = map[string]time.Duration{"": time.Minute, "second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

// HeaderMapping resolves a provider's rate-limit header mapping (nil when
// it reads none). The file has been validated, so errors are not expected.
func HeaderMapping(p Provider) (*quota.Mapping, error) {
	if p.RateLimitHeaders != "custom" {
		m, ok := quota.Family(p.RateLimitHeaders)
		if !ok {
			return nil, fmt.Errorf("unknown rate-limit header family %q", p.RateLimitHeaders)
		}
		return m, nil
	}
	fields := make([]quota.Field, 0, len(p.CustomRateLimitHeaders))
	for i, d := range p.CustomRateLimitHeaders {
		dim, ok := messages.ParseQuotaDimension(d.Dimension)
		if !ok || dim == messages.DimUnknown {
			return nil, fmt.Errorf("custom_rate_limit_headers[%d].dimension: %q is not a dimension", i, d.Dimension)
		}
		f := quota.Field{Dimension: dim, Limit: d.Limit, Remaining: d.Remaining, Reset: d.Reset, Unit: d.Unit}
		if d.ResetUnit != "" {
			u, ok := quota.ParseResetUnit(d.ResetUnit)
			if !ok {
				return nil, fmt.Errorf("custom_rate_limit_headers[%d].reset_unit: %q is not a unit; want one of %s", i, d.ResetUnit, strings.Join(quota.ResetUnitNames(), ", "))
			}
			f.ResetUnit = u
		}
		w, ok := headerWindows[d.Window]
		if !ok {
			return nil, fmt.Errorf("custom_rate_limit_headers[%d].window: %q is not a window; want second, minute, hour or day", i, d.Window)
		}
		f.Window = w
		fields = append(fields, f)
	}
	m, err := quota.NewMapping("custom", fields)
	if err != nil {
		return nil, fmt.Errorf("custom_rate_limit_headers: %v", err)
	}
	return m, nil
}

// maxLimit bounds configured limits to something a provider could grant.
const maxLimit = 1 << 40

func init() { fileValidators = append(fileValidators, validateQuota) }

func validateQuota(f *File) []string {
	var errs problems
	for pid, p := range sorted(f.Providers) {
		path := "providers." + pid
		switch {
		case p.RateLimitHeaders == "custom" && len(p.CustomRateLimitHeaders) == 0:
			errs.add("%s.custom_rate_limit_headers: rate_limit_headers \"custom\" needs at least one dimension", path)
		case p.RateLimitHeaders != "custom" && len(p.CustomRateLimitHeaders) > 0:
			errs.add("%s.custom_rate_limit_headers: only used with rate_limit_headers \"custom\" (it is %q)", path, p.RateLimitHeaders)
		case !slices.Contains(quota.FamilyNames(), p.RateLimitHeaders) && p.RateLimitHeaders != "":
			errs.add("%s.rate_limit_headers: %q is not a mapping; want one of %s", path, p.RateLimitHeaders, strings.Join(quota.FamilyNames(), ", "))
		default:
			for i, d := range p.CustomRateLimitHeaders {
				for _, h := range []string{d.Limit, d.Remaining, d.Reset} {
					if h != "" && !headerRE.MatchString(h) {
						errs.add("%s.custom_rate_limit_headers[%d]: %q is not a header name (letters, digits and '-')", path, i, h)
					}
				}
				if d.Reset != "" && d.ResetUnit == "" {
					errs.add("%s.custom_rate_limit_headers[%d].reset_unit: a reset header needs its unit (%s)", path, i, strings.Join(quota.ResetUnitNames(), ", "))
				}
			}
			if len(errs) == 0 {
				if _, err := HeaderMapping(p); err != nil {
					errs.add("%s.%v", path, err)
				}
			}
		}
		if q := p.QuotaAPI; q != nil {
			qpath := path + ".quota_api"
			if !slices.Contains(quota.PollKinds(), q.Kind) {
				errs.add("%s.kind: %q is not a usage API; want %s", qpath, q.Kind, strings.Join(quota.PollKinds(), " or "))
			}
			if q.IntervalMS != 0 && (q.IntervalMS < 1000 || q.IntervalMS > 86400000) {
				errs.add("%s.interval_ms: %d is out of range; want 1000 to 86400000 (default 60000)", qpath, q.IntervalMS)
			}
			if q.TimeoutMS != 0 && (q.TimeoutMS < 100 || q.TimeoutMS > 120000) {
				errs.add("%s.timeout_ms: %d is out of range; want 100 to 120000 (default 10000)", qpath, q.TimeoutMS)
			}
			if q.BaseURL != "" {
				if u, err := url.Parse(q.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
					errs.add("%s.base_url: %s is not an http(s) URL without credentials or query", qpath, ShownURL(q.BaseURL))
				}
			} else if strings.HasPrefix(p.BaseURL, "service://") {
				errs.add("%s.base_url: required for a service:// provider (the usage API needs a real URL)", qpath)
			}
		}
		for _, cid := range slices.Sorted(maps.Keys(p.Connections)) {
			l := p.Connections[cid].Limits
			if l == nil {
				continue
			}
			lpath := path + ".connections." + cid + ".limits"
			errs = append(errs, checkRates(&l.Rates, lpath)...)
			for m, r := range sorted(l.Models) {
				mpath := fmt.Sprintf("%s.models[%q]", lpath, m)
				if m == "" {
					errs.add("%s: an empty model name; name the upstream model as the provider meters it", mpath)
				}
				if w := r.Windows(); !w.Any() {
					errs.add("%s: sets no limit; set one of %s or remove the entry", mpath, strings.Join(rateFields[rolling.Requests][:], ", ")+", "+strings.Join(rateFields[rolling.Tokens][:], ", "))
				}
				merr := checkRates(&r, mpath)
				if len(merr) == 0 { // with the connection's windows it does not set
					merr = CheckWindows(l.For(m), mpath)
				}
				errs = append(errs, merr...)
			}
		}
	}
	return errs
}

// checkRates checks each window's range and their order.
func checkRates(r *Rates, path string) []string {
	var errs []string
	w := r.Windows()
	for d := range w {
		for p, v := range w[d] {
			if v < 0 || v > maxLimit {
				errs = append(errs, fmt.Sprintf("%s.%s: %d is out of range; want 0 (none) to %d", path, rateFields[d][p], v, int64(maxLimit)))
			}
		}
	}
	if len(errs) == 0 {
		errs = CheckWindows(w, path)
	}
	return errs
}

// PollInterval returns the effective poll interval.
func (q *QuotaAPI) PollInterval() time.Duration {
	if q.IntervalMS == 0 {
		return time.Minute
	}
	return time.Duration(q.IntervalMS) * time.Millisecond
}

// PollTimeout returns the effective poll timeout.
func (q *QuotaAPI) PollTimeout() time.Duration {
	if q.TimeoutMS == 0 {
		return 10 * time.Second
	}
	return time.Duration(q.TimeoutMS) * time.Millisecond
}

// PollBaseURL returns the API root to poll for a provider whose base URL
// is providerBase: the override, OpenRouter's base URL itself, or
// DeepSeek's origin.
func (q *QuotaAPI) PollBaseURL(providerBase string) string {
	if q.BaseURL != "" {
		return strings.TrimRight(q.BaseURL, "/")
	}
	base := strings.TrimRight(providerBase, "/")
	if q.Kind == quota.PollDeepSeek {
		if u, err := url.Parse(base); err == nil {
			return u.Scheme + "://" + u.Host
		}
	}
	return base
}
