package tenantlimit

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

func limits(p tenantpolicy.Policy) *Limits {
	l := LimitsOf(&p)
	return &l
}

// step is one action of a limiter script on a fake clock.
type step struct {
	at     time.Duration // since t0
	tokens int64
	cost   int64 // nano-dollars
	want   Kind  // KindNone = admitted
	// retry, when set, is the RetryAt wanted (since t0) for a refusal.
	retry time.Duration
	// settle, when >= 0, settles the reservation made by step settle
	// with the usage below, instead of reserving.
	settle int
	usage  Usage
}

func reserve(at time.Duration, tokens, cost int64, want Kind, retry time.Duration) step {
	return step{at: at, tokens: tokens, cost: cost, want: want, retry: retry, settle: -1}
}

func settle(at time.Duration, which int, u Usage) step { return step{at: at, settle: which, usage: u} }

func runScript(t *testing.T, name string, p tenantpolicy.Policy, steps []step) *State {
	t.Helper()
	var st State
	lim := limits(p)
	res := make([]Reservation, len(steps))
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.settle >= 0 {
			res[s.settle].Settle(now, s.usage)
			continue
		}
		r, out := st.Reserve(now, lim, &Request{Model: []byte("m"), Tokens: s.tokens, Cost: s.cost})
		res[i] = r
		if out.Kind != s.want || out.Allowed != (s.want == KindNone) || r.Active() != out.Allowed {
			t.Fatalf("%s step %d at %v: got %v (allowed %v), want %v", name, i, s.at, out.Kind, out.Allowed, s.want)
		}
		if s.retry != 0 && out.RetryAt != t0.Add(s.retry).UnixNano() {
			t.Fatalf("%s step %d: retry at %v, want %v", name, i, time.Duration(out.RetryAt-t0.UnixNano()), s.retry)
		}
	}
	return &st
}

