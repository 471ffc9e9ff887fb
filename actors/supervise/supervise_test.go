package supervise

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.LeakOptions()...) }

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
// allows, restarts are spaced out instead of spinning.
func TestRestartBuildsAFreshObjectAndBacksOff(t *testing.T) {
	var logs testutil.SyncBuffer
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(&logs, nil)) }))
	defer sys.Shutdown()
	var starts atomic.Int32
	served := make(chan int32, 1)
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &crashy{starts: &starts, served: served} },
		actor.WithGuardian(Restart("test-actor"))))
	defer sys.Root.Stop(pid)
	var gaps []time.Duration
	for i := 1; i <= 5; i++ {
		began := time.Now()
		sys.Root.Send(pid, messages.Crash{Reason: "boom"})
		sys.Root.Send(pid, "work")
		if got := <-served; got != int32(i+1) {
			t.Fatalf("after failure %d the message was served by incarnation %d, want a fresh one (%d)", i, got, i+1)
		}
		gaps = append(gaps, time.Since(began))
	}
	// Failures 4 and 5 exceed the burst of 3: 100 ms and 200 ms delays.
	if gaps[3] < 100*time.Millisecond || gaps[4] < 200*time.Millisecond {
		t.Fatalf("restarts were not spaced out after the burst: %v", gaps)
	}
	if out := logs.String(); strings.Count(out, "level=ERROR msg=\"actor failed; restarting it from a fresh object\" actor=test-actor") != 5 ||
		!strings.Contains(out, "messages.Crash: boom") {
		t.Fatalf("failures not logged:\n%s", out)
	}
}
