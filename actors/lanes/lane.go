package lanes

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/messages"
)

const sharedLaneID admission.LaneID = 0

// burstIntervals is the burst interval in queueing targets: how long a
// lane's queue may stay non-empty before it counts as standing. A lane
// within its fair share (arrivals at random, below its share of the
// drain) rarely stays busy that long, so its queue is judged by its
// flow only when it really stands.
const burstIntervals = 4

// burstWaitTargets is the longest wait, in queueing targets, that a burst
// of a lane that was not standing may expect while the upstream is
// overloaded, or one hold time of a place if that is longer (until the
// places held now have turned over once: long streams free a place only
// so often, and a closed loop of agents starting at once waits that long
// for its turn): the longest wait an overloaded upstream admits, so it
// sets the tail. At two targets (one no-queue latency with the default
// target) a success's latency stays within about twice the unloaded one
// however large the overload; a tenant within its share, whose own p99
// needs its queue far shorter, is refused only in rare long bursts.
// Letting a burst wait the whole burst interval (four targets, twice the
// no-queue latency) put the p99 at 2.5-3x the unloaded one at 5x and 10x
// load: an overload's first requests are such a burst.
const burstWaitTargets = 2

// stopGrace is how long an evicted lane keeps forwarding late arrivals to
// the controller before it stops (a sender that looked the lane up just
// before the eviction was published).
const stopGrace = time.Second

// laneActor owns one tenant's queued requests (or everyone's, as the
// shared lane): FIFO per class, the per-lane caps, deadlines, and the
// replies. The controller decides which lane's head goes next.
type laneActor struct {
	u      *upstream
	id     admission.LaneID
	key    tenant.ID
	shared bool
	q      [admission.NumClasses][]*waiter
	cost   [admission.NumClasses]int64
	// busySince is when each class's queue last went from empty to
	// queued (zero while empty): a queue that has not emptied for an
	// interval is a standing one, CoDel's bad queue.
	busySince [admission.NumClasses]time.Time
	// flow counts, per class, the cost that arrived at the lane (queued
	// or refused) and the cost it was granted: a standing queue whose
	// arrivals keep pace with its grants is a closed loop of callers
	// (each sends again when answered) and waits; one whose arrivals
	// outrun its grants is demand beyond its share, and sheds.
	flow [admission.NumClasses]laneFlow
	// shedding is set, per class, once a standing queue sheds, and
	// cleared when the queue's wait is back under the target (or it
	// empties): while it is set the lane judges its own flow even when
	// the upstream's overload verdict has turned (shedding flattens the
	// growth that verdict reads). It turns no request away by itself:
	// each is shed only while the lane's arrivals outrun its grants, in
	// the window so far or the last whole one. As a latch (CoDel's
	// dropping state, shedding every arrival until the queue drained) it
	// shed a closed loop of callers for ever: their queue stands above
	// the target and never drains, and each refused caller sends again
	// at once (the saturated bench with other processes on the CPU: one
	// tenant refused 30-70k times in four seconds while admission off
	// served every request).
	shedding [admission.NumClasses]bool
	// shedEnded is when shedding last ended with the queue at the target.
	shedEnded [admission.NumClasses]time.Time
	evicted   bool
	armed     time.Time
	// deadline is the timer of the next deadline check (armed: when).
	deadline clock.Timer
	root     *actor.RootContext
	me       *actor.PID
}

func (l *laneActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		l.root, l.me = ctx.ActorSystem().Root, ctx.Self()
	case *actor.Restarting:
		// The queue dies with this object: its waiters may retry, and the
		// controller learns the lane is empty.
		if l.deadline != nil {
			l.deadline.Stop()
		}
		l.rejectAll(Unavailable)
		l.report(ctx, false, nil)
	case *actor.Stopping:
		if l.deadline != nil {
			l.deadline.Stop()
		}
		if l.u.h.stopped.Load() {
			l.rejectAll(Shutdown)
		} else {
			l.rejectAll(Unavailable) // stopped by a restarting controller, not by shutdown
		}
	case resync:
		l.report(ctx, false, nil)
	case *waiter:
		l.enqueue(ctx, m)
	case *grant:
		l.grant(ctx, m)
	case *rejectHead:
		if w := l.head(m.class); w != nil && w.seq == m.seq {
			l.pop(m.class)
			w.resolveCurrent(m.reason)
			w.unref()
		}
		l.report(ctx, false, nil)
	case *withdraw:
		l.withdraw(ctx, m)
	case deadlineDue:
		l.armed = time.Time{}
		l.expire(ctx)
	case *evict:
		l.rejectAll(m.reason)
		l.evicted = true
		if m.reply {
			ctx.Respond(true)
		}
		if !l.shared && !l.u.h.stopped.Load() {
			l.after(stopGrace, stopLane{})
		}
	case stopLane:
		ctx.Stop(ctx.Self())
	}
}