func TestLimitScripts(t *testing.T) {
	sec := time.Second
	day := 24 * time.Hour
	usd := func(d float64) int64 { return pricing.Nano(d) }
	cases := []struct {
		name  string
		p     tenantpolicy.Policy
		steps []step
	}{
		{"rpm: a burst, then nothing until the first second leaves the window", tenantpolicy.Policy{RequestsPerMinute: 3}, []step{
			reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindRequests, 62*sec), // a minute, the margin second and the slot's own
			reserve(62*sec-time.Nanosecond, 0, 0, KindRequests, 62*sec),
			reserve(62*sec, 0, 0, KindNone, 0),
			reserve(62*sec, 0, 0, KindNone, 0),
			reserve(62*sec, 0, 0, KindNone, 0),
			reserve(62*sec, 0, 0, KindRequests, 124*sec),
		}},
		{"rpm: no burst across a minute boundary", tenantpolicy.Policy{RequestsPerMinute: 2}, []step{
			reserve(59*sec, 0, 0, KindNone, 0),
			reserve(59*sec+900*time.Millisecond, 0, 0, KindNone, 0),
			reserve(60*sec, 0, 0, KindRequests, 121*sec), // a fresh calendar minute gives nothing
			reserve(121*sec, 0, 0, KindNone, 0),
		}},
		{"tpm exact fit", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 600, 0, KindNone, 0),
			reserve(sec, 401, 0, KindTokens, 62*sec),
			reserve(sec, 400, 0, KindNone, 0), // exact fit
			reserve(2*sec, 1, 0, KindTokens, 62*sec),
			reserve(62*sec, 600, 0, KindNone, 0), // the 600 of second 0 left; 400 still count
			reserve(62*sec, 1, 0, KindTokens, 63*sec),
		}},
		{"tpm oversized request waits for an empty window", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 100, 0, KindNone, 0),
			reserve(0, 5000, 0, KindTokens, 62*sec),
			reserve(62*sec, 5000, 0, KindNone, 0),
			reserve(62*sec, 1, 0, KindTokens, 124*sec),
		}},
		{"settle below the estimate frees tokens at once (a stream that ended early)", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 1000, 0, KindNone, 0),
			reserve(0, 500, 0, KindTokens, 62*sec),
			settle(sec, 0, Usage{Tokens: 200, Known: true}),
			reserve(sec, 800, 0, KindNone, 0),
			reserve(sec, 1, 0, KindTokens, 62*sec),
		}},
		{"a disconnect without usage keeps the reservation", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 1000, 0, KindNone, 0),
			settle(0, 0, Usage{Known: false}),
			reserve(0, 1, 0, KindTokens, 62*sec),
		}},
		{"a fail-over is settled with every attempt's usage", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 300, 0, KindNone, 0),
			settle(0, 0, Usage{Tokens: 300 + 400, Known: true}), // 300 on the first target mid-stream, 400 on the second
			reserve(0, 301, 0, KindTokens, 62*sec),
			reserve(0, 300, 0, KindNone, 0),
		}},
		{"usage above the reservation is charged from now", tenantpolicy.Policy{TokensPerMinute: 1000}, []step{
			reserve(0, 100, 0, KindNone, 0),
			settle(2*time.Minute, 0, Usage{Tokens: 1100, Known: true}), // the window was empty again; 1000 more is charged
			reserve(2*time.Minute, 1, 0, KindTokens, 2*time.Minute+62*sec),
		}},
		{"refund returns the request and its tokens", tenantpolicy.Policy{RequestsPerMinute: 1, TokensPerMinute: 1000}, []step{
			reserve(0, 1000, 0, KindNone, 0),
			reserve(0, 1, 0, KindRequests, 62*sec),
			settle(0, 0, Usage{Refund: true, Known: true, Tokens: 999}),
			reserve(0, 1000, 0, KindNone, 0),
		}},
		{"hour and day windows at once: the request must fit all", tenantpolicy.Policy{RequestsPerMinute: 10, RequestsPerHour: 15, RequestsPerDay: 16}, []step{
			reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindNone, 0), reserve(0, 0, 0, KindNone, 0),
			reserve(sec, 0, 0, KindRequests, 62*sec),
			reserve(62*sec, 0, 0, KindNone, 0), reserve(62*sec, 0, 0, KindNone, 0), reserve(62*sec, 0, 0, KindNone, 0),
			reserve(62*sec, 0, 0, KindNone, 0), reserve(62*sec, 0, 0, KindNone, 0),
			reserve(63*sec, 0, 0, KindRequestsPerHour, 62*time.Minute), // the minute has room, the hour not
			reserve(62*time.Minute, 0, 0, KindNone, 0),
			reserve(62*time.Minute, 0, 0, KindRequestsPerDay, 24*time.Hour+2*24*time.Minute), // the hour has room, the day not
		}},
		{"concurrency cap", tenantpolicy.Policy{MaxConcurrent: 2}, []step{
			reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindNone, 0),
			reserve(0, 0, 0, KindConcurrency, sec),
			settle(sec, 0, Usage{Known: true}),
			settle(sec, 0, Usage{Known: true}), // a second settle releases nothing
			reserve(sec, 0, 0, KindNone, 0),
			reserve(sec, 0, 0, KindConcurrency, 2*sec),
		}},
		{"a refusal reserves nothing (one step or none)", tenantpolicy.Policy{MaxConcurrent: 1, TokensPerMinute: 100}, []step{
			reserve(0, 1000, 0, KindNone, 0),  // oversized into a full bucket
			settle(0, 0, Usage{Refund: true}), // gone again
			reserve(0, 60, 0, KindNone, 0),
			reserve(0, 60, 0, KindConcurrency, sec), // refused for the slot: its 60 tokens were not held...
			settle(0, 2, Usage{Tokens: 60, Known: true}),
			reserve(0, 40, 0, KindNone, 0), // ...so 40 still fit beside the first 60
		}},
		{"daily budget rolls over at midnight UTC", tenantpolicy.Policy{DailyBudgetUSD: 1}, []step{
			reserve(0, 0, usd(0.5), KindNone, 0),
			settle(0, 0, Usage{Cost: usd(1), Known: true}),
			reserve(sec, 0, 0, KindDailyBudget, 14*time.Hour), // t0 is 10:00 UTC
			reserve(14*time.Hour-time.Nanosecond, 0, 0, KindDailyBudget, 14*time.Hour),
			reserve(14*time.Hour, 0, usd(0.5), KindNone, 0),
		}},
		{"monthly budget rolls over on the first", tenantpolicy.Policy{MonthlyBudgetUSD: 10}, []step{
			reserve(0, 0, 0, KindNone, 0),
			settle(0, 0, Usage{Cost: usd(10), Known: true}),
			reserve(day, 0, 0, KindMonthlyBudget, 17*day+14*time.Hour), // 2026-04-01 00:00
			reserve(17*day+14*time.Hour, 0, 0, KindNone, 0),
		}},
		{"budget held by requests in flight refuses for a moment", tenantpolicy.Policy{DailyBudgetUSD: 1}, []step{
			reserve(0, 0, usd(0.6), KindNone, 0),
			reserve(0, 0, usd(0.6), KindDailyBudgetHeld, sec),
			settle(0, 0, Usage{Cost: usd(0.2), Known: true}),
			reserve(0, 0, usd(0.6), KindNone, 0),
		}},
		{"a request dearer than the whole budget passes once into an empty day", tenantpolicy.Policy{DailyBudgetUSD: 1}, []step{
			reserve(0, 0, usd(5), KindNone, 0),
			reserve(0, 0, usd(0.01), KindDailyBudgetHeld, sec),
			settle(0, 0, Usage{Cost: usd(3), Known: true}),
			reserve(0, 0, 0, KindDailyBudget, 14*time.Hour),
		}},
		{"a settle after midnight only drops yesterday's hold", tenantpolicy.Policy{DailyBudgetUSD: 1}, []step{
			reserve(0, 0, usd(0.9), KindNone, 0),
			reserve(14*time.Hour, 0, usd(0.5), KindNone, 0), // a new day: nothing held in it
			settle(14*time.Hour+sec, 0, Usage{Cost: usd(0.9), Known: true}),
			reserve(14*time.Hour+sec, 0, usd(0.4), KindNone, 0), // 0.5 + 0.4 held fits
			reserve(14*time.Hour+sec, 0, usd(0.2), KindDailyBudgetHeld, 14*time.Hour+2*sec),
		}},
		{"spent budgets are named before rates", tenantpolicy.Policy{DailyBudgetUSD: 1, RequestsPerMinute: 1}, []step{
			reserve(0, 0, 0, KindNone, 0),
			settle(0, 0, Usage{Cost: usd(2), Known: true}),
			reserve(0, 0, 0, KindDailyBudget, 14*time.Hour),
		}},
	}
	for _, c := range cases {
		runScript(t, c.name, c.p, c.steps)
	}
}

