package testutil

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/actorsys"
)

// Until polls cond every 2 ms until it holds, failing the test with what
// after 10 s. It is for conditions another goroutine (an actor) makes true,
// never for timing: the deadline only stops a test that would hang.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	UntilEvery(t, what, 10*time.Second, 2*time.Millisecond, cond)
}

// UntilEvery is Until for a condition that is dear to ask (a request to a
// process) or slow to come true (a cluster converging): it asks every
// step and gives up after bound.
func UntilEvery(t testing.TB, what string, bound, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(step)
	}
}

// ActorSystem returns an actor system that logs nothing, shut down when
// the test ends.
func ActorSystem(t testing.TB) *actor.ActorSystem {
	sys := NewActorSystem()
	t.Cleanup(sys.Shutdown)
	return sys
}

// NewActorSystem returns an actor system that logs nothing, for a test
// that decides itself when to shut it down.
func NewActorSystem() *actor.ActorSystem {
	return actorsys.New(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// Recv returns the next value from ch, failing the test with "never: what"
// when none comes within 10 s. Like Until, the deadline only stops a test
// that would hang; it never measures time.
func Recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("never: %s", what)
		var zero T
		return zero
	}
}

// UntilSnapshot polls an actor's published snapshot (get) until cond holds
// of it, and returns the snapshot that matched. Between looks it runs poke
// (nil: nothing), which asks the actor to publish again: its publish tick,
// whose timer runs on the test's fake clock, which the test moves only
// where time matters.
func UntilSnapshot[S any](t testing.TB, get func() S, poke func(), cond func(S) bool) S {
	t.Helper()
	var s S
	Until(t, "the snapshot matches", func() bool {
		if s = get(); cond(s) {
			return true
		}
		if poke != nil {
			poke()
		}
		return false
	})
	return s
}
