package config

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/rolling"
)

const quotaFile = `{
  "providers": {
    "openai": {"base_url": "https://api.openai.com/v1", "apis": ["chat"], "rate_limit_headers": "openai",
      "connections": {"main": {"api_key_env": "K", "limits": {"tokens_per_minute": 10000, "requests_per_minute": 60}}}},
    "openrouter": {"base_url": "https://openrouter.ai/api/v1", "apis": ["chat"], "rate_limit_headers": "openrouter",
      "quota_api": {"kind": "openrouter", "interval_ms": 30000},
      "connections": {"main": {"api_key_env": "K"}}},
    "deepseek": {"base_url": "https://api.deepseek.com/v1", "apis": ["chat"], "quota_api": {"kind": "deepseek"},
      "connections": {"main": {"api_key_env": "K"}}},
    "acme": {"base_url": "https://llm.acme.test/v1", "apis": ["chat"], "rate_limit_headers": "custom",
      "custom_rate_limit_headers": [{"dimension": "tokens", "limit": "X-Budget-Limit", "remaining": "x-budget-remaining", "reset": "x-budget-reset", "reset_unit": "milliseconds", "window": "minute", "unit": "tokens"}],
      "connections": {"main": {"api_key_env": "K"}}}
  },
  "models": {"m": {"targets": [{"connection": "openai", "model": "gpt-4o"}, {"connection": "openrouter", "model": "x"}, {"connection": "deepseek", "model": "deepseek-chat"}, {"connection": "acme", "model": "a"}]}}
}`

func TestQuotaSections(t *testing.T) {
	f, err := DecodeFile(strings.NewReader(quotaFile))
	if err != nil {
		t.Fatal(err)
	}
	if l := f.Providers["openai"].Connections["main"].Limits; l == nil || l.TokensPerMinute != 10000 || l.RequestsPerMinute != 60 {
		t.Fatalf("limits %+v", l)
	}
	js := strings.Replace(quotaFile, `"requests_per_minute": 60`, `"requests_per_minute": 60, "requests_per_day": 1500,
	  "models": {"gpt-4o-mini": {"requests_per_minute": 15, "tokens_per_day": 2000000}}`, 1)
	f, err = DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	l := f.Providers["openai"].Connections["main"].Limits
	mini, other := l.For("gpt-4o-mini"), l.For("gpt-4o")
	if mini[rolling.Requests] != [rolling.NumPeriods]int64{15, 0, 1500} || mini[rolling.Tokens] != [rolling.NumPeriods]int64{10000, 0, 2000000} {
		t.Fatalf("a model's windows replace the connection's it sets and keep the others: %+v", mini)
	}
	if other[rolling.Requests] != [rolling.NumPeriods]int64{60, 0, 1500} || other[rolling.Tokens] != [rolling.NumPeriods]int64{10000, 0, 0} {
		t.Fatalf("another model has the connection's windows: %+v", other)
	}
	m, err := HeaderMapping(f.Providers["acme"])
	if err != nil || m == nil || len(m.Fields) != 1 || m.Fields[0].Window != time.Minute {
		t.Fatalf("custom mapping %+v %v", m, err)
	}
	if m, err := HeaderMapping(f.Providers["deepseek"]); err != nil || m != nil {
		t.Fatalf("no mapping configured must read no headers: %+v %v", m, err)
	}
	or := f.Providers["openrouter"].QuotaAPI
	if or.PollInterval() != 30*time.Second || or.PollTimeout() != 10*time.Second || or.PollBaseURL(f.Providers["openrouter"].BaseURL) != "https://openrouter.ai/api/v1" {
		t.Fatalf("openrouter poll %+v", or)
	}
	ds := f.Providers["deepseek"].QuotaAPI
	if ds.PollInterval() != time.Minute || ds.PollBaseURL(f.Providers["deepseek"].BaseURL) != "https://api.deepseek.com" {
		t.Fatalf("deepseek poll base %q", ds.PollBaseURL(f.Providers["deepseek"].BaseURL))
	}
}

