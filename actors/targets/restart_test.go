package targets

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the targets actor: a panic
// inside Receive (it came from the observation hook, which is a message
// to a subscriber now) used to restart the same object, whose old
// repeating timer stayed alive and ticked into dead letters after Stop.
// The fresh actor keeps the cooldowns and streaks it had published,
// serves again, and leaves no timer behind, after each of two panics; an
// observation sent around them still reaches the subscriber.
func TestRestartAfterPanic(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	h, err := SpawnWith(sys, []string{"p/a/m", "p/b/m"}, clk, Options{FailureThreshold: 5, Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	inbox := testutil.NewInbox(t, sys)
	h.SubscribeObservations(inbox.PID)
	watch := testutil.WatchActors(t, sys, h.pid.Id)
	h.Report(&messages.AttemptFinished{Target: 1, Class: messages.Capacity, Status: 503, At: clk.Now()})
	waitSnap(t, h, func(s *Snapshot) bool { return s.Targets[1].ConsecutiveFailures == 1 })

	obs := &messages.QuotaObservation{N: 1}
	h.Report(&messages.AttemptFinished{Target: 0, Class: messages.RateLimit, Status: 429, Quota: obs, At: clk.Now()})
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 2)
	if got := testutil.Of[*messages.QuotaObserved](t, inbox); len(got) != 1 || got[0].Target != 0 || got[0].Obs != obs {
		t.Fatalf("the observation subscriber got %+v, want target 0's headers once", got)
	}

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
