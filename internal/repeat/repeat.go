// Package repeat sends an actor a message at a fixed interval of an
// injected clock.
//
// It replaces protoactor's scheduler.SendRepeatedly, whose timer reads its
// stop flag without synchronisation while the cancel function swaps it
// atomically: the race detector reports that whenever an actor stops while
// its tick fires. Taking the clock lets an actor's tests drive its ticks
// with a clock.Fake.
package repeat

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
)

// Send sends msg to pid through root after initial, then every interval
// (both on clk), until the returned function is called. Stopping is
// idempotent; once it returns no further message is sent (a send is only
// an enqueue, done under the same lock). No goroutine lives between ticks.
func Send(clk clock.Clock, root *actor.RootContext, initial, interval time.Duration, pid *actor.PID, msg any) (stop func()) {
	r := &repeater{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t = clk.AfterFunc(initial, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		root.Send(pid, msg)
		r.t.Reset(interval)
	})
	return r.stop
}

type repeater struct {
	mu      sync.Mutex
	t       clock.Timer
	stopped bool
}

func (r *repeater) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	r.mu.Unlock()
}

// Ticker is the tick of an actor that wants a message at a fixed interval
// for as long as it runs. It lives in the actor object, so a restarted
// incarnation (a fresh object) starts a tick of its own.
type Ticker struct{ stop func() }

// Start sends msg to the actor every interval on clk, the first one
// interval from now.
func (t *Ticker) Start(ctx actor.Context, clk clock.Clock, interval time.Duration, msg any) {
	t.stop = Send(clk, ctx.ActorSystem().Root, interval, interval, ctx.Self(), msg)
}

// Stop ends the tick. It may be called before Start and more than once
// (an actor stops its tick on Restarting and again on Stopping).
func (t *Ticker) Stop() {
	if t.stop != nil {
		t.stop()
	}
}

// Lifecycle is Start on *actor.Started and Stop on *actor.Restarting and
// *actor.Stopping, for an actor with nothing else to do at those points.
// It reports whether the message was one of the three, so that the
// actor's own switch names only its own messages.
func (t *Ticker) Lifecycle(ctx actor.Context, clk clock.Clock, interval time.Duration, msg any) bool {
	switch ctx.Message().(type) {
	case *actor.Started:
		t.Start(ctx, clk, interval, msg)
	case *actor.Restarting, *actor.Stopping:
		t.Stop()
	default:
		return false
	}
	return true
}