func TestModelNotAllowed(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{AllowedModels: []string{"claude-*"}})
	if _, res := st.Reserve(t0, lim, &Request{Model: []byte("gpt-4o")}); res.Allowed || res.Kind != KindModel {
		t.Fatalf("%+v", res)
	}
	r, res := st.Reserve(t0, lim, &Request{Model: []byte("claude-haiku-4-5")})
	if !res.Allowed || !r.Active() {
		t.Fatalf("%+v", res)
	}
	e := (&Result{Kind: KindModel, Now: t0}).APIError()
	if e.Status != 403 || e.Code != "model_not_allowed" || e.RetryAfter != 0 {
		t.Fatalf("%+v", e)
	}
}

func TestErrors(t *testing.T) {
	res := Result{Kind: KindTokens, Now: t0, RetryAt: t0.Add(1500 * time.Millisecond).UnixNano()}
	e := res.APIError()
	if e.Status != 429 || e.Code != "rate_limit_exceeded" || e.Reason != "tokens_per_minute" || e.RetryAfter != 2 {
		t.Fatalf("%+v", e)
	}
	b := (&Result{Kind: KindMonthlyBudget, Now: t0, RetryAt: t0.Add(time.Hour).UnixNano()}).APIError()
	if b.Status != 402 || b.Code != "budget_exceeded" || b.Reason != "monthly_budget_usd" || b.RetryAfter != 3600 {
		t.Fatalf("%+v", b)
	}
	// Rendered in both dialects, the limit is named.
	for _, f := range []apierror.Format{apierror.OpenAI, apierror.Anthropic} {
		var v struct {
			Type  string
			Error struct{ Type, Code, Reason string }
		}
		if err := json.Unmarshal(b.Append(nil, f, "req_1"), &v); err != nil || v.Error.Code != "budget_exceeded" || v.Error.Reason != "monthly_budget_usd" {
			t.Fatalf("dialect %d: %+v %v", f, v, err)
		}
		if f == apierror.Anthropic && v.Error.Type != "billing_error" {
			t.Fatalf("anthropic type %q", v.Error.Type)
		}
	}
	for _, k := range Kinds() {
		ki := kinds[k]
		d := ki.Code.Def()
		if ki.Name == "" || d.Status == 0 || d.Code == "" || d.Type == "" || apierror.AnthropicType(d.Status) == "" || ki.Message == "" || k.String() != ki.Name {
			t.Errorf("kind %d is incomplete: %+v", k, ki)
		}
		if k.Budget() != (d.Code == "budget_exceeded") {
			t.Errorf("kind %s: Budget() disagrees with its code", ki.Name)
		}
	}
}

