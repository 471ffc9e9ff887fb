package quota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func waitState(t *testing.T, h *Handle, conn int, cond func(*ConnState) bool) *ConnState {
	t.Helper()
	var s *ConnState
	testutil.Until(t, "the connection's state matches", func() bool {
		s = h.State(conn)
		return s != nil && cond(s)
	})
	return s
}

// waitTicking is waitState while clk moves on by step between looks, so
// that the ticks of the actors on it (header flushes, ledger reads,
// cluster checks) fire.
func waitTicking(t *testing.T, h *Handle, conn int, clk *clock.Fake, step time.Duration, cond func(*ConnState) bool) *ConnState {
	t.Helper()
	var s *ConnState
	testutil.Until(t, "the connection's state", func() bool {
		clk.Advance(step)
		s = h.State(conn)
		return s != nil && cond(s)
	})
	return s
}

func TestHeadersDriveModelStates(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, _ := quota.Family("openai")
	h, err := Spawn(sys, []ConnSpec{{Provider: "openai", Name: "openai/main", Models: []string{"gpt-4o", "gpt-4o-mini"}, Mapping: m}}, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if s := h.State(0); s.Status != quota.StatusUnknown || s.Supported || h.ModelStatus(0, 0, clk.Now()) != quota.StatusUnknown {
		t.Fatalf("before any response: %+v", s)
	}
	now := clk.Now()
	obs := &messages.QuotaObservation{N: 2, At: now}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit | messages.HasRemaining | messages.HasReset, Limit: 10000, Remaining: 500, ResetAt: now.Add(20 * time.Second), Window: time.Minute}
	obs.Readings[1] = messages.QuotaReading{Dimension: messages.DimRequests, Flags: messages.HasLimit | messages.HasRemaining, Limit: 100, Remaining: 90, Window: time.Minute}
	h.Observe(0, "gpt-4o", obs)
	s := waitState(t, h, 0, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusApproaching })
	if s.Models[1].Status != quota.StatusUnknown || s.Status != quota.StatusApproaching || s.Sources[0] != "response_headers" {
		t.Fatalf("state %+v", s)
	}
	if v := s.Models[0].Values[0]; v.Source != quota.SourceResponseHeaders || v.Used != 9500 || v.Model != "gpt-4o" {
		t.Fatalf("value %+v", v)
	}
	// Evidence expires at its reset: routing stops trusting it then.
	if st := h.ModelStatus(0, 0, now.Add(19*time.Second)); st != quota.StatusApproaching {
		t.Fatalf("before reset %s", st)
	}
	if st := h.ModelStatus(0, 0, now.Add(20*time.Second)); st != quota.StatusUnknown {
		t.Fatalf("after reset %s", st)
	}
	// Spent: exhausted, for that model only.
	obs2 := *obs
	obs2.Readings[0].Remaining = 0
	h.Observe(0, "gpt-4o", &obs2)
	waitState(t, h, 0, func(s *ConnState) bool {
		return s.Models[0].Status == quota.StatusExhausted && s.Models[1].Status == quota.StatusUnknown
	})
}

