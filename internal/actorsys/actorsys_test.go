package actorsys

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// quiet keeps protoactor's start-up line out of the test output.
var quiet = actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })

type echo struct{}

func (echo) Receive(c actor.Context) {
	if s, ok := c.Message().(string); ok {
		c.Respond("echo " + s)
	}
}

// TestNewKeepsTheSystemsOwnProcesses: the processes protoactor registers
// while it builds the system (its event stream, its dead letters) are still
// found after the registry shrinks, in the bucket its lookups hash to.
func TestNewKeepsTheSystemsOwnProcesses(t *testing.T) {
	sys := New(quiet)
	defer sys.Shutdown()
	if got := len(sys.ProcessRegistry.LocalPIDs.LocalPIDs); got != Buckets {
		t.Fatalf("registry has %d buckets, want %d", got, Buckets)
	}
	for _, id := range []string{"eventstream", "deadletter"} {
		if _, ok := sys.ProcessRegistry.GetLocal(id); !ok {
			t.Errorf("%s is not registered after Compact", id)
		}
	}
	// The event stream still delivers: a dead letter reaches a subscriber.
	got := make(chan any, 1)
	sub := sys.EventStream.Subscribe(func(ev any) {
		if d, ok := ev.(*actor.DeadLetterEvent); ok {
			select {
			case got <- d.Message:
			default:
			}
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	sys.Root.Send(actor.NewPID(sys.Address(), "nobody"), "lost")
	select {
	case m := <-got:
		if m != "lost" {
			t.Fatalf("dead letter %v, want lost", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter event: the event stream or the dead-letter process was lost by Compact")
	}
}

// TestSpawnRequestAndStopOnASmallRegistry: many actors spawn, answer a
// request (each request registers and removes a future) and stop, and a
// stopped actor's name is free again.
func TestSpawnRequestAndStopOnASmallRegistry(t *testing.T) {
	sys := New(quiet)
	defer sys.Shutdown()
	props := actor.PropsFromProducer(func() actor.Actor { return echo{} })
	var pids []*actor.PID
	for i := range 200 {
		pid, err := sys.Root.SpawnNamed(props, fmt.Sprintf("echo-%d", i))
		if err != nil {
			t.Fatalf("spawn echo-%d: %v", i, err)
		}
		pids = append(pids, pid)
	}
	for i, pid := range pids {
		r, err := sys.Root.RequestFuture(pid, "hi", 10*time.Second).Result()
		if err != nil || r != "echo hi" {
			t.Fatalf("echo-%d answered %v, %v; want echo hi", i, r, err)
		}
	}
	if _, err := sys.Root.SpawnNamed(props, "echo-7"); err == nil {
		t.Fatal("a second echo-7 spawned while the first lives: the registry lost it")
	}
	for i, pid := range pids {
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatalf("stop echo-%d: %v", i, err)
		}
	}
	if _, err := sys.Root.SpawnNamed(props, "echo-7"); err != nil {
		t.Fatalf("echo-7 could not be spawned again after it stopped: %v", err)
	}
}

// TestCompactLeavesASmallRegistryAsItIs: a registry already at or below n
// buckets is not rebuilt.
func TestCompactLeavesASmallRegistryAsItIs(t *testing.T) {
	sys := New(quiet)
	defer sys.Shutdown()
	before := sys.ProcessRegistry.LocalPIDs
	Compact(sys, Buckets)
	Compact(sys, 4*Buckets)
	if sys.ProcessRegistry.LocalPIDs != before {
		t.Fatal("Compact rebuilt a registry that already had few enough buckets")
	}
}