func TestHeaders(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{RequestsPerMinute: 60, TokensPerMinute: 10000})
	_, res := st.Reserve(t0, lim, &Request{Tokens: 2500})
	got := map[string]string{}
	h := res.Headers(OpenAI)
	for i := 0; i < h.Len(); i++ {
		got[h.Name(i)] = string(h.Value(i))
	}
	want := map[string]string{
		"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1m2s",
		"x-ratelimit-limit-tokens": "10000", "x-ratelimit-remaining-tokens": "7500", "x-ratelimit-reset-tokens": "1m2s",
	}
	if len(got) != len(want) {
		t.Fatalf("openai headers %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// A refusal, Anthropic style: reset instants and retry-after-ms.
	for i := 0; i < 59; i++ {
		st.Reserve(t0, lim, &Request{})
	}
	_, res = st.Reserve(t0.Add(100*time.Millisecond), lim, &Request{})
	if res.Allowed || res.Kind != KindRequests {
		t.Fatalf("61st request: %+v", res)
	}
	got = map[string]string{}
	h = res.Headers(Anthropic)
	for i := 0; i < h.Len(); i++ {
		got[h.Name(i)] = string(h.Value(i))
	}
	want = map[string]string{
		"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": "0",
		"anthropic-ratelimit-requests-reset": "2026-03-14T10:01:02Z",
		"anthropic-ratelimit-tokens-limit":   "10000", "anthropic-ratelimit-tokens-remaining": "7500",
		"anthropic-ratelimit-tokens-reset": "2026-03-14T10:01:02Z",
		"retry-after-ms":                   "61900",
	}
	if len(got) != len(want) {
		t.Fatalf("anthropic headers %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if res.RetryAfterSeconds() != 62 {
		t.Fatalf("Retry-After %d", res.RetryAfterSeconds())
	}
	// No per-minute limits: no headers.
	var free State
	_, res = free.Reserve(t0, limits(tenantpolicy.Policy{MaxConcurrent: 5}), &Request{})
	if h := res.Headers(OpenAI); h.Len() != 0 || res.Limited() {
		t.Fatalf("%d headers for a tenant without rates", h.Len())
	}
	if n := len(HeaderNames()); n != 13 {
		t.Fatalf("%d header names", n)
	}
}

func TestAppendDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", time.Nanosecond: "1ms", 12 * time.Millisecond: "12ms", time.Second: "1s",
		1500 * time.Millisecond: "1.5s", 6 * time.Minute: "6m0s", 4*time.Minute + 12172*time.Millisecond: "4m12.172s",
		time.Hour + 2*time.Minute + 3250*time.Millisecond: "1h2m3.25s", 2 * time.Hour: "2h0m0s",
	} {
		if got := string(AppendDuration(nil, d)); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
		if d >= time.Millisecond && d%time.Millisecond == 0 && string(AppendDuration(nil, d)) != d.String() {
			t.Errorf("%v: differs from Duration.String %q", d, d.String())
		}
	}
}

