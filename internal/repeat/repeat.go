// Package repeat sends an actor a message at a fixed interval.
//
// It replaces protoactor's scheduler.SendRepeatedly, whose timer reads its
// stop flag without synchronisation while the cancel function swaps it
// atomically: the race detector reports that whenever an actor stops while
// its tick fires.
package repeat

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Send sends msg to pid through root after initial, then every interval,
// until the returned function is called. Stopping is idempotent; once it
// returns no further message is sent (a send is only an enqueue, done under
// the same lock). No goroutine lives between ticks.
func Send(root *actor.RootContext, initial, interval time.Duration, pid *actor.PID, msg any) (stop func()) {
	r := &repeater{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t = time.AfterFunc(initial, func() {
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
	t       *time.Timer
	stopped bool
}

func (r *repeater) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	r.mu.Unlock()
}
