package targets

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the targets actor: a panic in
// OnObservation (inside Receive) used to restart the same object, whose
// old repeating timer stayed alive and ticked into dead letters after
// Stop. The fresh actor keeps the cooldowns and streaks it had published,
// serves again, and leaves no timer behind; the test hook panics it too.
func TestRestartAfterPanic(t *testing.T) {
	sys := newSystem()
	defer sys.Shutdown()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var poison atomic.Bool
	h, err := SpawnWith(sys, []string{"p/a/m", "p/b/m"}, clk, Options{FailureThreshold: 5, Jitter: -1,
		OnObservation: func(int, *messages.QuotaObservation) {
			if poison.CompareAndSwap(true, false) {
				panic("observation handler failed")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	watch := testutil.WatchActors(t, sys, h.pid.Id)
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503, At: clk.Now()})
	waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].ConsecutiveFailures == 1 })

	obs := &messages.QuotaObservation{N: 1}
	poison.Store(true)
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.RateLimit, Status: 429, Quota: obs, At: clk.Now()})
	watch.WaitRestarts(t, 1)
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 2)

	if s := h.Snapshot(); s.Targets[1].ConsecutiveFailures != 1 || s.Targets[1].CooldownUntil == nil || s.Targets[1].Attempts != 1 {
		t.Fatalf("the restart lost target b's state: %+v", s.Targets[1])
	}
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503, At: clk.Now()})
	s := waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].Attempts == 2 })
	if s.Targets[1].ConsecutiveFailures != 2 {
		t.Fatalf("the streak did not continue after the restart: %+v", s.Targets[1])
	}
	h.Stop()
	watch.NoTimerLeft(t, clk, PublishInterval+PublishInterval/2)
}
