package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/quota"
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

// Limits are per-minute budgets the token ledger enforces before a request
// is sent. 0 means no limit of that kind.
type Limits struct {
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
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
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for _, pid := range sortedKeys(f.Providers) {
		p := f.Providers[pid]
		path := "providers." + pid
		switch {
		case p.RateLimitHeaders == "custom" && len(p.CustomRateLimitHeaders) == 0:
			add("%s.custom_rate_limit_headers: rate_limit_headers \"custom\" needs at least one dimension", path)
		case p.RateLimitHeaders != "custom" && len(p.CustomRateLimitHeaders) > 0:
			add("%s.custom_rate_limit_headers: only used with rate_limit_headers \"custom\" (it is %q)", path, p.RateLimitHeaders)
		case !slices.Contains(quota.FamilyNames(), p.RateLimitHeaders) && p.RateLimitHeaders != "":
			add("%s.rate_limit_headers: %q is not a mapping; want one of %s", path, p.RateLimitHeaders, strings.Join(quota.FamilyNames(), ", "))
		default:
			for i, d := range p.CustomRateLimitHeaders {
				for _, h := range []string{d.Limit, d.Remaining, d.Reset} {
					if h != "" && !headerRE.MatchString(h) {
						add("%s.custom_rate_limit_headers[%d]: %q is not a header name (letters, digits and '-')", path, i, h)
					}
				}
				if d.Reset != "" && d.ResetUnit == "" {
					add("%s.custom_rate_limit_headers[%d].reset_unit: a reset header needs its unit (%s)", path, i, strings.Join(quota.ResetUnitNames(), ", "))
				}
			}
			if len(errs) == 0 {
				if _, err := HeaderMapping(p); err != nil {
					add("%s.%v", path, err)
				}
			}
		}
		if q := p.QuotaAPI; q != nil {
			qpath := path + ".quota_api"
			if !slices.Contains(quota.PollKinds(), q.Kind) {
				add("%s.kind: %q is not a usage API; want %s", qpath, q.Kind, strings.Join(quota.PollKinds(), " or "))
			}
			if q.IntervalMS != 0 && (q.IntervalMS < 1000 || q.IntervalMS > 86400000) {
				add("%s.interval_ms: %d is out of range; want 1000 to 86400000 (default 60000)", qpath, q.IntervalMS)
			}
			if q.TimeoutMS != 0 && (q.TimeoutMS < 100 || q.TimeoutMS > 120000) {
				add("%s.timeout_ms: %d is out of range; want 100 to 120000 (default 10000)", qpath, q.TimeoutMS)
			}
			if q.BaseURL != "" {
				if u, err := url.Parse(q.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
					add("%s.base_url: %s is not an http(s) URL without credentials or query", qpath, ShownURL(q.BaseURL))
				}
			} else if strings.HasPrefix(p.BaseURL, "service://") {
				add("%s.base_url: required for a service:// provider (the usage API needs a real URL)", qpath)
			}
		}
		for _, cid := range sortedKeys(p.Connections) {
			l := p.Connections[cid].Limits
			if l == nil {
				continue
			}
			lpath := path + ".connections." + cid + ".limits"
			if l.TokensPerMinute < 0 || l.TokensPerMinute > maxLimit {
				add("%s.tokens_per_minute: %d is out of range; want 0 (none) to %d", lpath, l.TokensPerMinute, int64(maxLimit))
			}
			if l.RequestsPerMinute < 0 || l.RequestsPerMinute > maxLimit {
				add("%s.requests_per_minute: %d is out of range; want 0 (none) to %d", lpath, l.RequestsPerMinute, int64(maxLimit))
			}
		}
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
