package spawn

import (
	"testing"
	"time"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestObservationsLinkCarriesHeaders: the rate-limit headers an attempt
// on a target reported reach, through the targets actor and the link,
// the quota actor of the target's connection under its upstream model
// (which marks the model exhausted) and the ledger slot of that model
// (which learns the provider's limit), as the targets actor's callback
// did before it became a message; the route decides where, so target 1
// reaches connection 1 and slot 1, not 0.
func TestObservationsLinkCarriesHeaders(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	l, err := ledgeractor.Spawn(sys, []ledgeractor.SlotSpec{{Connection: "p/a", Model: "x"}, {Connection: "p/b", Model: "gpt-4o"}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	q, err := quotaactor.Spawn(sys, []quotaactor.ConnSpec{{Provider: "p", Name: "p/a", Models: []string{"x"}}, {Provider: "p", Name: "p/b", Models: []string{"gpt-4o"}}}, clk, quotaactor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	tg, err := targets.SpawnWith(sys, []string{"p/a/x", "p/b/gpt-4o"}, clk, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Stop()
	models := []string{"x", "gpt-4o"}
	link, err := spawnObservations(sys, func(target int) (int, string, int) { return target, models[target], target }, q, l)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Root.PoisonFuture(link).Wait() }()
	tg.SubscribeObservations(link)

	now := clk.Now()
	obs := &messages.QuotaObservation{N: 1, At: now}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit | messages.HasRemaining | messages.HasReset,
		Limit: 5000, Remaining: 0, ResetAt: now.Add(time.Minute), Window: time.Minute}
	tg.Report(&messages.AttemptFinished{Target: 1, Class: messages.RateLimit, Status: 429, Quota: obs, Started: now, At: now})

	testutil.Until(t, "the ledger slot of target 1 learns the provider's token limit", func() bool {
		lim := l.Limits(1)
		return lim != nil && lim.Windows[rolling.Tokens][rolling.Minute] == 5000 && lim.Source[rolling.Tokens][rolling.Minute] == ledgeractor.SourceHeaders
	})
	testutil.Until(t, "the quota actor of target 1's connection marks its model exhausted", func() bool {
		s := q.State(1)
		return s != nil && len(s.Models) == 1 && s.Models[0].Status == quota.StatusExhausted
	})
	testutil.Drain(t, sys.Root, link)
	if lim := l.Limits(0); lim != nil && lim.Source[rolling.Tokens][rolling.Minute] == ledgeractor.SourceHeaders {
		t.Fatalf("target 1's headers reached slot 0: %+v", lim)
	}
}