func TestConfiguredAndEstimatedSources(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 10, 0, time.UTC))
	l, err := ledgeractor.Spawn(sys, []ledgeractor.SlotSpec{{Connection: "local/a", Model: "llama", Configured: rolling.Limits{rolling.Tokens: {rolling.Minute: 1000}}}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	cfg := []quota.Value{{Dimension: messages.DimRequests, Flags: quota.HasLimit, Limit: 60, Unit: "requests", Source: quota.SourceConfigured, Confidence: quota.ConfidenceHigh}}
	h, err := Spawn(sys, []ConnSpec{{Provider: "local", Name: "local/a", Models: []string{"llama"}, Configured: cfg, Budgeted: true}}, clk,
		Options{Estimates: func(int) []quota.Value { return l.Snapshot().Estimates("local/a") }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	r, _, _ := l.Reserve(0, 900, clk.Now())
	if !r.Active {
		t.Fatal("reservation refused")
	}
	// The ledger publishes the reservation on its tick, the estimate
	// adapter reads it on its own.
	s := waitTicking(t, h, 0, clk, ledgeractor.PublishInterval, func(s *ConnState) bool {
		return len(s.Models[0].Values) == 2 && s.Models[0].Status == quota.StatusApproaching
	})
	var est quota.Value
	for _, v := range s.Models[0].Values {
		if v.Dimension == messages.DimTokens {
			est = v
		}
	}
	if est.Source != quota.SourceEstimated || est.Confidence != quota.ConfidenceMedium || est.Remaining != 100 || !est.ResetAt.Equal(time.Date(2026, 5, 1, 9, 1, 12, 0, time.UTC)) {
		// The 900 tokens of second 10 leave the rolling minute 62 s later.
		t.Fatalf("estimate %+v", est)
	}
	if len(s.Values) != 1 || s.Values[0].Source != quota.SourceConfigured {
		t.Fatalf("connection-wide values %+v", s.Values)
	}
}

func TestPollers(t *testing.T) {
	var keyCalls atomic.Int32
	var mode atomic.Value
	mode.Store("ok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-secret-123" {
			w.WriteHeader(401)
			return
		}
		switch {
		case mode.Load() == "fail":
			w.WriteHeader(500)
		case r.URL.Path == "/api/v1/key":
			keyCalls.Add(1)
			w.Write([]byte(`{"data":{"limit":10,"limit_remaining":0,"usage":10}}`))
		case r.URL.Path == "/api/v1/credits":
			w.Write([]byte(`{"data":{"total_credits":20,"total_usage":5}}`))
		case r.URL.Path == "/user/balance":
			w.Write([]byte(`{"is_available":true,"balance_infos":[{"currency":"USD","total_balance":"4.20"}]}`))
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	var polls atomic.Int32
	h, err := Spawn(sys, []ConnSpec{
		{Provider: "openrouter", Name: "openrouter/main", Models: []string{"x"}, Poll: &PollSpec{Kind: quota.PollOpenRouter, BaseURL: srv.URL + "/api/v1", Interval: time.Hour, APIKey: "sk-secret-123"}},
		{Provider: "deepseek", Name: "deepseek/main", Models: []string{"deepseek-chat"}, Poll: &PollSpec{Kind: quota.PollDeepSeek, BaseURL: srv.URL, Interval: time.Hour, APIKey: "sk-secret-123"}},
		{Provider: "deepseek", Name: "deepseek/bad", Models: []string{"deepseek-chat"}, Poll: &PollSpec{Kind: quota.PollDeepSeek, BaseURL: srv.URL, Interval: time.Hour, APIKey: "wrong-key"}},
	}, clk, Options{OnPoll: func(int, bool) { polls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	s := waitState(t, h, 0, func(s *ConnState) bool { return s.Status == quota.StatusExhausted })
	if len(s.Values) != 2 || s.Values[0].Source != quota.SourceProviderAPI || s.Models[0].Status != quota.StatusExhausted {
		t.Fatalf("openrouter %+v", s)
	}
	s = waitState(t, h, 1, func(s *ConnState) bool { return s.Status == quota.StatusHealthy })
	if s.Values[0].Remaining != 4.2 || s.Values[0].Unit != "USD" {
		t.Fatalf("deepseek %+v", s.Values)
	}
	// A supported source that fails: unavailable, with an error that names
	// the endpoint and never the key.
	s = waitState(t, h, 2, func(s *ConnState) bool { return s.Status == quota.StatusUnavailable })
	if !strings.Contains(s.Error, "GET /user/balance: status 401") || strings.Contains(s.Error, "wrong-key") {
		t.Fatalf("error %q", s.Error)
	}
	if keyCalls.Load() != 1 || polls.Load() < 3 {
		t.Fatalf("polls: key %d, total %d", keyCalls.Load(), polls.Load())
	}
	// A failed poll keeps the last good values (exercised directly).
	mode.Store("fail")
	vals, err := Fetch(context.Background(), http.DefaultClient, PollSpec{Kind: quota.PollOpenRouter, BaseURL: srv.URL + "/api/v1", APIKey: "sk-secret-123"}, clk.Now(), clk.Now())
	if err == nil || len(vals) != 0 || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("failing fetch: %v %v", vals, err)
	}
}

func TestPollBackoff(t *testing.T) {
	cases := []struct {
		n        int
		interval time.Duration
		r        float64
		want     time.Duration
	}{
		{1, time.Minute, 0.5, 2 * time.Minute},
		{3, time.Minute, 0.5, 8 * time.Minute},
		{5, time.Minute, 0.5, 10 * time.Minute},
		{5, time.Hour, 0.5, 8 * time.Hour},
		{1, time.Minute, 0, 96 * time.Second},
		{1, time.Minute, 1, 144 * time.Second},
	}
	for _, c := range cases {
		if got := pollBackoff(c.interval).Delay(c.n, c.r); got != c.want {
			t.Errorf("pollBackoff(%v).Delay(%d, %v) = %v, want %v", c.interval, c.n, c.r, got, c.want)
		}
	}
}

// TestAddAndRemoveConnections: a connection added at run time polls its
// usage API and takes header readings for a model AddModels registered;
// a removed one polls no more. The removed poller's silence is measured
// against a live poller on the same interval: while the live one polls
// six more times, the removed one would have polled too.
func TestAddAndRemoveConnections(t *testing.T) {
	var polls [2]atomic.Int32 // by the path's connection
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a/user/balance":
			polls[0].Add(1)
		case "/b/user/balance":
			polls[1].Add(1)
		default:
			w.WriteHeader(404)
			return
		}
		w.Write([]byte(`{"is_available":true,"balance_infos":[{"currency":"USD","total_balance":"4.20"}]}`))
	}))
	defer srv.Close()
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, _ := quota.Family("openai")
	h, err := Spawn(sys, []ConnSpec{{Provider: "openai", Name: "openai/main", Models: []string{"gpt-4o"}, Mapping: m}}, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	poll := func(path string) *PollSpec {
		return &PollSpec{Kind: quota.PollDeepSeek, BaseURL: srv.URL + path, Interval: 5 * time.Millisecond, APIKey: "k"}
	}
	a, err := h.Add(ConnSpec{Provider: "deepseek", Name: "deepseek/a", Models: []string{"deepseek-chat"}, Poll: poll("/a")})
	if err != nil || a != 1 || h.Len() != 2 {
		t.Fatalf("Add = %d, %v (Len %d)", a, err, h.Len())
	}
	waitState(t, h, a, func(s *ConnState) bool { return s.Status == quota.StatusHealthy })
	if err := h.AddModels(0, []string{"gpt-4o-mini"}); err != nil {
		t.Fatal(err)
	}
	if s := h.State(0); len(s.Models) != 2 || s.Models[1].Model != "gpt-4o-mini" {
		t.Fatalf("AddModels did not publish the model: %+v", s.Models)
	}
	now := clk.Now()
	obs := &messages.QuotaObservation{N: 1, At: now}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit | messages.HasRemaining | messages.HasReset, Limit: 100, Remaining: 0, ResetAt: now.Add(time.Minute), Window: time.Minute}
	h.Observe(0, "gpt-4o-mini", obs)
	waitState(t, h, 0, func(s *ConnState) bool { return s.Models[1].Status == quota.StatusExhausted })
	// A restarted aggregator keeps the models AddModels registered.
	c0 := *h.conns.At(0)
	first := c0.header.Load()
	h.root.Send(c0.agg, messages.Crash{Reason: "after AddModels"})
	waitState(t, h, 0, func(*ConnState) bool { return c0.header.Load() != first })
	h.Observe(0, "gpt-4o-mini", obs)
	if s := waitState(t, h, 0, func(s *ConnState) bool { return len(s.Models) == 2 && s.Models[1].Status == quota.StatusExhausted }); s.Models[1].Model != "gpt-4o-mini" {
		t.Fatalf("after a restart: %+v", s.Models)
	}

	h.Remove(a)
	if h.State(a) != nil {
		t.Fatal("a removed connection still publishes a state")
	}
	stopped := polls[0].Load()
	b, err := h.Add(ConnSpec{Provider: "deepseek", Name: "deepseek/b", Models: []string{"deepseek-chat"}, Poll: poll("/b")})
	if err != nil || b != 2 {
		t.Fatalf("Add after Remove = %d, %v; ids are never reused", b, err)
	}
	// The pollers' timers run on the fake clock: each 5 ms it moves is
	// one more interval for every poller still armed.
	for deadline := time.Now().Add(10 * time.Second); polls[1].Load() < 6; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the live poller polled %d times in 10 s", polls[1].Load())
		}
		clk.Advance(5 * time.Millisecond)
	}
	if n := polls[0].Load(); n != stopped {
		t.Fatalf("the removed connection polled %d more times", n-stopped)
	}
	h.Remove(a) // idempotent
	// Set brings a removed connection back under its id, polling again.
	if err := h.Set(a, ConnSpec{Provider: "deepseek", Name: "deepseek/a", Models: []string{"deepseek-chat"}, Poll: poll("/a")}); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, a, func(s *ConnState) bool { return s.Status == quota.StatusHealthy })
	if polls[0].Load() == stopped {
		t.Fatal("the connection Set back did not poll")
	}
}
