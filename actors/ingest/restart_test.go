package ingest

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestRestartAfterPanic is finding 8 for the ingest actor: a panic inside
// Receive restarts it from a fresh object; the waiter the failed actor
// held is answered (a shed the caller can retry), the reservations in the
// handle survive, the queue works again, and no timer outlives the actor.
func TestRestartAfterPanic(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0)) // the waiters' deadlines never pass by themselves
	h, _ := spawn(t, func(c *Config) { c.Clock = clk })
	sys := h.root.ActorSystem()
	watch := testutil.WatchActors(t, sys, h.pid.Id)
	held, _ := h.Acquire(key("a"), 6*mib, true, nil)
	waiting := acquireAsync(h, "b", 4*mib, true, nil) // queued: its deadline timer is armed
	waitUntil(t, "a waiter", func() bool { return h.Waiting() == 1 })

	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	watch.WaitRestarts(t, 1)
	if r := waitResult(t, waiting); r.o != messages.ShedQueueTimeout || r.l != nil {
		t.Fatalf("the failed actor's waiter: %v", r.o)
	}
	if h.InflightBytes() != 6*mib || h.ActiveHeavy() != 1 || h.Waiting() != 0 {
		t.Fatalf("after the restart: %+v", h.Snapshot())
	}
	// Serving again: a new waiter queues and is granted on release.
	again := acquireAsync(h, "c", 4*mib, true, nil)
	waitUntil(t, "a waiter after the restart", func() bool { return h.Waiting() == 1 })
	held.Release()
	r := waitResult(t, again)
	if r.o != messages.IngestAdmitted {
		t.Fatalf("after the restart: %v", r.o)
	}
	r.l.Release()
	if h.InflightBytes() != 0 || h.ActiveHeavy() != 0 {
		t.Fatalf("ledger not back to zero: %+v", h.Snapshot())
	}
	h.Stop()
	watch.NoTimerLeft(t, clk, 2*h.cfg.BudgetWaitCap) // the waiters' deadline timer
}
