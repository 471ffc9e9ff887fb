package repeat

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type (
	tick  struct{}
	flush struct{}
)

func counter(t *testing.T) (*actor.ActorSystem, *actor.PID, *atomic.Int64) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	var n atomic.Int64
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case tick:
			n.Add(1)
		case flush:
			ctx.Respond(true)
		}
	}))
	t.Cleanup(func() { sys.Root.Stop(pid) })
	return sys, pid, &n
}

// handled waits until every message sent to pid before it was handled: a
// request queued behind them is answered after them.
func handled(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if _, err := sys.Root.RequestFuture(pid, flush{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
}

// TestSendRepeatsUntilStopped: ticks come after initial, then once per
// interval of the clock (one per jump of the fake clock), and never again
// once stopped.
func TestSendRepeatsUntilStopped(t *testing.T) {
	sys, pid, n := counter(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stop := Send(clk, sys.Root, time.Millisecond, 2*time.Millisecond, pid, tick{})
	for _, step := range []struct {
		advance time.Duration
		want    int64
	}{{999 * time.Microsecond, 0}, {time.Microsecond, 1}, {time.Millisecond, 1}, {time.Millisecond, 2}, {2 * time.Millisecond, 3},
		{time.Hour, 4}, {2 * time.Millisecond, 5}} { // a jump sends one tick, and the next is an interval after it
		clk.Advance(step.advance)
		handled(t, sys, pid)
		if got := n.Load(); got != step.want {
			t.Fatalf("after %v more: %d ticks, want %d", step.advance, got, step.want)
		}
	}
	stop()
	stop() // idempotent
	if p := clk.Pending(); p != 0 {
		t.Fatalf("%d timers pending after stop", p)
	}
	clk.Advance(time.Hour)
	handled(t, sys, pid)
	if got := n.Load(); got != 5 {
		t.Fatalf("%d ticks arrived after stop returned", got-5)
	}
}

// TestStopRacesTick: on the real clock, many short-lived repeaters stopped
// at random points while their ticks fire (run with -race: protoactor's
// own repeating timer fails exactly this); none sends after stop returned.
func TestStopRacesTick(t *testing.T) {
	sys, pid, n := counter(t)
	for i := 0; i < 200; i++ {
		s := Send(clock.Real{}, sys.Root, 0, time.Microsecond, pid, tick{})
		time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
		s()
		handled(t, sys, pid)
		before := n.Load()
		handled(t, sys, pid)
		if got := n.Load(); got != before {
			t.Fatalf("repeater %d: %d ticks after stop returned", i, got-before)
		}
	}
}

// TestTickerLifecycle: an actor that leaves its lifecycle to a Ticker is
// ticked from Started on, its own switch never sees the three lifecycle
// messages, and once it stops no timer is left on the clock.
func TestTickerLifecycle(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var n, lifecycle atomic.Int64
	var tk Ticker
	tk.Stop() // before Start: nothing to stop
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if tk.Lifecycle(ctx, clk, time.Second, tick{}) {
			return
		}
		switch ctx.Message().(type) {
		case *actor.Started, *actor.Restarting, *actor.Stopping:
			lifecycle.Add(1)
		case tick:
			n.Add(1)
		case flush:
			ctx.Respond(true)
		}
	}))
	handled(t, sys, pid)
	clk.Advance(time.Second)
	handled(t, sys, pid)
	clk.Advance(time.Second)
	handled(t, sys, pid)
	if got := n.Load(); got != 2 {
		t.Fatalf("%d ticks after two intervals, want 2", got)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if got := lifecycle.Load(); got != 0 {
		t.Fatalf("the actor's switch saw %d lifecycle messages, want 0", got)
	}
	if p := clk.Pending(); p != 0 {
		t.Fatalf("%d timers pending after the actor stopped", p)
	}
}