func TestPeriods(t *testing.T) {
	if DayEnd(DayIndex(t0)) != time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC) {
		t.Fatal("day end")
	}
	dec := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	if MonthEnd(MonthIndex(dec)) != time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("month end %v", MonthEnd(MonthIndex(dec)))
	}
	// A time in another zone is the same instant: periods are UTC.
	ny := time.FixedZone("EST", -5*3600)
	if DayIndex(time.Date(2026, 3, 14, 20, 0, 0, 0, ny)) != DayIndex(time.Date(2026, 3, 15, 1, 0, 0, 0, time.UTC)) {
		t.Fatal("day index is not UTC")
	}
}

func TestSeedAndView(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{DailyBudgetUSD: 1, MonthlyBudgetUSD: 5})
	st.Seed(t0, pricing.Nano(1), pricing.Nano(2))
	if _, res := st.Reserve(t0, lim, &Request{}); res.Kind != KindDailyBudget {
		t.Fatalf("seeded day spend ignored: %v", res.Kind)
	}
	v := st.View(t0, lim)
	if v.DaySpent != pricing.Nano(1) || v.MonthSpent != pricing.Nano(2) || v.Refused[KindDailyBudget] != 1 || v.Admitted != 0 {
		t.Fatalf("%+v", v)
	}
	if v := st.View(t0.Add(24*time.Hour), lim); v.DaySpent != 0 || v.MonthSpent != pricing.Nano(2) {
		t.Fatalf("next day: %+v", v)
	}
}

// TestAddSpent: spend read after a state was put in service is added to
// what the state counted meanwhile, in the day and month of the read; a
// period the counters moved past is left alone, one they have not reached
// yet starts from the read. RaiseSpent (a state that counted all along,
// whose figure the read holds) takes the larger of the two instead.
func TestAddSpent(t *testing.T) {
	lim := limits(tenantpolicy.Policy{DailyBudgetUSD: 100, MonthlyBudgetUSD: 1000})
	nextDay, nextMonth := t0.Add(24*time.Hour), time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC)
	for _, c := range []struct {
		name               string
		raise              bool      // RaiseSpent, not AddSpent
		settledAt          time.Time // when the state settled $1 (zero: nothing)
		at, viewAt         time.Time
		day, month         float64 // what the read found (USD)
		wantDay, wantMonth float64
	}{
		{"fresh state", false, time.Time{}, t0, t0, 2, 3, 2, 3},
		{"added to what the state counted", false, t0, t0, t0, 2, 3, 3, 4},
		{"a day the counters moved past keeps its own figure", false, nextDay, t0, nextDay, 2, 3, 1, 4},
		{"a month the counters moved past too", false, nextMonth, t0, nextMonth, 2, 3, 1, 1},
		{"a later read starts the new period", false, t0, nextDay, nextDay, 2, 3, 2, 4},
		{"negative figures add nothing", false, t0, t0, t0, -2, -3, 1, 1},
		{"raise: fresh state", true, time.Time{}, t0, t0, 2, 3, 2, 3},
		{"raise: the read holds what the state counted", true, t0, t0, t0, 2, 3, 2, 3},
		{"raise: the state counted more than the read", true, t0, t0, t0, 0.5, 0.25, 1, 1},
		{"raise: a day the counters moved past keeps its own figure", true, nextDay, t0, nextDay, 2, 3, 1, 3},
		{"raise: a month the counters moved past too", true, nextMonth, t0, nextMonth, 2, 3, 1, 1},
		{"raise: a later read starts the new period", true, t0, nextDay, nextDay, 2, 3, 2, 3},
		{"raise: negative figures change nothing", true, t0, t0, t0, -2, -3, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st State
			if !c.settledAt.IsZero() {
				r, res := st.Reserve(c.settledAt, lim, &Request{Cost: pricing.Nano(1)})
				if !res.Allowed {
					t.Fatalf("reserve: %+v", res)
				}
				r.Settle(c.settledAt, Usage{Cost: pricing.Nano(1), Known: true})
			}
			if c.raise {
				st.RaiseSpent(c.at, pricing.Nano(c.day), pricing.Nano(c.month))
			} else {
				st.AddSpent(c.at, pricing.Nano(c.day), pricing.Nano(c.month))
			}
			v := st.View(c.viewAt, lim)
			if v.DaySpent != pricing.Nano(c.wantDay) || v.MonthSpent != pricing.Nano(c.wantMonth) || v.DayHeld != 0 || v.MonthHeld != 0 {
				t.Fatalf("day %d month %d held %d/%d; want day %d month %d", v.DaySpent, v.MonthSpent, v.DayHeld, v.MonthHeld,
					pricing.Nano(c.wantDay), pricing.Nano(c.wantMonth))
			}
		})
	}
}

