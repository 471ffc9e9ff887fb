package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestTokens(t *testing.T) {
	getenv := func(k string) (string, bool) {
		if k == "CI_TOKEN" {
			return "rt-ci-secret", true
		}
		return "", false
	}
	ts, err := NewTokens([]config.RelayToken{
		{Name: "ci", TokenEnv: "CI_TOKEN", Models: []string{"gpt-*", "demo"}},
		{Name: "old", TokenSHA256: hash("rt-old"), ExpiresAt: "2026-04-01T00:00:00Z"},
		{Name: "all", TokenSHA256: hash("rt-all"), Models: []string{"*"}, RateLimit: &config.RelayRateLimit{Requests: 2, WindowMs: 1000}},
	}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	ci := ts.Lookup([]byte("rt-ci-secret"))
	if ci == nil || ci.Name != "ci" || ts.Lookup([]byte("rt-ci-secre")) != nil || ts.Lookup(nil) != nil || ts.Len() != 3 {
		t.Fatal("lookup by token")
	}
	for _, tc := range []struct {
		model string
		want  bool
	}{{"gpt-4o", true}, {"gpt-", true}, {"demo", true}, {"demo2", false}, {"claude", false}, {"", false}} {
		if ci.Allows(tc.model) != tc.want {
			t.Errorf("ci.Allows(%q) != %v", tc.model, tc.want)
		}
	}
	if all := ts.Lookup([]byte("rt-all")); !all.Allows("anything") || all.Limit == nil || all.Expired(t0) {
		t.Fatal("wildcard token")
	}
	old := ts.Lookup([]byte("rt-old"))
	if !old.Expired(t0) || old.Expired(time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)) || !old.Allows("x") {
		t.Fatal("expiry")
	}
	if _, err := NewTokens([]config.RelayToken{{Name: "x", TokenEnv: "MISSING"}}, getenv); err == nil || !strings.Contains(err.Error(), "MISSING is not set") {
		t.Fatalf("missing env: %v", err)
	}
	if _, err := NewTokens([]config.RelayToken{{Name: "a", TokenSHA256: hash("x")}, {Name: "b", TokenSHA256: hash("x")}}, getenv); err == nil {
		t.Fatal("duplicate token accepted")
	}
}

func TestLimiterGCRA(t *testing.T) {
	l := NewLimiter(3, 3*time.Second)
	for i, want := range []int{2, 1, 0} {
		ok, _, rem := l.Allow(t0)
		if !ok || rem != want {
			t.Fatalf("request %d: ok %v remaining %d", i, ok, rem)
		}
	}
	ok, retry, _ := l.Allow(t0)
	if ok || retry != time.Second {
		t.Fatalf("4th: ok %v retry %s; want a 1s wait", ok, retry)
	}
	if ok, retry, _ := l.Allow(t0.Add(400 * time.Millisecond)); ok || retry != 600*time.Millisecond {
		t.Fatalf("retry shrinks with time: %v %s", ok, retry)
	}
	if ok, _, _ := l.Allow(t0.Add(time.Second)); !ok {
		t.Fatal("one slot is back after one interval")
	}
	if ok, _, rem := l.Allow(t0.Add(time.Hour)); !ok || rem != 2 {
		t.Fatalf("after idling the burst refills: %v %d", ok, rem)
	}
}

func TestLimiterConcurrentAdmitsExactlyTheBurst(t *testing.T) {
	l := NewLimiter(50, time.Minute)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if a, _, _ := l.Allow(t0); a {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 50 {
		t.Fatalf("admitted %d of a burst of 50", ok.Load())
	}
}

func TestCooldowns(t *testing.T) {
	var c Cooldowns
	base := "http://127.0.0.1:8080"
	if c.Remaining(base, t0) != 0 {
		t.Fatal("cooling before any failure")
	}
	c.Record(base, t0, 5*time.Second)
	if got := c.Remaining(base, t0.Add(2*time.Second)); got != 3*time.Second {
		t.Fatalf("remaining %s", got)
	}
	c.Record(base, t0, time.Second) // shorter: the longer deadline stays
	if got := c.Remaining(base, t0.Add(2*time.Second)); got != 3*time.Second {
		t.Fatalf("shorter record shortened the cooldown: %s", got)
	}
	if c.Remaining(base, t0.Add(5*time.Second)) != 0 || c.Remaining("http://other", t0) != 0 {
		t.Fatal("expiry or isolation")
	}
	c.Record(base, t0, 5*time.Second)
	c.Clear(base)
	if c.Remaining(base, t0) != 0 {
		t.Fatal("clear")
	}
	c.Record(base, t0, 5*time.Second)
	c.Record(base, t0, 0)
	if c.Remaining(base, t0) != 0 {
		t.Fatal("a zero cooldown clears")
	}
}

func TestManifest(t *testing.T) {
	m := Manifest{"openai": {Bifrost: true}, "mock": {Bifrost: false}}
	for _, tc := range []struct {
		p      string
		reason Fallback
		ok     bool
	}{{"openai", ReasonNone, true}, {"mock", ReasonIneligible, false}, {"groq", ReasonProviderUnknown, false}, {"", ReasonProviderUnknown, false}} {
		ok, reason := m.Eligibility(tc.p)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("Eligibility(%q) = %v %q", tc.p, ok, reason)
		}
	}
}

func TestProviderError(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   bool
	}{
		{429, `{"error":{"message":"rate limited"}}`, true},
		{400, ``, true},
		{404, `<html>`, true},
		{500, `{"error":{"message":"upstream exploded","type":"server_error"}}`, true},
		{502, `{"is_bifrost_error":false,"status_code":502,"error":{"code":"upstream_credentials_exhausted"}}`, true},
		{500, `{"is_bifrost_error":true,"error":{"message":"config store unhealthy"}}`, false},
		{502, `<html><body>Bad Gateway</body></html>`, false},
		{503, ``, false},
		{500, `internal error`, false},
		{500, `{"message":"no error member"}`, false},
		{500, `{"error":null}`, false},
		{500, `{"error":`, false},
	}
	for _, tc := range cases {
		if got := ProviderError(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("ProviderError(%d, %q) = %v", tc.status, tc.body, got)
		}
	}
}

func FuzzProviderError(f *testing.F) {
	f.Add(500, []byte(`{"error":{}}`))
	f.Add(502, []byte(`{"is_bifrost_error":true,"error":"x"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		got := ProviderError(status, body)
		if status < 500 && !got {
			t.Fatal("a status below 500 is always passed on")
		}
	})
}
