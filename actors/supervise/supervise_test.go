package supervise

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type crashy struct {
	incarnation int32
	starts      *atomic.Int32
	served      chan int32
}

func (c *crashy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.incarnation = c.starts.Add(1)
	case messages.Crash:
		m.Panic()
	case string:
		c.served <- c.incarnation
	}
}

// TestRestartBuildsAFreshObjectAndBacksOff: every failure restarts the
// actor from a fresh object (a new incarnation serves the next message),
// is logged at error level, and once failures come faster than the burst
// allows, restarts are spaced out instead of spinning: the restart waits
// for its delay on the strategy's clock (100 ms, then doubling), and the
// message sent meanwhile waits for the fresh object.
func TestRestartBuildsAFreshObjectAndBacksOff(t *testing.T) {
	var logs testutil.SyncBuffer
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(&logs, nil)) }))
	defer sys.Shutdown()
	clk := clock.NewFake(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC))
	var starts atomic.Int32
	served := make(chan int32, 1)
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &crashy{starts: &starts, served: served} },
		actor.WithGuardian(RestartOn("test-actor", clk))))
	defer sys.Root.Stop(pid)

	// Failures 1 to 3 are the burst: restarted at once. Failures 4 to 6
	// wait 100, 200 and 400 ms of the clock.
	delays := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for i, delay := range delays {
		sys.Root.Send(pid, messages.Crash{Reason: "boom"})
		sys.Root.Send(pid, "work")
		if delay > 0 {
			testutil.Until(t, "the delayed restart is scheduled", func() bool { return clk.Pending() == 1 })
			if in, _ := clk.Next(); in != delay {
				t.Fatalf("failure %d: restart scheduled in %v, want %v", i+1, in, delay)
			}
			clk.Advance(delay - time.Nanosecond)
			if n, pending := starts.Load(), clk.Pending(); n != int32(i+1) || pending != 1 {
				t.Fatalf("failure %d: %d incarnations and %d timers a moment before the delay ends; want the old count %d and the restart pending", i+1, n, pending, i+1)
			}
			clk.Advance(time.Nanosecond)
		}
		if got := <-served; got != int32(i+2) {
			t.Fatalf("after failure %d the message was served by incarnation %d, want a fresh one (%d)", i+1, got, i+2)
		}
	}
	if out := logs.String(); strings.Count(out, "level=ERROR msg=\"actor failed; restarting it from a fresh object\" actor=test-actor") != len(delays) ||
		!strings.Contains(out, "messages.Crash: boom") || !strings.Contains(out, "delay=400ms") {
		t.Fatalf("failures not logged:\n%s", out)
	}
}