// TestConcurrentReservationsAreAtomic drives one state from many goroutines
// with a concurrency cap, a token limit and a budget: the cap is never
// exceeded, and when all have settled nothing is left held.
func TestConcurrentReservationsAreAtomic(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{MaxConcurrent: 5, TokensPerMinute: 1 << 30, DailyBudgetUSD: 1000})
	clk := clock.NewFake(t0)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				r, res := st.Reserve(clk.Now(), lim, &Request{Tokens: 100, Cost: 10})
				if !res.Allowed {
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				r.Settle(clk.Now(), Usage{Tokens: 50, Cost: 5, Known: true})
			}
		}()
	}
	wg.Wait()
	v := st.View(clk.Now(), lim)
	if p := peak.Load(); p > 5 || p == 0 {
		t.Fatalf("peak in flight %d against a cap of 5", p)
	}
	if v.InFlight != 0 || v.DayHeld != 0 || v.DaySpent != int64(v.Settled)*5 || v.Settled != v.Admitted {
		t.Fatalf("left over: %+v", v)
	}
	if want := int64(v.Admitted) * 50; v.SettledTokens != want {
		t.Fatalf("settled tokens %d, want %d", v.SettledTokens, want)
	}
}

func TestPolicyChangeKeepsWhatWasUsed(t *testing.T) {
	var st State
	two := limits(tenantpolicy.Policy{RequestsPerMinute: 2, TokensPerMinute: 1000})
	for i := 0; i < 2; i++ {
		if _, res := st.Reserve(t0, two, &Request{Tokens: 500}); !res.Allowed {
			t.Fatal(res.Kind)
		}
	}
	// Two requests and 1000 tokens are used; the other half of the new
	// limits is free at once.
	four := limits(tenantpolicy.Policy{RequestsPerMinute: 4, TokensPerMinute: 2000})
	for i := 0; i < 2; i++ {
		if _, res := st.Reserve(t0, four, &Request{Tokens: 500}); !res.Allowed || (i == 1 && (res.Requests.Remaining != 0 || res.Tokens.Remaining != 0)) {
			t.Fatalf("after raising: %+v", res)
		}
	}
	if _, res := st.Reserve(t0, four, &Request{}); res.Kind != KindRequests {
		t.Fatalf("fifth request: %v", res.Kind)
	}
	// Lowering keeps the used part used: nothing is free.
	one := limits(tenantpolicy.Policy{RequestsPerMinute: 1, TokensPerMinute: 500})
	if _, res := st.Reserve(t0.Add(59*time.Second), one, &Request{}); res.Kind != KindRequests {
		t.Fatalf("after lowering: %v", res.Kind)
	}
}

// TestHeadersShowTheTightestWindow: the headers carry the window with the
// least left, whichever its length.
func TestHeadersShowTheTightestWindow(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{RequestsPerMinute: 15, RequestsPerDay: 20})
	for range 10 {
		st.Reserve(t0, lim, &Request{})
	}
	_, res := st.Reserve(t0, lim, &Request{})
	if res.Requests.Period != rolling.Minute || res.Requests.Limit != 15 || res.Requests.Remaining != 4 {
		t.Fatalf("after 11 of 15 a minute and 20 a day: %+v", res.Requests)
	}
	for range 6 {
		st.Reserve(t0.Add(62*time.Second), lim, &Request{})
	}
	_, res = st.Reserve(t0.Add(62*time.Second), lim, &Request{})
	if res.Requests.Period != rolling.Day || res.Requests.Limit != 20 || res.Requests.Remaining != 2 {
		t.Fatalf("after 18 of 20 a day: %+v", res.Requests)
	}
	h := res.Headers(OpenAI)
	got := map[string]string{}
	for i := 0; i < h.Len(); i++ {
		got[h.Name(i)] = string(h.Value(i))
	}
	// The day's requests leave with their 24-minute slot, a day and two
	// slots after it began (t0 is a slot boundary), 62 s of which passed.
	if got["x-ratelimit-limit-requests"] != "20" || got["x-ratelimit-remaining-requests"] != "2" || got["x-ratelimit-reset-requests"] != "24h46m58s" {
		t.Fatalf("headers %v", got)
	}
	v := st.View(t0.Add(62*time.Second), lim)
	if len(v.Windows) != 2 || v.Windows[0].Period != rolling.Minute || v.Windows[0].Used != 7 || v.Windows[1].Period != rolling.Day || v.Windows[1].Used != 18 {
		t.Fatalf("view windows %+v", v.Windows)
	}
}

