package quota

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/messages"
)

func val(d messages.QuotaDimension, src Source, limit, used, remaining float64) Value {
	v := Value{Dimension: d, Source: src}
	if limit >= 0 {
		v.Limit, v.Flags = limit, v.Flags|HasLimit
	}
	if used >= 0 {
		v.Used, v.Flags = used, v.Flags|HasUsed
	}
	if remaining >= 0 {
		v.Remaining, v.Flags = remaining, v.Flags|HasRemaining
	}
	return v
}

func TestStatusForValues(t *testing.T) {
	const u = -1 // unknown
	cases := []struct {
		name   string
		values []Value
		want   Status
	}{
		{"no values", nil, StatusUnknown},
		{"value without numbers", []Value{val(messages.DimTokens, SourceConfigured, u, u, u)}, StatusHealthy},
		{"limit only", []Value{val(messages.DimTokens, SourceConfigured, 1000, u, u)}, StatusHealthy},
		{"plenty left", []Value{val(messages.DimTokens, SourceResponseHeaders, 1000, u, 900)}, StatusHealthy},
		{"exactly at threshold", []Value{val(messages.DimTokens, SourceResponseHeaders, 1000, u, 200)}, StatusApproaching},
		{"just above threshold", []Value{val(messages.DimTokens, SourceResponseHeaders, 1000, u, 201)}, StatusHealthy},
		{"remaining zero", []Value{val(messages.DimTokens, SourceResponseHeaders, 1000, u, 0)}, StatusExhausted},
		{"remaining zero, no limit", []Value{val(messages.DimTokens, SourceResponseHeaders, u, u, 0)}, StatusExhausted},
		{"used reaches limit", []Value{val(messages.DimCredits, SourceProviderAPI, 10, 10, u)}, StatusExhausted},
		{"remaining without limit is not approaching", []Value{val(messages.DimTokens, SourceResponseHeaders, u, u, 1)}, StatusHealthy},
		{"zero limit never approaching", []Value{val(messages.DimTokens, SourceResponseHeaders, 0, u, 5)}, StatusHealthy},
		{"exhausted beats approaching", []Value{
			val(messages.DimTokens, SourceResponseHeaders, 1000, u, 100),
			val(messages.DimRequests, SourceResponseHeaders, 10, u, 0)}, StatusExhausted},
		{"any approaching dimension", []Value{
			val(messages.DimTokens, SourceResponseHeaders, 1000, u, 900),
			val(messages.DimRequests, SourceResponseHeaders, 10, u, 1)}, StatusApproaching},
	}
	for _, c := range cases {
		if got := StatusForValues(c.values, DefaultApproachingThreshold); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestCollectRanksSourcesPerDimension(t *testing.T) {
	now := t0
	est := Reading{Source: SourceEstimated, Supported: true, Values: []Value{
		val(messages.DimRequests, SourceEstimated, 100, u, 0),
		val(messages.DimTokens, SourceEstimated, 1000, u, 500),
	}}
	api := Reading{Source: SourceProviderAPI, Supported: true, Values: []Value{
		val(messages.DimRequests, SourceProviderAPI, 100, u, 80),
	}}
	// Order of adapters does not matter for rank: provider_api wins requests
	// even when the estimate came first; tokens keeps the estimate (only source).
	st := Collect([]Reading{est, api}, "", DefaultApproachingThreshold, now)
	if st.Status != StatusHealthy || len(st.Values) != 2 {
		t.Fatalf("state %+v", st)
	}
	if st.Values[0].Dimension != messages.DimRequests || st.Values[0].Source != SourceProviderAPI || st.Values[0].Remaining != 80 {
		t.Fatalf("requests kept %+v", st.Values[0])
	}
	if st.Values[1].Source != SourceEstimated {
		t.Fatalf("tokens kept %+v", st.Values[1])
	}
	// Equal rank: the earlier value stays.
	a := Reading{Source: SourceResponseHeaders, Supported: true, Values: []Value{val(messages.DimTokens, SourceResponseHeaders, 10, u, 9)}}
	b := Reading{Source: SourceResponseHeaders, Supported: true, Values: []Value{val(messages.DimTokens, SourceResponseHeaders, 10, u, 0)}}
	if st := Collect([]Reading{a, b}, "", 0.2, now); st.Values[0].Remaining != 9 || st.Status != StatusHealthy {
		t.Fatalf("tie replaced the earlier value: %+v", st)
	}
}

const u = -1

func TestCollectStates(t *testing.T) {
	now := t0
	// No adapter supports the connection: unknown, which never disables it.
	if st := Collect(nil, "", 0.2, now); st.Status != StatusUnknown || st.Supported || len(st.Values) != 0 {
		t.Fatalf("empty %+v", st)
	}
	if st := Collect([]Reading{{Source: SourceResponseHeaders}}, "", 0.2, now); st.Status != StatusUnknown || st.Supported {
		t.Fatalf("unsupported adapter %+v", st)
	}
	// A supported source that failed and returned nothing: unavailable.
	st := Collect([]Reading{{Source: SourceProviderAPI, Supported: true, Err: "GET /api/v1/key: status 500"}}, "", 0.2, now)
	if st.Status != StatusUnavailable || st.Error == "" || !st.Supported {
		t.Fatalf("failing source %+v", st)
	}
	// A failing adapter does not hide another adapter's values.
	st = Collect([]Reading{
		{Source: SourceProviderAPI, Supported: true, Err: "timeout"},
		{Source: SourceConfigured, Supported: true, Values: []Value{val(messages.DimTokens, SourceConfigured, 10000, u, u)}},
	}, "", 0.2, now)
	if st.Status != StatusHealthy || st.Error != "timeout" {
		t.Fatalf("mixed %+v", st)
	}
	// Stale values are dropped: an exhausted reading whose reset passed no
	// longer counts.
	ex := val(messages.DimTokens, SourceResponseHeaders, 1000, u, 0)
	ex.Expires = now.Add(time.Second)
	r := []Reading{{Source: SourceResponseHeaders, Supported: true, Values: []Value{ex}}}
	if st := Collect(r, "", 0.2, now); st.Status != StatusExhausted || !st.Until.Equal(now.Add(time.Second)) {
		t.Fatalf("before reset %+v", st)
	}
	if st := Collect(r, "", 0.2, now.Add(time.Second)); st.Status != StatusUnavailable {
		t.Fatalf("after reset %+v", st)
	}
	// The status holds as long as the value causing it: a healthy value
	// expiring earlier (OpenAI's 12 ms request reset) does not end it.
	short := val(messages.DimRequests, SourceResponseHeaders, 100, u, 90)
	short.Expires = now.Add(12 * time.Millisecond)
	long := val(messages.DimTokens, SourceResponseHeaders, 1000, u, 0)
	long.Expires = now.Add(time.Minute)
	st = Collect([]Reading{{Source: SourceResponseHeaders, Supported: true, Values: []Value{short, long}}}, "", 0.2, now)
	if st.Status != StatusExhausted || !st.Until.Equal(now.Add(12*time.Millisecond)) || !st.StatusUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("status horizon: %+v", st)
	}
	// Model scoping: a model's values do not leak into another model.
	scoped := val(messages.DimTokens, SourceResponseHeaders, 1000, u, 0)
	scoped.Model = "gpt-4o"
	wide := val(messages.DimCredits, SourceProviderAPI, 10, u, 5)
	rs := []Reading{{Source: SourceProviderAPI, Supported: true, Values: []Value{wide}}, {Source: SourceResponseHeaders, Supported: true, Values: []Value{scoped}}}
	if st := Collect(rs, "gpt-4o", 0.2, now); st.Status != StatusExhausted || len(st.Values) != 2 {
		t.Fatalf("gpt-4o %+v", st)
	}
	if st := Collect(rs, "gpt-4o-mini", 0.2, now); st.Status != StatusHealthy || len(st.Values) != 1 {
		t.Fatalf("gpt-4o-mini %+v", st)
	}
	// Header values about another model do not make this one unavailable:
	// nothing is known about it.
	only := []Reading{{Source: SourceResponseHeaders, Supported: true, Values: []Value{scoped}}}
	if st := Collect(only, "gpt-4o-mini", 0.2, now); st.Status != StatusUnknown || st.Supported {
		t.Fatalf("other model's headers: %+v", st)
	}
}

func TestValueJSONOmitsUnknownNumbers(t *testing.T) {
	v := val(messages.DimTokens, SourceEstimated, 1000, u, 0)
	v.Confidence = ConfidenceLow
	b, _ := json.Marshal(v)
	s := string(b)
	if !strings.Contains(s, `"remaining":0`) || strings.Contains(s, `"used"`) || !strings.Contains(s, `"source":"estimated"`) || !strings.Contains(s, `"dimension":"tokens"`) {
		t.Fatalf("json %s", s)
	}
}

func TestProviderAPIs(t *testing.T) {
	exp := t0.Add(time.Minute)
	vs, err := ParseOpenRouterKey([]byte(`{"data":{"label":"sk-or-v1-abc","limit":100,"limit_remaining":0,"limit_reset":"monthly","usage":250.5,"is_free_tier":false}}`), t0, exp)
	if err != nil || len(vs) != 1 {
		t.Fatalf("%v %+v", err, vs)
	}
	if v := vs[0]; v.Dimension != messages.DimCredits || v.Remaining != 0 || v.Limit != 100 || v.Known(HasUsed) || v.ResetAt != time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC) || v.Source != SourceProviderAPI {
		t.Fatalf("key value %+v", v)
	}
	if st := StatusForValues(vs, 0.2); st != StatusExhausted {
		t.Fatalf("spent key: %s", st)
	}
	vs, err = ParseOpenRouterKey([]byte(`{"data":{"limit":null,"limit_remaining":null,"usage":3,"free_model_daily_requests":{"used":999,"limit":1000,"remaining":1}}}`), t0, exp)
	if err != nil || len(vs) != 2 || StatusForValues(vs, 0.2) != StatusApproaching {
		t.Fatalf("unlimited key with free allowance: %v %+v", err, vs)
	}
	if _, err := ParseOpenRouterKey([]byte(`{"error":{"code":401}}`), t0, exp); err == nil {
		t.Fatal("error body accepted")
	}
	vs, err = ParseOpenRouterCredits([]byte(`{"data":{"total_credits":50,"total_usage":42.5}}`), exp)
	if err != nil || vs[0].Remaining != 7.5 || vs[0].Dimension != messages.DimCurrency {
		t.Fatalf("credits %v %+v", err, vs)
	}
	vs, err = ParseDeepSeekBalance([]byte(`{"is_available":true,"balance_infos":[{"currency":"CNY","total_balance":"110.00","granted_balance":"10.00","topped_up_balance":"100.00"}]}`), exp)
	if err != nil || vs[0].Remaining != 110 || vs[0].Unit != "CNY" || StatusForValues(vs, 0.2) != StatusHealthy {
		t.Fatalf("deepseek %v %+v", err, vs)
	}
	vs, err = ParseDeepSeekBalance([]byte(`{"is_available":false,"balance_infos":[{"currency":"USD","total_balance":"3.10"}]}`), exp)
	if err != nil || StatusForValues(vs, 0.2) != StatusExhausted {
		t.Fatalf("unavailable deepseek account %v %+v", err, vs)
	}
	if _, err := ParseDeepSeekBalance([]byte(`[]`), exp); err == nil {
		t.Fatal("array accepted")
	}
}

func FuzzProviderAPIs(f *testing.F) {
	f.Add(`{"data":{"limit":100,"limit_remaining":"5","limit_reset":"weekly","usage":1}}`)
	f.Add(`{"is_available":true,"balance_infos":[{"currency":"CNY","total_balance":"1e400"}]}`)
	f.Add(`{"data":{"total_credits":1,"total_usage":null}}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, vs := range [][]Value{
			must2(ParseOpenRouterKey([]byte(body), t0, t0)),
			must2(ParseOpenRouterCredits([]byte(body), t0)),
			must2(ParseDeepSeekBalance([]byte(body), t0)),
		} {
			for _, v := range vs {
				if v.Limit != v.Limit || v.Remaining != v.Remaining || v.Used != v.Used {
					t.Fatalf("NaN in %+v", v)
				}
			}
			StatusForValues(vs, 0.2)
		}
	})
}

func must2(vs []Value, _ error) []Value { return vs }
