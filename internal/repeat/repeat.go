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
