package pressure

import (
	"sync/atomic"
	"testing"
	"time"

	mem "github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the pressure actor: after a
// panic inside Receive the fresh actor keeps the published severity,
// samples again on its own timer, and after Stop no tick of either
// incarnation is left.
func TestRestartAfterPanic(t *testing.T) {
	sys := newSystem()
	defer sys.Shutdown()
	var ratio atomic.Value
	ratio.Store(0.95)
	var samples atomic.Int64
	h, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Interval: 10 * time.Millisecond,
		Sample: func() mem.Sample { samples.Add(1); return sample(ratio.Load().(float64)) }})
	if err != nil {
		t.Fatal(err)
	}
	watch := testutil.WatchActors(t, sys, h.pid.Id)
	waitState(t, h, func(s *mem.State) bool { return s.Severity == mem.Critical })
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	if s := h.State(); s.Severity != mem.Critical {
		t.Fatalf("the restart forgot the severity: %+v", s)
	}
	before := samples.Load()
	waitState(t, h, func(*mem.State) bool { return samples.Load() > before+2 })
	ratio.Store(0.1)
	waitState(t, h, func(s *mem.State) bool { return s.Severity == mem.Normal })
	h.Stop()
	watch.NoDeadLettersFor(t, 100*time.Millisecond)
}