func TestQuotaSectionErrors(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"unknown family", `"rate_limit_headers": "openai"`, `"rate_limit_headers": "opnai"`, []string{`providers.openai.rate_limit_headers: "opnai" is not a mapping`}},
		{"custom without dimensions", `"rate_limit_headers": "openai"`, `"rate_limit_headers": "custom"`, []string{"providers.openai.custom_rate_limit_headers: rate_limit_headers \"custom\" needs"}},
		{"dimensions without custom", `"rate_limit_headers": "custom"`, `"rate_limit_headers": "openai"`, []string{"only used with rate_limit_headers \"custom\""}},
		{"bad dimension", `"dimension": "tokens"`, `"dimension": "tokenz"`, []string{`providers.acme.custom_rate_limit_headers[0].dimension: "tokenz" is not a dimension`}},
		{"reset without unit", `, "reset_unit": "milliseconds"`, ``, []string{"reset_unit: a reset header needs its unit"}},
		{"bad unit", `"reset_unit": "milliseconds"`, `"reset_unit": "ms"`, []string{`reset_unit: "ms" is not a unit`}},
		{"bad window", `"window": "minute"`, `"window": "fortnight"`, []string{`window: "fortnight" is not a window`}},
		{"bad header name", `"X-Budget-Limit"`, `"X Budget"`, []string{`"X Budget" is not a header name`}},
		{"retry header mapped", `"x-budget-remaining"`, `"retry-after"`, []string{"is the retry hint"}},
		{"bad poll kind", `{"kind": "deepseek"}`, `{"kind": "openai"}`, []string{`providers.deepseek.quota_api.kind: "openai" is not a usage API`}},
		{"poll too often", `"interval_ms": 30000`, `"interval_ms": 10`, []string{"quota_api.interval_ms: 10 is out of range"}},
		{"bad poll url", `{"kind": "deepseek"}`, `{"kind": "deepseek", "base_url": "ftp://x"}`, []string{"quota_api.base_url"}},
		{"negative limit", `"tokens_per_minute": 10000`, `"tokens_per_minute": -1`, []string{"providers.openai.connections.main.limits.tokens_per_minute: -1 is out of range"}},
		{"unknown limit field", `"requests_per_minute": 60`, `"requests_per_week": 60`, []string{`unknown field "requests_per_week"`}},
		{"a day below the minute", `"requests_per_minute": 60`, `"requests_per_minute": 60, "requests_per_day": 50`,
			[]string{"providers.openai.connections.main.limits.requests_per_day: 50 is below requests_per_minute (60): that limit could never be reached"}},
		{"an hour below the minute", `"requests_per_minute": 60`, `"requests_per_minute": 60, "tokens_per_hour": 500`,
			[]string{"limits.tokens_per_hour: 500 is below tokens_per_minute (10000)"}},
		{"a model's day below the connection's minute", `"requests_per_minute": 60`, `"requests_per_minute": 60, "models": {"gpt-4o": {"requests_per_day": 30}}`,
			[]string{`limits.models["gpt-4o"].requests_per_day: 30 is below requests_per_minute (60)`}},
		{"a model entry without limits", `"requests_per_minute": 60`, `"requests_per_minute": 60, "models": {"gpt-4o": {}}`,
			[]string{`limits.models["gpt-4o"]: sets no limit`}},
		{"a negative model limit", `"requests_per_minute": 60`, `"requests_per_minute": 60, "models": {"gpt-4o": {"tokens_per_day": -3}}`,
			[]string{`limits.models["gpt-4o"].tokens_per_day: -3 is out of range`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := strings.Replace(quotaFile, tc.from, tc.to, 1)
			if js == quotaFile {
				t.Fatalf("replacement %q not found", tc.from)
			}
			checkFileError(t, tc.name, js, tc.want)
		})
	}
}

func TestQuotaEnv(t *testing.T) {
	e := loadEnv(t, map[string]string{})
	q := e.Quota
	if !q.QuotaAwareRouting || q.ApproachingThreshold != 0.2 || q.RoutingMaxWait != 10000 || q.CooldownBase != 1000 || q.BreakerFailures != 5 || q.DefaultOutputTokens != 1024 {
		t.Fatalf("defaults %+v", q)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OMNIROUTE_QUOTA_APPROACHING_THRESHOLD": "1.5"}, `OMNIROUTE_QUOTA_APPROACHING_THRESHOLD="1.5": want a decimal between 0 and 1`},
		{map[string]string{"OMNIROUTE_QUOTA_APPROACHING_THRESHOLD": "-0.1"}, `want a decimal between 0 and 1`},
		{map[string]string{"OMNIROUTE_QUOTA_AWARE_ROUTING": "yes"}, `OMNIROUTE_QUOTA_AWARE_ROUTING="yes": want true, false, 1 or 0`},
		{map[string]string{"OMNIROUTE_COOLDOWN_BASE_MS": "5000", "OMNIROUTE_COOLDOWN_MAX_MS": "1000"}, "OMNIROUTE_COOLDOWN_MAX_MS (1000) must not be below OMNIROUTE_COOLDOWN_BASE_MS (5000)"},
		{map[string]string{"OMNIROUTE_QUOTA_COOLDOWN_MS": "0"}, "OMNIROUTE_QUOTA_COOLDOWN_MS must be greater than 0"},
	} {
		if _, err := LoadEnv(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: %v", tc.env, err)
		}
	}
}

// FuzzQuotaConfig mutates the quota sections of a valid file: the decoder
// either accepts a file whose header mappings all build, or says why not.
func FuzzQuotaConfig(f *testing.F) {
	f.Add("openai", "tokens", "reset", "seconds", "minute", int64(10), 1000)
	f.Add("custom", "requests", "x-r", "epoch_auto", "day", int64(-1), 0)
	f.Fuzz(func(t *testing.T, family, dim, reset, unit, window string, tpm int64, interval int) {
		var b bytes.Buffer
		b.WriteString(`{"providers":{"p":{"base_url":"http://127.0.0.1:9/v1","apis":["chat"],"auth":"none","rate_limit_headers":`)
		b.WriteString(quoteJSON(family))
		b.WriteString(`,"custom_rate_limit_headers":[{"dimension":` + quoteJSON(dim) + `,"remaining":"x-left","reset":` + quoteJSON(reset) + `,"reset_unit":` + quoteJSON(unit) + `,"window":` + quoteJSON(window) + `}]`)
		b.WriteString(`,"quota_api":{"kind":"deepseek","interval_ms":` + itoa(int64(interval)) + `},"connections":{"c":{"limits":{"tokens_per_minute":` + itoa(tpm) + `}}}}},"models":{"m":{"targets":[{"connection":"p"}]}}}`)
		cfg, err := DecodeFile(&b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if _, err := HeaderMapping(cfg.Providers["p"]); err != nil {
			t.Fatalf("accepted a file whose mapping fails: %v", err)
		}
	})
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
