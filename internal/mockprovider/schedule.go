package mockprovider

import (
	"errors"
	"sync"
	"time"
)

// Changing a behaviour while requests are in progress (a capacity or
// latency step, or the end of an incident):
//
//   - A request keeps the behaviour it arrived with: its latency, its
//     failure and its stream pacing. Requests queued for a slot when the
//     latency changes are served with the old latency.
//   - Slots apply to everyone at once: the model's slot pool is resized in
//     place (slotpool.go). A shrink lets the requests being served finish
//     and grants no queued request a slot until fewer than the new number
//     are in service; a growth grants the freed room to the oldest queued
//     requests at once.
//   - A request hung by FailHang is released when the behaviour that hung
//     it is replaced (the model's own entry, or the default for a model
//     without one): it is answered as a success at once, as a provider that
//     recovers from a stall answers what it had stalled. Without this the
//     hung requests would keep the slots until their clients gave up, and
//     the moment a provider recovers would depend on the gateway's timeouts.

// behaviorChanged applies a table swap to requests already there: it
// resizes every model's slot pool and retires the behaviours that were
// replaced.
func (s *Server) behaviorChanged(prev, next *behaviorTable) {
	s.modelsMu.RLock()
	for name, m := range s.models {
		m.pool.resize(next.lookup([]byte(name)).b.Slots)
	}
	s.modelsMu.RUnlock()
	kept := map[*compiled]bool{next.def: true}
	for _, c := range next.models {
		kept[c] = true
	}
	if !kept[prev.def] {
		prev.def.retire()
	}
	for _, c := range prev.models {
		if !kept[c] {
			c.retire()
		}
	}
}

// retire ends this behaviour's hangs.
func (c *compiled) retire() { c.retireOnce.Do(func() { close(c.retired) }) }

// scheduler owns the timers of planned behaviour updates; Close stops them.
type scheduler struct {
	mu      sync.Mutex
	stopped bool
	timers  map[*time.Timer]struct{}
}

var errSchedulerClosed = errors.New("mockprovider: server is closed; no behaviour update can be scheduled")

// ScheduleBehavior applies u at the moment at (at once if it has passed).
// The update is validated now; its own AfterMS is ignored. Close cancels
// updates that have not been applied yet.
func (s *Server) ScheduleBehavior(at time.Time, u BehaviorUpdate) error {
	u.AfterMS = 0
	if err := u.Validate(); err != nil {
		return err
	}
	sc := &s.sched
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped {
		return errSchedulerClosed
	}
	if sc.timers == nil {
		sc.timers = map[*time.Timer]struct{}{}
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(at), func() {
		sc.mu.Lock()
		_, live := sc.timers[t]
		delete(sc.timers, t)
		sc.mu.Unlock()
		if live {
			_ = s.SetBehavior(u) // validated above
		}
	})
	sc.timers[t] = struct{}{}
	s.log("mockprovider: behavior update scheduled in %s", time.Until(at).Round(time.Millisecond))
	return nil
}

func (sc *scheduler) stop() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.stopped = true
	for t := range sc.timers {
		t.Stop()
	}
	sc.timers = nil
}