func (l *laneActor) head(c admission.Class) *waiter {
	if len(l.q[c]) == 0 {
		return nil
	}
	return l.q[c][0]
}

func (l *laneActor) pop(c admission.Class) *waiter {
	w := l.q[c][0]
	l.q[c][0] = nil
	l.q[c] = l.q[c][1:]
	l.cost[c] -= w.cost
	if len(l.q[c]) == 0 {
		l.q[c] = l.q[c][:0:0]
		l.busySince[c] = time.Time{}
		l.shedding[c] = false
	}
	return w
}

func (l *laneActor) enqueue(ctx actor.Context, w *waiter) {
	if l.evicted {
		if l.u.h.stopped.Load() {
			w.resolveCurrent(Shutdown)
			w.unref()
			return
		}
		ctx.Send(l.u.ctrl, w) // the controller routes it to the tenant's new lane
		return
	}
	if w.resolved() { // the caller left before the lane saw it
		w.unref()
		return
	}
	c := w.class
	cfg := &l.u.h.cfg
	if int64(len(l.q[c])) >= cfg.MaxQueueCount || l.cost[c]+w.cost > cfg.MaxQueueCost {
		w.resolveCurrent(QueueFull)
		w.unref()
		return
	}
	if r, retry := l.admissible(w); r != None {
		// Refused at once rather than parked: its caller would not wait
		// that long, or the upstream is overloaded. A caller turned away
		// for its patience is demand beyond what the lane drains in time:
		// it counts as arriving (a closed loop's callers, within their
		// patience, are never turned away for it).
		if r == Deadline {
			l.u.outOfTime.Add(1)
			l.flow[c].in += w.cost
		}
		w.settle(r, retry, 0)
		w.unref()
		return
	}
	// Only what joins a queue is counted as arriving demand: a caller
	// refused here that sends again at once (a closed loop: a connection
	// pool, an agent, a load test) is the same demand, and counting each
	// try would make the refusals themselves look like an overload,
	// which refuses more: the spiral that answered 97 % of a single
	// tenant's requests with admission_overloaded while its provider was
	// idle.
	l.flow[c].in += w.cost
	if len(l.q[c]) == 0 {
		l.busySince[c] = l.u.h.clk.Now()
		l.flow[c].restart(l.busySince[c])
	}
	l.q[c] = append(l.q[c], w)
	l.cost[c] += w.cost
	l.arm(w.deadline)
	l.report(ctx, false, nil)
}

