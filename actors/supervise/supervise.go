// Package supervise is how the gateway's actors are restarted after a
// panic, and the message tests send to make one panic.
//
// Every actor kind chooses its strategy where it spawns (with the reason
// next to it); all of them restart the failed actor from a fresh object
// built by its props producer, never resume it on half-changed state. An
// actor that owns what must survive its restart keeps it in its handle
// (atomics, published snapshots) and rebuilds from there in Started; what
// it cannot rebuild (waiters, timers) it settles in Restarting.
package supervise

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/clock"
)

// Restart returns a strategy that always restarts a failed actor from a
// fresh object, for actors the gateway cannot work without: stopping one
// would leave its handle pointing at a dead actor, and every caller
// waiting on it would hang or fail. A failure is logged at error level
// with the actor kind, the panic value and the message that caused it
// (that message is dropped). A panic loop does not spin: after burst
// failures within window, each restart waits longer (restartBackoff), so a
// poison message cannot eat a core. kind names the actor in logs.
//
// One value per actor kind (package-level): protoactor caches a guardian
// per strategy instance.
func Restart(kind string) actor.SupervisorStrategy { return RestartOn(kind, clock.Real{}) }

// RestartOn is Restart with the delayed restarts timed on clk (tests
// pass a clock.Fake).
func RestartOn(kind string, clk clock.Clock) actor.SupervisorStrategy {
	return &restart{kind: kind, clk: clk, window: 10 * time.Second, burst: 3}
}

// restartBackoff spaces out the restarts beyond the burst: the first
// waits 100 ms, each next one twice as long, up to 5 s. No jitter: the
// actors of one process do not retry a shared resource together.
var restartBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second, Factor: 2}

type restart struct {
	kind   string
	clk    clock.Clock
	window time.Duration
	burst  int
}

func (s *restart) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	if rs.NumberOfFailures(s.window) == 0 {
		rs.Reset() // keep the history bounded: only the window counts
	}
	rs.Fail()
	n := rs.NumberOfFailures(s.window)
	delay := time.Duration(0)
	if n > s.burst {
		delay = restartBackoff.Delay(n-s.burst, 0)
	}
	sys.Logger().Error("actor failed; restarting it from a fresh object", slog.String("actor", s.kind), slog.String("pid", child.Id),
		slog.String("panic", fmt.Sprint(reason)), slog.String("message", fmt.Sprintf("%T", message)),
		slog.Int("failuresInWindow", n), slog.Duration("delay", delay))
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
	if delay == 0 {
		sup.RestartChildren(child)
		return
	}
	s.clk.AfterFunc(delay, func() { sup.RestartChildren(child) })
}
