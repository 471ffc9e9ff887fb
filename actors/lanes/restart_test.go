package lanes

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the admission actors: a panic
// in the controller, in a tenant lane or in the shared lane restarts it
// from a fresh object. The requests the failed actor held are answered
// admission_unavailable (Retry-After 1), capacity held by admitted
// requests stays accounted in the gate, queueing works again, and after
// Stop no window or sub-window tick of any incarnation is left.
func TestRestartAfterPanic(t *testing.T) {
	for _, virtual := range []bool{true, false} {
		sys := testutil.NewActorSystem()
		cfg := admission.DefaultConfig()
		cfg.Mode, cfg.VirtualLanes = admission.ModeEnforce, virtual
		cfg.MinLimit, cfg.InitialLimit, cfg.MaxLimit, cfg.WindowMs = 20, 20, 20, 50
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		h, err := Spawn(sys, Options{Config: cfg, Clock: clk, Upstreams: []UpstreamSpec{{Name: "u0"}}})
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, h: h, sys: sys}
		u := (*h.ups.At(0))
		watch := testutil.WatchActors(t, sys, u.ctrl.Id)
		if u.shared != nil {
			watch = testutil.WatchActors(t, sys, u.ctrl.Id, u.shared.Id)
		}
		held := e.hold("a", 20)
		queued := e.acquireAsync("b", admission.Interactive, 5, nil)
		e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })

		// The lane that holds the waiter fails.
		lane := u.shared
		if virtual {
			lane = (*u.lanes.Load())[id("b")]
		}
		h.root.Send(lane, messages.Crash{Reason: "lane"})
		if r := queued.wait(t); r != Unavailable {
			t.Fatalf("virtual %v: the failed lane's waiter got %q", virtual, r.Code())
		}
		watch.WaitRestarts(t, 1)
		// The snapshot counts the failed waiter out before the next one
		// queues: a stale count of 1 let the next wait pass at once, and
		// the controller crashed with that waiter still on its way to a
		// lane being stopped (a dead letter nobody answers).
		e.until("the failed lane's queue counted out", func(s *Snapshot) bool { return s.QueuedCount == 0 })
		// Then the controller, with a waiter queued again.
		queued = e.acquireAsync("b", admission.Interactive, 5, nil)
		e.until("queued again", func(s *Snapshot) bool { return s.QueuedCount == 1 })
		h.root.Send(u.ctrl, messages.Crash{Reason: "controller"})
		watch.WaitRestarts(t, 2)
		if virtual { // its tenant lanes stopped with it
			if r := queued.wait(t); r != Unavailable {
				t.Fatalf("the restarted controller's lane waiter got %q", r.Code())
			}
			queued = e.acquireAsync("b", admission.Interactive, 5, nil)
		}
		if st := u.gate.Stats(); st.ActiveCost() != 20 {
			t.Fatalf("virtual %v: the admitted request's capacity was lost: %+v", virtual, st)
		}
		// Serving again: the waiter is granted when the capacity frees.
		held.release()
		if r := queued.wait(t); r != None {
			t.Fatalf("virtual %v: after the restarts: %q", virtual, r.Code())
		}
		h.Release(&queued.lease, success)
		e.until("idle", func(s *Snapshot) bool { return s.ActiveCost == 0 })
		h.Stop()
		watch.NoTimerLeft(t, clk, 4*cfg.Window())
		sys.Shutdown()
	}
}
