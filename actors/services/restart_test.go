package services

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the service supervisor: a panic
// inside Receive restarted the same object, which went on with the state
// it had half changed. Now the failed supervisor kills its child's process
// group (a fresh one could not know it), a fresh supervisor takes over,
// starts the service again because it was running, answers commands, and
// leaves no timer of the failed incarnation behind.
func TestRestartAfterPanic(t *testing.T) {
	e, h := oneServing(t, "api")
	watch := testutil.WatchActors(t, e.system, h.pid.Id)
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running || st.PID == nil {
		t.Fatalf("start: %v %+v", err, st)
	}
	first := *st.PID
	e.m.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	st = waitStatus(t, h, "the service running again under the fresh supervisor", func(s Status) bool {
		return s.State == Running && s.PID != nil && *s.PID != first
	})
	if processAlive(first) {
		t.Fatalf("the failed supervisor's child %d survived it", first)
	}
	waitLog(t, h, "the supervisor was restarted after a failure")
	if st, err := h.Stop(ctx10(t)); err != nil || st.State != Stopped || st.PID != nil {
		t.Fatalf("stop after the restart: %v %+v", err, st)
	}
	e.m.Close(ctx10(t)) // stops the actors; the system stays up to deliver dead letters
	watch.NoDeadLettersFor(t, 3*time.Duration(svc(svctest.Serve, nil).HealthIntervalMs)*time.Millisecond)
}
