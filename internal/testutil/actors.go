package testutil

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
)

// Letters records, from an actor system's event stream, the dead letters
// and the supervision events of the actors whose ids start with one of
// the given prefixes (an actor's children share its id as prefix).
type Letters struct {
	mu   sync.Mutex
	dead []*actor.DeadLetterEvent
	sup  []*actor.SupervisorEvent
}

// WatchActors starts recording; it stops when the test ends.
func WatchActors(t testing.TB, sys *actor.ActorSystem, prefixes ...string) *Letters {
	l := &Letters{}
	match := func(pid *actor.PID) bool {
		if pid == nil {
			return false
		}
		for _, p := range prefixes {
			if len(pid.Id) >= len(p) && pid.Id[:len(p)] == p {
				return true
			}
		}
		return false
	}
	s := sys.EventStream.Subscribe(func(evt any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch e := evt.(type) {
		case *actor.DeadLetterEvent:
			if match(e.PID) {
				l.dead = append(l.dead, e)
			}
		case *actor.SupervisorEvent:
			if match(e.Child) {
				l.sup = append(l.sup, e)
			}
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(s) })
	return l
}

// Restarts is how many supervision events were seen.
func (l *Letters) Restarts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sup)
}

// DeadLetters returns the types of the dead letters seen.
func (l *Letters) DeadLetters() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.dead))
	for _, d := range l.dead {
		out = append(out, fmt.Sprintf("%T", d.Message))
	}
	return out
}

// WaitRestarts waits (up to 10 s) until n supervision events were seen.
func (l *Letters) WaitRestarts(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.Restarts() < n {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d restarts, want %d", l.Restarts(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// NoDeadLettersFor fails the test if any dead letter reaches the watched
// actors during d: after Stop, a timer the actor left running (a repeating
// tick of an incarnation that was not cleaned up) shows up here.
func (l *Letters) NoDeadLettersFor(t testing.TB, d time.Duration) {
	t.Helper()
	l.mu.Lock()
	before := len(l.dead)
	l.mu.Unlock()
	time.Sleep(d)
	if got := l.DeadLetters(); len(got) > before {
		t.Fatalf("dead letters after stop (a timer outlived its actor): %v", got[before:])
	}
}

// NoTimerLeft fails the test if the watched actors, stopped, left a timer
// on their fake clock, or if moving that clock on by d sends them
// anything: the fake-clock form of NoDeadLettersFor, with no wall time
// spent. clk must be theirs alone.
func (l *Letters) NoTimerLeft(t testing.TB, clk *clock.Fake, d time.Duration) {
	t.Helper()
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers still pending after stop (a timer outlived its actor)", n)
	}
	l.mu.Lock()
	before := len(l.dead)
	l.mu.Unlock()
	clk.Advance(d) // a timer's send (and so its dead letter) happens inside Advance
	if got := l.DeadLetters(); len(got) > before {
		t.Fatalf("dead letters after stop (a timer outlived its actor): %v", got[before:])
	}
}

// Drain returns once each actor, in the order given, has handled every
// message sent to it before: protoactor answers a Touch from the actor's
// mailbox, behind them. Following a path of actors in order (a sender
// before its receiver) drains what each handed on to the next, so a test
// asserts that something did not happen without sleeping for it.
func Drain(t testing.TB, root *actor.RootContext, pids ...*actor.PID) {
	t.Helper()
	for _, pid := range pids {
		if _, err := root.RequestFuture(pid, &actor.Touch{}, 10*time.Second).Result(); err != nil {
			t.Fatalf("draining %s: %v", pid.Id, err)
		}
	}
}