// admissible decides whether w may queue here. A request is refused by
// its caller's patience, not by a fraction of the provider's latency: it
// waits up to its deadline (the caller's, less an unqueued answer's
// time, and ADAPTIVE_ADMISSION_MAX_WAIT_MS), and is refused at once only
// when the wait it would need (its lane's queued cost ahead of it, over
// the upstream's measured drain rate shared among the lanes with a
// backlog) passes that: waiting longer could only end in a timeout.
//
// One more refusal is an overload's: while the upstream is overloaded
// (the requests present at it, in flight and waiting, grew past a tenth
// of a window's answers: demand the provider cannot take, however long
// it waits, see controller.rollFlow), or while this lane sheds or ended
// shedding within the last window, a queue is kept short, CoDel's good queue and
// bad queue: a lane that emptied within the last burst interval (a
// tenant within its fair share, whose bursts drain) may queue up to
// burstWaitTargets' worth of wait, or one hold time of a place if
// longer; a lane that has stayed non-empty for the interval is a
// standing queue, and while what joins it outruns its grants (demand
// beyond its share) it sheds whatever would wait past the upstream's
// queueing target, at once and with a Retry-After of its drain time.
// Refusals themselves are not counted as demand (enqueue), so a closed
// loop of callers that send again at once is never taken for an
// overload: its queue stands, keeps pace with its grants, and waits.
// Until the upstream has answered, its drain rate is unknown and only
// the caps and the deadlines apply.
func (l *laneActor) admissible(w *waiter) (Reason, int) {
	v := l.u.view.Load()
	now := l.u.h.clk.Now()
	c := w.class
	backlogged := v.backlogged
	if len(l.q[c]) == 0 {
		backlogged++ // this lane joins them
	}
	ew, known := v.expectedWait(l.cost[c], w.cost, backlogged)
	if patience := w.deadline.Sub(now); patience <= 0 || (known && ew > patience) {
		return Deadline, retrySeconds(ew)
	}
	if known && ew <= v.target && l.shedding[c] {
		// The queue drained to the target: shedding ends, and whether
		// arrivals outrun grants is measured afresh from here, so that a
		// queue refilling past the target sheds again within a few
		// arrivals rather than once a window's counts show it.
		l.shedding[c] = false
		l.shedEnded[c] = now
		l.flow[c].remark(now)
	}
	// For a window after shedding ended, the lane's own flow decides
	// without the upstream's verdict, which needs a tenth of a window's
	// answers of growth to turn: a queue refilling past the target is
	// shed again after a few arrivals, not a hundred. A closed loop's
	// arrivals keep pace with its grants and do not outrun them.
	recent := !l.shedEnded[c].IsZero() && now.Sub(l.shedEnded[c]) < l.u.h.cfg.Window()
	if !known || !v.overloaded && !l.shedding[c] && !recent {
		// Demand the upstream keeps pace with (a closed loop of callers,
		// a burst being served) waits its turn, up to its patience.
		return None, 0
	}
	interval := burstIntervals * v.target
	since := l.busySince[c]
	if since.IsZero() || now.Sub(since) < interval {
		if ew > max(burstWaitTargets*v.target, v.held) {
			l.logShed("burst", w, ew, v, len(l.q[c]))
			return Overloaded, retrySeconds(ew)
		}
		return None, 0
	}
	if ew > v.target && l.flow[c].outrun(now, l.u.h.cfg.Window(), v.drainCost(v.target, backlogged)) {
		l.shedding[c] = true
		l.logShed("standing", w, ew, v, len(l.q[c]))
		return Overloaded, retrySeconds(ew)
	}
	return None, 0
}

// logShed says at debug level why a request was shed for delay: the
// figures an operator needs to tell an overload from a misjudged one.
func (l *laneActor) logShed(kind string, w *waiter, ew time.Duration, v *view, queued int) {
	if !l.u.h.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	l.u.h.log.Debug("admission shed", "upstream", l.u.name, "lane", kind, "class", w.class, "queued", queued,
		"expectedWaitMs", ew.Milliseconds(), "targetMs", v.target.Milliseconds(), "drainPerSecond", int64(v.drainRate),
		"backlogged", v.backlogged)
}

// laneFlow measures whether a lane's arrivals outrun its grants, over
// the last whole window (or, in the first window of a busy period, since
// it began).
type laneFlow struct {
	in, out         int64 // cost arrived and granted, cumulative
	markAt          time.Time
	markIn, markOut int64
	lastIn, lastOut int64 // over the last whole window; -1: none yet
}

func (f *laneFlow) restart(now time.Time) {
	f.markAt, f.markIn, f.markOut, f.lastIn, f.lastOut = now, f.in, f.out, -1, -1
}

// remark starts the window so far at now, keeping the last whole one.
func (f *laneFlow) remark(now time.Time) { f.markAt, f.markIn, f.markOut = now, f.in, f.out }

// soFarAllow is what outrun takes off the window so far: allow in the
// first window of a busy period (whose counts include the queue itself),
// nothing after.
func (f *laneFlow) soFarAllow(allow int64) int64 {
	if f.lastIn < 0 {
		return allow
	}
	return 0
}

