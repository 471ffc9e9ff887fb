package repeat

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type (
	tick  struct{}
	flush struct{}
)

// TestSendRepeatsUntilStopped: ticks arrive at the interval and stop for
// good once stopped, even when stopping races a firing tick (run with
// -race: protoactor's own repeating timer fails exactly this).
func TestSendRepeatsUntilStopped(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var n atomic.Int64
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case tick:
			n.Add(1)
		case flush:
			ctx.Respond(true)
		}
	}))
	stop := Send(sys.Root, time.Millisecond, 2*time.Millisecond, pid, tick{})
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d ticks in 5 s at a 2 ms interval", n.Load())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	stop() // idempotent
	// Every tick sent was enqueued before stop returned; a request queued
	// behind them proves they were all handled.
	if _, err := sys.Root.RequestFuture(pid, flush{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	after := n.Load()
	time.Sleep(20 * time.Millisecond)
	if got := n.Load(); got != after {
		t.Fatalf("%d ticks arrived after stop returned", got-after)
	}
	// Many short-lived repeaters stopped at random points.
	for i := 0; i < 200; i++ {
		s := Send(sys.Root, 0, time.Microsecond, pid, tick{})
		time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
		s()
	}
	sys.Root.Stop(pid)
}
