package mockprovider

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRateLimitHeaders(t *testing.T) {
	const body = `{"model":"m","messages":[]}` // 27 bytes: P = 7
	const p, c = 7, 5
	headerInt := func(t *testing.T, h http.Header, name string) int {
		t.Helper()
		v, err := strconv.Atoi(h.Get(name))
		if err != nil {
			t.Fatalf("header %s = %q: %v", name, h.Get(name), err)
		}
		return v
	}
	tests := []struct {
		family string
		check  func(t *testing.T, h http.Header)
	}{
		{FamilyOpenAI, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "x-ratelimit-limit-requests") != 10 || headerInt(t, h, "x-ratelimit-remaining-requests") != 8 ||
				headerInt(t, h, "x-ratelimit-limit-tokens") != 1000 || headerInt(t, h, "x-ratelimit-remaining-tokens") != 1000-2*(p+c) {
				t.Errorf("counts: %v", h)
			}
			for _, name := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
				d, err := time.ParseDuration(h.Get(name))
				if err != nil || d <= 0 || d > time.Minute {
					t.Errorf("%s = %q: want a Go duration within the window", name, h.Get(name))
				}
			}
		}},
		{FamilyGroq, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "x-ratelimit-remaining-requests") != 8 {
				t.Errorf("remaining requests: %v", h)
			}
			if _, err := time.ParseDuration(h.Get("x-ratelimit-reset-tokens")); err != nil {
				t.Errorf("reset tokens %q: %v", h.Get("x-ratelimit-reset-tokens"), err)
			}
		}},
		{FamilyAzure, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "x-ratelimit-remaining-requests") != 8 || headerInt(t, h, "x-ratelimit-remaining-tokens") != 1000-2*(p+c) {
				t.Errorf("counts: %v", h)
			}
			if s := headerInt(t, h, "x-ratelimit-reset-requests"); s < 1 || s > 60 {
				t.Errorf("reset seconds = %d", s)
			}
		}},
		{FamilyAnthropic, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "anthropic-ratelimit-requests-remaining") != 8 || headerInt(t, h, "anthropic-ratelimit-tokens-remaining") != 1000-2*(p+c) ||
				headerInt(t, h, "anthropic-ratelimit-input-tokens-remaining") != 1000-2*p ||
				headerInt(t, h, "anthropic-ratelimit-output-tokens-remaining") != 1000-2*c ||
				headerInt(t, h, "anthropic-ratelimit-requests-limit") != 10 {
				t.Errorf("counts: %v", h)
			}
			at, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-tokens-reset"))
			if err != nil || at.Before(time.Now().Add(-time.Second)) || at.After(time.Now().Add(61*time.Second)) {
				t.Errorf("tokens reset %q (%v): want an RFC 3339 time within the window", h.Get("anthropic-ratelimit-tokens-reset"), err)
			}
		}},
		{FamilyTogether, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "x-ratelimit-limit") != 10 || headerInt(t, h, "x-ratelimit-remaining") != 8 ||
				headerInt(t, h, "x-tokenlimit-limit") != 1000 || headerInt(t, h, "x-tokenlimit-remaining") != 1000-2*(p+c) {
				t.Errorf("counts: %v", h)
			}
			if s := headerInt(t, h, "x-ratelimit-reset"); s < 1 || s > 60 {
				t.Errorf("reset seconds = %d", s)
			}
		}},
		{FamilyMistral, func(t *testing.T, h http.Header) {
			if headerInt(t, h, "x-ratelimit-limit-tokens-minute") != 1000 || headerInt(t, h, "x-ratelimit-remaining-tokens-minute") != 1000-2*(p+c) {
				t.Errorf("counts: %v", h)
			}
			if h.Get("x-ratelimit-remaining-requests") != "" {
				t.Errorf("mistral sent a request-count header: %v", h)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.family, func(t *testing.T) {
			e := newEnv(t, Behavior{})
			e.setModels(t, map[string]Behavior{"m": {RateLimit: RateLimitSpec{Family: tc.family, LimitRequests: 10, LimitTokens: 1000, WindowMS: 60000}}})
			first := e.mustPost(t, chatPath, body)
			second := e.mustPost(t, chatPath, body)
			if first.status != 200 || second.status != 200 {
				t.Fatalf("statuses %d %d", first.status, second.status)
			}
			tc.check(t, second.header)
			// An unconfigured model gets no rate-limit headers at all.
			plain := e.mustPost(t, chatPath, `{"model":"other"}`)
			for name := range plain.header {
				if strings.HasPrefix(name, "X-Ratelimit-") || strings.HasPrefix(name, "Anthropic-") {
					t.Errorf("unconfigured model got %s", name)
				}
			}
		})
	}
}

func TestRateLimitPinnedAndErrors(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{
		"pinned": {RateLimit: RateLimitSpec{Family: FamilyAzure, RemainingRequests: ptr(-1), RemainingTokens: ptr(0)}},
		"azure429": {RateLimit: RateLimitSpec{Family: FamilyAzure, WindowMS: 6000},
			Fail: FailSpec{Mode: FailStatus, Status: 429, RetryAfter: "6"}},
		"anth429": {RateLimit: RateLimitSpec{Family: FamilyAnthropic}, Fail: FailSpec{Mode: FailStatus, Status: 429, RetryAfter: "5"}},
	})
	r := e.mustPost(t, chatPath, `{"model":"pinned"}`)
	if r.header.Get("x-ratelimit-remaining-requests") != "-1" || r.header.Get("x-ratelimit-remaining-tokens") != "0" {
		t.Errorf("pinned headers: %v", r.header)
	}
	r = e.mustPost(t, chatPath, `{"model":"azure429"}`)
	ms, err := strconv.Atoi(r.header.Get("retry-after-ms"))
	if r.status != 429 || err != nil || ms < 1 || ms > 6000 || r.header.Get("Retry-After") != "6" {
		t.Errorf("azure 429: %d headers %v", r.status, r.header)
	}
	r = e.mustPost(t, messagesPath, `{"model":"anth429"}`)
	if r.status != 429 || r.header.Get("anthropic-ratelimit-requests-remaining") != "999" || r.header.Get("retry-after") != "5" {
		t.Errorf("anthropic 429: %d headers %v", r.status, r.header)
	}
}

func TestRateLimitEnforce(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {RateLimit: RateLimitSpec{Family: FamilyOpenAI, LimitRequests: 2, WindowMS: 30000, Enforce: true}}})
	var got []int
	for range 3 {
		got = append(got, e.mustPost(t, chatPath, `{"model":"m"}`).status)
	}
	r := e.mustPost(t, chatPath, `{"model":"m"}`)
	if got[0] != 200 || got[1] != 200 || got[2] != 429 || r.status != 429 {
		t.Fatalf("statuses %v then %d, want 200 200 429 429", got, r.status)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if r.header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("remaining requests %q, want 0", r.header.Get("x-ratelimit-remaining-requests"))
	}
}
