package quota

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the quota actors: a restarted
// aggregator used to leave the handle pointing at its first header
// adapter, which the restart had stopped, so every later observation went
// to dead letters. Now the aggregator and each adapter restart from fresh
// objects, the handle follows the live header adapter, the poller polls
// again, and after Stop no timer of any incarnation is left.
func TestRestartAfterPanic(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		w.Write([]byte(`{"is_available":true,"balance_infos":[{"currency":"USD","total_balance":"4.20"}]}`))
	}))
	defer srv.Close()
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, _ := quota.Family("openai")
	cfg := []quota.Value{{Dimension: messages.DimRequests, Flags: quota.HasLimit, Limit: 60, Unit: "requests", Source: quota.SourceConfigured, Confidence: quota.ConfidenceHigh}}
	h, err := Spawn(sys, []ConnSpec{{Provider: "openai", Name: "openai/main", Models: []string{"gpt-4o"}, Mapping: m, Configured: cfg, Budgeted: true,
		Poll: &PollSpec{Kind: quota.PollDeepSeek, BaseURL: srv.URL, Interval: time.Hour}}}, clk,
		Options{Estimates: func(int) []quota.Value { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c := *h.conns.At(0)
	watch := testutil.WatchActors(t, sys, c.agg.Id)
	waitState(t, h, 0, func(*ConnState) bool { return polls.Load() == 1 })
	observe := func(remaining float64) {
		now := clk.Now()
		obs := &messages.QuotaObservation{N: 1, At: now}
		obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit | messages.HasRemaining | messages.HasReset,
			Limit: 10000, Remaining: remaining, ResetAt: now.Add(time.Minute), Window: time.Minute}
		h.Observe(0, "gpt-4o", obs)
	}

	first := c.header.Load()
	h.root.Send(c.agg, messages.Crash{Reason: "aggregator"})
	watch.WaitRestarts(t, 1)
	waitState(t, h, 0, func(*ConnState) bool { return c.header.Load() != first })
	observe(0)
	waitState(t, h, 0, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusExhausted })
	waitState(t, h, 0, func(*ConnState) bool { return polls.Load() == 2 }) // the fresh poller polled at once

	// An adapter fails on its own: restarted in place, it serves again.
	h.root.Send(c.header.Load(), messages.Crash{Reason: "header adapter"})
	watch.WaitRestarts(t, 2)
	observe(9000) // good news to a fresh adapter that held no bad: sent on its flush tick
	waitTicking(t, h, 0, clk, HeaderFlushInterval, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusHealthy })

	h.Stop()
	watch.NoTimerLeft(t, clk, EstimateInterval+EstimateInterval/2)
}
