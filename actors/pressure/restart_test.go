package pressure

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	mem "github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the pressure actor: after a
// panic inside Receive the fresh actor keeps the published severity,
// samples again on its own timer (of the fake clock the test moves), and
// after Stop no tick of either incarnation is left.
func TestRestartAfterPanic(t *testing.T) {
	sys := testutil.ActorSystem(t)
	var ratio atomic.Value
	ratio.Store(0.95)
	var samples atomic.Int64
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Interval: 10 * time.Millisecond, Clock: clk,
		Sample: func() mem.Sample { samples.Add(1); return sample(ratio.Load().(float64)) }})
	if err != nil {
		t.Fatal(err)
	}
	watch := testutil.WatchActors(t, sys, h.pid.Id)
	// drive moves the fake clock one interval at a time until cond holds.
	drive := func(what string, cond func(*mem.State) bool) {
		t.Helper()
		testutil.Until(t, what, func() bool {
			if cond(h.State()) {
				return true
			}
			clk.Advance(10 * time.Millisecond)
			return false
		})
	}
	drive("critical", func(s *mem.State) bool { return s.Severity == mem.Critical })
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	if s := h.State(); s.Severity != mem.Critical {
		t.Fatalf("the restart forgot the severity: %+v", s)
	}
	before := samples.Load()
	drive("samples by the fresh actor", func(*mem.State) bool { return samples.Load() > before+2 })
	ratio.Store(0.1)
	drive("normal", func(s *mem.State) bool { return s.Severity == mem.Normal })
	h.Stop()
	watch.NoTimerLeft(t, clk, time.Hour)
}
