package ingest

import (
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/messages"
)

// ingestActor owns the waiting room. It runs only the slow path: queued
// requests, wake-ups after releases, deadlines, and aborts under critical
// pressure.
type ingestActor struct {
	h       *Handle
	q       *fairQueue
	waiters map[*acquireBytes]*waiter

	// timer is the one deadline tick, on the handle's clock, due at
	// timerAt.
	timer   clock.Timer
	timerAt time.Time
}

type tick struct{}

var tickMsg = &tick{}

// newIngestActor builds a fresh actor for h: at spawn and at every restart.
func newIngestActor(h *Handle) *ingestActor {
	return &ingestActor{h: h, q: newFairQueue(h.cfg.Quantum, h.cfg.StarveAfter, h.cfg.Weight), waiters: map[*acquireBytes]*waiter{}}
}

func (a *ingestActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		// After a restart: the failed actor's pending wake may be lost, and
		// its queue is gone.
		a.h.wakePending.Store(false)
		a.publish()
	case *actor.Restarting:
		// The queue dies with this object: its waiters are told to retry
		// (a shed, with Retry-After), not left waiting for an answer.
		a.stop(messages.ShedQueueTimeout)
	case *actor.Stopping:
		a.stop(messages.IngestStopped)
	case *acquireBytes:
		a.enqueue(ctx, m)
	case *cancelAcquire:
		if w := a.waiters[m.Request]; w != nil {
			a.q.remove(w)
			a.answer(w, messages.IngestCanceled) // a client that left is not a shed
			a.publish()
		}
	case *wake:
		a.h.wakePending.Store(false)
		a.dispatch()
	case *tick:
		a.timer, a.timerAt = nil, time.Time{}
		a.expire()
		a.dispatch()
		a.arm(ctx)
	case *messages.Published[*pressure.State]:
		// A subscriber of the resource-pressure actor (the composition
		// root subscribes it): under critical pressure, abort the largest
		// uploads still being read.
		if m.Snapshot.Severity == pressure.Critical {
			a.abortLargest()
		}
	}
}

// enqueue handles a request the fast path could not grant.
func (a *ingestActor) enqueue(ctx actor.Context, m *acquireBytes) {
	h := a.h
	// Capacity may have been released since the caller looked.
	if a.q.n == 0 {
		if _, ok := h.take(m.Bytes, m.Count, false); ok {
			m.Reply <- messages.IngestAdmitted
			return
		}
	}
	countBlocked := m.Count && h.cfg.CountCap > 0 && h.heavy.Load() >= int64(h.cfg.CountCap)
	wait := h.cfg.QueueWait
	if !countBlocked {
		wait = min(wait, h.cfg.BudgetWaitCap)
	}
	if h.Severity() >= pressure.High {
		wait /= highPressureWaitDivisor
	}
	if wait <= 0 {
		a.shed(m, timeoutOutcome(countBlocked))
		return
	}
	if a.q.queuedBytes+m.Bytes > h.cfg.MaxQueuedBytes || a.q.n >= h.cfg.MaxWaiters {
		a.shed(m, messages.ShedQueuedBytesBudget)
		return
	}
	w := &waiter{key: m.Key, bytes: m.Bytes, count: m.Count, deadline: h.clk.Now().Add(wait), ref: m}
	a.q.push(w)
	a.waiters[m] = w
	a.h.waiting.Store(int64(a.q.n)) // before trying to grant: see Handle.poke
	a.dispatch()
	a.arm(ctx)
}

func timeoutOutcome(countBlocked bool) messages.IngestOutcome {
	if countBlocked {
		return messages.ShedQueueTimeout
	}
	return messages.ShedInflightBytesBudget
}

func (a *ingestActor) shed(m *acquireBytes, o messages.IngestOutcome) {
	a.h.Shed(o)
	a.h.cfg.Log.Debug("chat admission shed", "reason", o.String(), "bytes", m.Bytes,
		"activeHeavy", a.h.heavy.Load(), "waiting", a.q.n, "queuedBytes", a.q.queuedBytes)
	m.Reply <- o
}