// TestRequestOnlyMeetsModelAndRateOnly: a request that generates nothing
// (a token count, a refusal before routing) is checked against
// allowed_models when it names a model and charged one request of the
// request windows, never refunded; it needs no concurrency slot, no
// tokens and no budget, even when those are used up (the token window
// over its limit by usage above a reservation).
func TestRequestOnlyMeetsModelAndRateOnly(t *testing.T) {
	var st State
	lim := limits(tenantpolicy.Policy{RequestsPerMinute: 3, TokensPerMinute: 100, MaxConcurrent: 1, DailyBudgetUSD: 0.000001,
		AllowedModels: []string{"claude-*"}})
	// The whole token window is used and more (150 of 100), and the
	// day's budget is spent.
	held, r := st.Reserve(t0, lim, &Request{Model: []byte("claude-x"), Tokens: 100, Cost: 1})
	if !r.Allowed {
		t.Fatalf("setup: %+v", r)
	}
	held.Settle(t0, Usage{Tokens: 150, Cost: pricing.Nano(1), Known: true})
	// The one concurrency slot is taken, under a policy without the budget
	// and with room for tokens (the windows keep what they counted).
	roomy := *lim
	roomy.DailyBudget, roomy.Rates[rolling.Tokens][rolling.Minute] = 0, 1000
	held, r = st.Reserve(t0, &roomy, &Request{Model: []byte("claude-x"), Tokens: 1})
	if !r.Allowed {
		t.Fatalf("setup: %+v", r)
	}
	if _, r := st.Reserve(t0, lim, &Request{Model: []byte("claude-x")}); r.Allowed {
		t.Fatal("setup: a normal request passed a spent budget")
	}
	if v := st.View(t0, lim); v.InFlight != 1 || v.Tokens.Used != 151 || v.Tokens.Remaining != 0 {
		t.Fatalf("setup view: %+v", v)
	}
	count := &Request{Model: []byte("claude-x"), RequestOnly: true}
	res, r := st.Reserve(t0, lim, count)
	if !r.Allowed || res.Active() {
		t.Fatalf("the third request of the minute, request-only: %+v active %v", r, res.Active())
	}
	if _, r := st.Reserve(t0, lim, &Request{Model: []byte("gpt-4o"), RequestOnly: true}); r.Allowed || r.Kind != KindModel {
		t.Fatalf("a model outside allowed_models: %+v", r)
	}
	// t0 is a slot boundary: the three requests leave the minute's span
	// after 60 s, the margin slot and their own.
	if _, r := st.Reserve(t0, lim, &Request{RequestOnly: true}); r.Allowed || r.Kind != KindRequests || r.RetryAfter() != 62*time.Second {
		t.Fatalf("the fourth request of the minute (no model named): %+v, retry %v", r, r.RetryAfter())
	}
	held.Settle(t0, Usage{Refund: true}) // a refund gives back the normal request only
	if _, r := st.Reserve(t0, lim, count); !r.Allowed {
		t.Fatalf("after the normal request's refund: %+v", r)
	}
	v := st.View(t0, lim)
	if v.InFlight != 0 || v.Requests.Remaining != 0 || v.Tokens.Used != 150 {
		t.Fatalf("view: %+v", v)
	}
}