// outrun reports whether arrivals exceeded grants by more than a tenth
// (and two requests' worth, the noise of a closed loop's timing).
//
// In the first window of a busy period the counts run from its start, so
// their difference is the queue itself (and what was shed): any standing
// queue would look like growth. What a queue may hold at the target is no
// growth, so allow (that much cost) is taken off the arrivals: a tenant
// within its share whose queue stands a little above the target is not
// demand beyond it, while one whose queue keeps growing past it is.
func (f *laneFlow) outrun(now time.Time, window time.Duration, allow int64) bool {
	if now.Sub(f.markAt) >= window {
		f.lastIn, f.lastOut = f.in-f.markIn, f.out-f.markOut
		f.markAt, f.markIn, f.markOut = now, f.in, f.out
	}
	// The window so far tells at once when arrivals outrun grants again
	// (a queue that drained to the target after shedding and refills);
	// the last whole window keeps the verdict across the roll. A closed
	// loop's arrivals follow its grants in both.
	if outrun(f.in-f.markIn-f.soFarAllow(allow), f.out-f.markOut) {
		return true
	}
	return f.lastIn >= 0 && outrun(f.lastIn, f.lastOut)
}

// outrunShare is how much more must arrive than is granted for a standing
// queue to count as demand beyond its share.
const outrunShare = 0.1

func (l *laneActor) grant(ctx actor.Context, m *grant) {
	bounce := true
	if w := l.head(m.class); w != nil && w.seq == m.seq {
		l.pop(m.class)
		if w.settle(None, 0, m.at) {
			bounce = false
			l.flow[m.class].out += w.cost
		}
		w.unref()
	}
	if bounce {
		l.u.gate.Release(m.class, m.cost, l.u.h.clk.Now().UnixNano(), true, m.at)
	}
	l.report(ctx, bounce, m)
}

func (l *laneActor) withdraw(ctx actor.Context, m *withdraw) {
	q := l.q[m.class]
	for i, w := range q {
		if w.seq != m.seq {
			continue
		}
		copy(q[i:], q[i+1:])
		q[len(q)-1] = nil
		l.q[m.class] = q[:len(q)-1]
		l.cost[m.class] -= w.cost
		if len(l.q[m.class]) == 0 {
			l.busySince[m.class] = time.Time{}
			l.shedding[m.class] = false
		}
		w.unref()
		l.report(ctx, false, nil)
		return
	}
}

// expire rejects heads whose deadline passed (the exact deadline counts as
// expired) and drops heads their callers already left.
func (l *laneActor) expire(ctx actor.Context) {
	now := l.u.h.clk.Now()
	changed := false
	next := time.Time{}
	for c := range l.q {
		for len(l.q[c]) > 0 {
			w := l.q[c][0]
			if w.resolved() {
				l.pop(admission.Class(c))
				w.unref()
				changed = true
				continue
			}
			if now.Before(w.deadline) {
				if next.IsZero() || w.deadline.Before(next) {
					next = w.deadline
				}
				break
			}
			l.pop(admission.Class(c))
			w.resolveCurrent(Deadline)
			w.unref()
			l.u.outOfTime.Add(1)
			changed = true
		}
	}
	if changed {
		l.report(ctx, false, nil)
	}
	if !next.IsZero() {
		l.arm(next)
	}
}

// arm makes sure a deadline check runs at t (or earlier). Deadlines are
// decided on the injected clock; the timer only wakes the lane.
func (l *laneActor) arm(t time.Time) {
	if !l.armed.IsZero() && !t.Before(l.armed) {
		return
	}
	if l.deadline != nil {
		l.deadline.Stop()
	}
	d := t.Sub(l.u.h.clk.Now())
	if d < time.Millisecond {
		d = time.Millisecond
	}
	l.armed = t
	l.deadline = l.after(d, deadlineDue{})
}

// after sends the lane msg once d has passed on the injected clock.
func (l *laneActor) after(d time.Duration, msg any) clock.Timer {
	root, me := l.root, l.me
	return l.u.h.clk.AfterFunc(d, func() { root.Send(me, msg) })
}

func (l *laneActor) rejectAll(r Reason) {
	for c := range l.q {
		for len(l.q[c]) > 0 {
			w := l.pop(admission.Class(c))
			w.resolveCurrent(r)
			w.unref()
		}
	}
}

func (l *laneActor) report(ctx actor.Context, bounce bool, g *grant) {
	if l.evicted {
		return
	}
	s := &laneState{id: l.id, bounce: bounce}
	if bounce {
		s.bounced = *g
	}
	for c := range l.q {
		if w := l.head(admission.Class(c)); w != nil {
			s.head[c] = headInfo{seq: w.seq, cost: w.cost}
		}
		s.count[c] = int64(len(l.q[c]))
		s.cost[c] = l.cost[c]
	}
	ctx.Send(l.u.ctrl, s)
}