// answer replies to a waiter that left the queue.
func (a *ingestActor) answer(w *waiter, o messages.IngestOutcome) {
	m := w.ref.(*acquireBytes)
	delete(a.waiters, m)
	if o.IsShed() {
		a.shed(m, o)
		return
	}
	m.Reply <- o
}

// dispatch grants queued requests in fair order while capacity allows.
func (a *ingestActor) dispatch() {
	if a.q.n == 0 {
		a.publish()
		return
	}
	h := a.h
	a.q.dispatch(h.clk.Now(),
		func(w *waiter) bool { _, ok := h.take(w.bytes, w.count, false); return ok },
		func(w *waiter) { a.answer(w, messages.IngestAdmitted) })
	a.publish()
}

// expire sheds the waiters whose deadline passed. A waiter still blocked
// by the count cap timed out in the queue; otherwise it waited for bytes.
func (a *ingestActor) expire() {
	h := a.h
	a.q.expire(h.clk.Now(), func(w *waiter) {
		countBlocked := w.count && h.cfg.CountCap > 0 && h.heavy.Load() >= int64(h.cfg.CountCap)
		a.answer(w, timeoutOutcome(countBlocked))
	})
	a.publish()
}

// arm keeps one timer for the earliest deadline.
func (a *ingestActor) arm(ctx actor.Context) {
	next := a.q.nextDeadline()
	if next.IsZero() {
		if a.timer != nil {
			a.timer.Stop()
			a.timer, a.timerAt = nil, time.Time{}
		}
		return
	}
	if a.timer != nil && !next.Before(a.timerAt) {
		return
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	d := max(next.Sub(a.h.clk.Now()), time.Millisecond)
	root, self := ctx.ActorSystem().Root, ctx.Self()
	a.timer = a.h.clk.AfterFunc(d, func() { root.Send(self, tickMsg) })
	a.timerAt = next
}

// publish stores the queue figures the handle and health read.
func (a *ingestActor) publish() {
	h := a.h
	h.waiting.Store(int64(a.q.n))
	h.queuedBytes.Store(a.q.queuedBytes)
	lanes := a.q.laneCounts()
	sortLanes(lanes)
	h.lanes.Store(&lanes)
}

// stop cancels the timer and answers every waiter with o: the gateway
// is going away (IngestStopped), or this actor is being restarted.
func (a *ingestActor) stop(o messages.IngestOutcome) {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	replies := make([]chan<- messages.IngestOutcome, 0, len(a.waiters))
	for m, w := range a.waiters {
		a.q.remove(w)
		delete(a.waiters, m)
		if o.IsShed() {
			a.h.Shed(o)
		}
		replies = append(replies, m.Reply)
	}
	// Publish the empty queue before anyone hears of it, so a caller that
	// was answered never reads a snapshot that still counts it waiting.
	a.publish()
	for _, r := range replies {
		r <- o
	}
}

// abortLargest aborts uploads still being read, largest first, until at
// least half of the bytes being read are gone: under critical pressure the
// memory still arriving is the memory to refuse, and the largest uploads
// free the most per failed request. Each critical sample repeats it.
func (a *ingestActor) abortLargest() {
	reading := a.h.leases.readingLeases()
	if len(reading) == 0 {
		return
	}
	sort.Slice(reading, func(i, j int) bool { return reading[i].bytes > reading[j].bytes })
	var total int64
	for _, r := range reading {
		total += r.bytes
	}
	var aborted int64
	n := 0
	for _, r := range reading {
		if aborted*2 >= total && n > 0 {
			break
		}
		if a.h.leases.abort(r.l) {
			aborted += r.bytes
			n++
		}
	}
	if n > 0 {
		a.h.cfg.Log.Warn("critical memory pressure: aborted the largest uploads being read", "uploads", n, "bytes", aborted, "readingBytes", total)
	}
}
