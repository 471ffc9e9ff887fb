package lanes

import (
	"container/list"
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/messages"
)

// controller owns one upstream's adaptive limit (admission.Controller),
// the lane registry (creation, LRU and idle eviction), the fair scheduler
// over lane heads, and shadow mode's virtual queue. It publishes the
// limit to the upstream's gate and a view for lanes and snapshots;
// nothing reads its fields.
//
// Supervision (controllerStrategy, laneStrategy): the controller is a
// top-level actor whose tenant lanes are its children; either restarts
// from a fresh object. A failed lane answers its queue
// admission_unavailable and reports itself empty; a restarted controller
// starts from the initial limit with no tenant lane, and re-learns the
// shared lane's queue from the lane. Capacity held by admitted requests
// lives in the gate and survives both.
type controller struct {
	u      *upstream
	cfg    admission.Config
	manual bool
	// flow is whether the requests present at the upstream (in flight
	// and waiting) grow, window by window.
	flow struct {
		markAt                time.Time
		markPresent, markDone int64
		lastGrowth, lastDone  int64 // over the last whole window
		// hasLast: a whole window was measured (growth may be negative:
		// a sentinel of -1 read a shrinking window as none, and the
		// next window's refill was judged against no answers).
		hasLast bool
		// markLate is upstream.outOfTime at markAt, lastLate its growth
		// over the last whole window.
		markLate, lastLate int64
		// spanAt and spanDone mark the start of the current span of
		// rampSpan; spanHigh is the most requests present seen in it,
		// high and lastHigh the most seen before it in this flow window
		// and in the last one; growing counts the whole spans just past
		// in which the requests present rose past those; ramped: the
		// window's growth went on for rampSpans spans since it began
		// (see rollFlow: before a knee is seen only growth that goes on
		// is an overload).
		spanAt                   time.Time
		spanDone                 int64
		spanHigh, high, lastHigh int64
		growing                  int
		ramped, overloaded       bool
	}
	// released counts the leases the controller folded in (drainReleases).
	released int64
	ctl      *admission.Controller
	sched    *admission.Scheduler
	lanes    map[tenant.ID]*laneInfo
	byID     map[admission.LaneID]*laneInfo
	lru      *list.List // most recently used first
	nextID   admission.LaneID
	shared   *laneInfo

	virtQ    []*virtEntry
	virtIdx  map[uint64]*virtEntry
	virtCost int64
	virtN    int64

	cancels []func()
	// sub cancels the measuring tick; it runs while the upstream has work
	// and stops after a window without any (idle counts its ticks).
	sub    func()
	idle   int
	self   *actor.PID
	root   *actor.RootContext
	window Window
	// tenants is the last sorted lane list (rebuilt at most every
	// tenantsEvery steps: sorting a thousand lanes per release would cost
	// more than the release).
	tenants    []LaneTenant
	sinceLanes int
	// winAt is the gate's reading when the reporting window began,
	// utilization the share of the limit the last window kept busy, and
	// winDone / lastDone the releases seen in this and the last window.
	winAt             admission.Reading
	utilization       float64
	winDone, lastDone int64
	nowNs             int64
	decide            [admission.NumClasses]func(int64) admission.Decision
}

type laneInfo struct {
	id       admission.LaneID
	key      tenant.ID
	pid      *actor.PID
	count    [admission.NumClasses]int64
	cost     [admission.NumClasses]int64
	lastUse  time.Time
	elem     *list.Element
	inflight [admission.NumClasses]uint64 // head seq granted or rejected, not yet acknowledged
}

type virtEntry struct {
	id       uint64
	class    admission.Class
	cost     int64
	deadline time.Time
	queued   bool
	promoted bool
}

func newController(u *upstream, o Options) *controller {
	h := u.h
	c := &controller{u: u, cfg: o.Config, manual: o.ManualTicks,
		ctl:   admission.NewController(o.Config.Control(), h.clk.Now()),
		sched: admission.NewScheduler(o.Config.HistoryHalfLifeMs * int64(time.Millisecond)),
		lanes: map[tenant.ID]*laneInfo{}, byID: map[admission.LaneID]*laneInfo{}, lru: list.New(), virtIdx: map[uint64]*virtEntry{}}
	for cl := range c.decide {
		cl := admission.Class(cl)
		c.decide[cl] = func(cost int64) admission.Decision {
			if c.u.gate.Grant(cl, cost, c.nowNs, 0) == admission.Granted {
				return admission.Take
			}
			return admission.Skip
		}
	}
	return c
}

// tickEvery is how often a controller measures its upstream: often
// enough for phases of two answers of a fast provider, and a release
// wakes it in between anyway.
const tickEvery = 10 * time.Millisecond

func (c *controller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		c.self, c.root = ctx.Self(), ctx.ActorSystem().Root
		if pid := c.u.shared; pid != nil {
			c.shared = &laneInfo{id: sharedLaneID, pid: pid}
			c.byID[sharedLaneID] = c.shared
			c.sched.AddLane(sharedLaneID, 1)
		}
		if c.u.incarnations.Add(1) > 1 {
			// A restart: no tenant lane survived (they were this actor's
			// children), the shared lane may hold a queue, and the gate
			// follows this incarnation's limit.
			if c.shared != nil {
				ctx.Send(c.shared.pid, resync{})
			}
			c.publishLanes()
			c.publishLimit()
		}
		if !c.manual {
			w := c.cfg.Window()
			c.cancels = append(c.cancels, repeat.Send(c.u.h.clk, c.root, w, w, ctx.Self(), windowTick{}))
			c.wake()
		}
		c.publish(true)
	case *actor.Stopping, *actor.Restarting:
		for _, cancel := range c.cancels {
			cancel()
		}
		c.cancels = nil
		if c.sub != nil {
			c.sub()
			c.sub = nil
		}
	case *waiter:
		c.wake()
		c.route(ctx, m)
	case *withdraw:
		if info := c.laneOf(m.tenant); info != nil {
			ctx.Send(info.pid, m)
		}
	case *laneState:
		c.onLaneState(ctx, m)
	case releaseKick:
		c.wake()
		c.step(ctx)
	case *shadowQueue:
		c.onShadow(m)
	case *pressureMsg:
		if c.ctl.ObservePressure(c.u.h.clk.Now(), m.sev) {
			c.publishLimit()
		}
		c.dispatch(ctx)
		c.publish(false)
	case windowTick:
		c.closeWindow(ctx)
	case subTick:
		c.step(ctx)
		c.sleepIfIdle()
	case manualTick:
		c.step(ctx)
		for _, info := range c.byID {
			ctx.Send(info.pid, deadlineDue{})
		}
	case syncMsg:
		c.publish(true)
		ctx.Respond(true)
	case measuringQuery:
		ctx.Respond(c.sub != nil)
	}
}

// wake starts the measuring tick if it is not running.
func (c *controller) wake() {
	c.idle = 0
	if c.sub == nil && !c.manual && c.root != nil {
		c.sub = repeat.Send(c.u.h.clk, c.root, tickEvery, tickEvery, c.self, subTick{})
	}
}

// sleepIfIdle stops the measuring tick after a window without work: an
// idle upstream costs no timer wake-ups; the next request wakes it.
func (c *controller) sleepIfIdle() {
	if c.sub == nil {
		return
	}
	st := c.u.gate.Stats()
	if st.ActiveCount() > 0 || st.Waiting[admission.Interactive]+st.Waiting[admission.Batch] > 0 || c.lanesQueued() {
		c.idle = 0
		return
	}
	if c.idle++; time.Duration(c.idle)*tickEvery >= c.cfg.Window() {
		c.sub()
		c.sub = nil
	}
}

// lanesQueued reports whether any lane holds a queue.
func (c *controller) lanesQueued() bool {
	for _, info := range c.byID {
		if info.count[admission.Interactive]+info.count[admission.Batch] > 0 {
			return true
		}
	}
	return false
}

// step folds finished leases into the controller, lets it judge its
// phase, and dispatches freed capacity.
func (c *controller) step(ctx actor.Context) {
	now := c.u.h.clk.Now()
	changed := c.drainReleases()
	c.rollFlow(now)
	phases := c.ctl.Phases()
	r := c.u.gate.Reading(now)
	r.Busy = c.u.h.cpuBusy.Load()
	if c.ctl.Tick(r) {
		changed = true
	}
	if c.ctl.Phases() != phases && c.u.h.log.Enabled(context.Background(), slog.LevelDebug) {
		r := c.ctl.Last()
		c.u.h.log.Debug("admission phase", "upstream", c.u.name, "phase", r.Phase, "rule", r.Rule, "limit", r.LimitBefore, "next", r.LimitAfter,
			"inflight", r.Inflight, "queueRatio", r.QueueRatio, "knee", r.Knee, "samples", r.Samples, "drops", r.Drops, "limited", r.Limited,
			"baselineMs", c.ctl.BaselineOf(false).Milliseconds(), "heldMs", c.ctl.Held().Milliseconds(), "localMs", r.LocalMs)
	}
	if changed {
		c.publishLimit()
		r := c.ctl.Last()
		c.u.h.log.Debug("admission limit changed", "upstream", c.u.name, "from", r.LimitBefore, "to", c.ctl.Limit(), "rule", r.Rule,
			"phase", r.Phase, "inflight", r.Inflight, "queueRatio", r.QueueRatio, "knee", r.Knee)
	}
	c.dispatch(ctx)
	c.publish(false)
}

// rollFlow closes the flow window once a window has passed: the upstream
// is overloaded when, over the window so far or the last whole one, the
// requests present at it (in flight and waiting for admission) grew by
// more than a tenth of a window's answers and two requests. Demand beyond
// what the upstream takes grows them without end; a closed loop of
// callers (each sends again only when answered) keeps them where they
// are, whatever the limit does: a lower limit moves callers from in
// flight to waiting, and a caller refused and sending again at once is
// never present twice. Counting arrivals against grants took both for
// growth, so refusals and limit changes read as an overload.
func (c *controller) rollFlow(now time.Time) {
	f := &c.flow
	st := c.u.gate.Stats()
	present := st.ActiveCount() + st.Waiting[admission.Interactive] + st.Waiting[admission.Batch]
	late := c.u.outOfTime.Load()
	if f.markAt.IsZero() {
		f.markAt, f.markPresent, f.markDone, f.hasLast, f.markLate = now, present, c.released, false, late
	}
	if now.Sub(f.markAt) >= c.cfg.Window() {
		f.lastGrowth, f.lastDone, f.lastLate = present-f.markPresent, c.released-f.markDone, late-f.markLate
		f.hasLast = true
		f.markAt, f.markPresent, f.markDone, f.markLate = now, present, c.released, late
		f.lastHigh, f.high = f.high, 0
	}
	// The window so far tells at once (an overload's first moments fill a
	// queue); the last whole one keeps the verdict across the roll.
	// Early in a window its answers are a handful, so growth so far is
	// judged against a whole window's answers when one is known.
	scale := c.released - f.markDone
	if f.hasLast {
		scale = max(scale, f.lastDone)
	}
	grows := growsPast(present-f.markPresent, scale) || (f.hasLast && growsPast(f.lastGrowth, f.lastDone))
	// Until the provider has shown a knee, the limit is a lower bound of
	// its capacity (the controller is still raising it), so demand above
	// it is no overload by itself: a closed loop of callers that starts
	// at once (agents, a connection pool, 64 streams) steps the requests
	// present up once and then sends only as answered, and shedding its
	// queue, measured against a limit about to grow, was a spiral (each
	// refused caller sent again at once; 2,885 of 3,000 streams refused
	// within a second of a cold start). Demand the provider cannot take
	// keeps arriving. So before a knee the growth must also go on: the
	// requests present rose, in each of rampSpans spans of rampSpan in a
	// row, past the most seen before (in this window and the last; from
	// a low point, a closed loop whose callers are slow to send again
	// would read as rising). A step shows in a span or two and no more;
	// an open loop's excess shows in every span, so its verdict comes
	// three spans later than a knee allows, and then holds while the
	// window's growth does (shedding flattens the requests present,
	// which must not end it).
	f.spanHigh = max(f.spanHigh, present)
	if now.Sub(f.spanAt) >= rampSpan {
		if !f.spanAt.IsZero() && growsPast(present-max(f.high, f.lastHigh), c.released-f.spanDone) {
			f.growing++
		} else {
			f.growing = 0
		}
		f.spanAt, f.spanDone = now, c.released
		f.high, f.spanHigh = max(f.high, f.spanHigh), 0
	}
	f.ramped = grows && (f.ramped || f.growing >= rampSpans)
	if !c.ctl.Converged() && c.cfg.MinLimit < c.cfg.MaxLimit {
		grows = f.ramped
	}
	// Requests turned away for time (their wait would pass, or passed,
	// their deadline) are an overload too: once the queue reaches the
	// callers' patience it stops growing, the rest being turned away,
	// and without them the verdict would end there, leaving a queue as
	// long as the patience (seconds) to every caller it admits.
	f.overloaded = grows || late > f.markLate || f.lastLate > 0
}

// rampSpan and rampSpans: before a knee, growth is an overload once the
// requests present rose in rampSpans spans of rampSpan (two measuring
// ticks) in a row: a closed loop's step falls in one or two, and it
// sends again only an answer's time later.
const (
	rampSpan  = 2 * tickEvery
	rampSpans = 3
)

// growsPast reports whether growth exceeds a tenth of answers and two
// requests (a burst's timing noise).
func growsPast(growth, answers int64) bool { return float64(growth) > float64(answers)*outrunShare+2 }

// outrun reports whether in exceeds out by more than a tenth and two
// requests' worth (a closed loop's timing noise).
func outrun(in, out int64) bool { return float64(in) > float64(out)*(1+outrunShare)+2 }

func (c *controller) laneOf(key tenant.ID) *laneInfo {
	if !c.cfg.VirtualLanes {
		return c.shared
	}
	return c.lanes[key]
}

// route sends a waiter to its tenant's lane, creating the lane on demand.
func (c *controller) route(ctx actor.Context, w *waiter) {
	info := c.laneOf(w.tenant)
	if info == nil && c.cfg.VirtualLanes {
		info = c.createLane(ctx, w.tenant)
	}
	if info == nil { // shared lane not registered yet: cannot happen after Spawn
		w.resolveCurrent(Unavailable)
		w.unref()
		return
	}
	ctx.Send(info.pid, w)
}

func (c *controller) createLane(ctx actor.Context, key tenant.ID) *laneInfo {
	for len(c.lanes) >= c.cfg.MaxLanes {
		c.evict(ctx, c.lru.Back().Value.(*laneInfo), LaneEvicted)
	}
	c.nextID++
	if c.nextID == sharedLaneID {
		c.nextID++
	}
	id := c.nextID
	u := c.u
	pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &laneActor{u: u, id: id, key: key} }))
	info := &laneInfo{id: id, key: key, pid: pid, lastUse: c.u.h.clk.Now()}
	info.elem = c.lru.PushFront(info)
	c.lanes[key], c.byID[id] = info, info
	weight := 1.0
	if f := c.u.h.weight; f != nil {
		weight = f(key)
	}
	c.sched.AddLane(id, weight) // AddLane takes <= 0 as 1
	c.publishLanes()
	c.sinceLanes = tenantsEvery // list it at the next publish
	return info
}

// evict retires a lane: it disappears from routing at once, and the lane
// rejects what it still holds with reason.
func (c *controller) evict(ctx actor.Context, info *laneInfo, r Reason) {
	delete(c.lanes, info.key)
	delete(c.byID, info.id)
	c.lru.Remove(info.elem)
	c.sched.RemoveLane(info.id)
	c.publishLanes()
	c.sinceLanes = tenantsEvery
	ctx.Send(info.pid, &evict{reason: r})
}

func (c *controller) publishLanes() {
	m := make(map[tenant.ID]*actor.PID, len(c.lanes))
	for k, info := range c.lanes {
		m[k] = info.pid
	}
	c.u.lanes.Store(&m)
}

func (c *controller) onLaneState(ctx actor.Context, m *laneState) {
	info := c.byID[m.id]
	if info == nil { // evicted meanwhile
		if m.bounce {
			c.dispatch(ctx)
		}
		return
	}
	now := c.u.h.clk.Now()
	info.count, info.cost, info.lastUse = m.count, m.cost, now
	if m.count[admission.Interactive]+m.count[admission.Batch] > 0 {
		// A queue is work to measure. After an idle spell the tick is
		// asleep, and an overload's first requests take every free place
		// on the gate's fast path: no release comes for a whole answer's
		// time, and without the tick the flow verdict (which turns on
		// shedding) would wait that long while the queue grows.
		c.wake()
	}
	if info.elem != nil {
		c.lru.MoveToFront(info.elem)
	}
	for cl := range m.head {
		hd := m.head[cl]
		if hd.seq != 0 && hd.seq == info.inflight[cl] {
			continue // the lane has not seen our grant for this head yet
		}
		info.inflight[cl] = 0
		c.sched.SetHead(m.id, admission.Class(cl), hd.seq, hd.cost, now.UnixNano())
	}
	c.dispatch(ctx)
	c.publish(false)
}

// drainReleases folds finished leases into the controller and the lanes'
// holdings. It reports whether the limit changed.
func (c *controller) drainReleases() bool {
	batch := c.u.done.drain()
	c.winDone += int64(len(batch))
	c.released += int64(len(batch))
	for i := range batch {
		m := &batch[i]
		c.ctl.Observe(m.at, m.s)
		if m.virtID != 0 {
			if e := c.virtIdx[m.virtID]; e != nil {
				delete(c.virtIdx, m.virtID)
				if e.promoted {
					c.u.virt.Release(e.class, e.cost, m.at.UnixNano(), true, m.at.UnixNano())
				} else if e.queued {
					e.queued = false
					c.virtN--
					c.virtCost -= e.cost
				}
			}
		}
	}
	return false
}

// dispatch grants freed capacity to lane heads, interactive first, each
// class in fair order, until nothing more fits.
//
// There is no reserve for light lanes: a lane with a waiter is served
// next by the fair scheduler, so a light tenant waits at most for the
// next place to free (time held ÷ limit), while room kept for its recent
// peak stood idle and cost the busy tenant a fifth of the capacity.
//
// It folds the released leases first, whatever message woke it, so their
// samples reach the controller before it grants on their capacity.
func (c *controller) dispatch(ctx actor.Context) {
	c.drainReleases()
	now := c.u.h.clk.Now()
	c.nowNs = now.UnixNano()
	for progress := true; progress; {
		progress = false
		for cl := admission.Class(0); cl < admission.NumClasses; cl++ {
			id, seq, cost, d, ok := c.sched.Next(cl, c.nowNs, c.decide[cl])
			if !ok {
				continue
			}
			progress = true
			info := c.byID[id]
			info.inflight[cl] = seq
			if d == admission.Take {
				ctx.Send(info.pid, &grant{class: cl, seq: seq, cost: cost, at: c.nowNs})
			} else {
				ctx.Send(info.pid, &rejectHead{class: cl, seq: seq, reason: Unavailable})
			}
		}
	}
	if c.u.virt != nil {
		c.promoteVirtual(now)
	}
}

func (c *controller) onShadow(m *shadowQueue) {
	h := c.u.h
	if c.virtN >= c.cfg.MaxQueueCount || m.cost > c.cfg.MaxQueueCost-c.virtCost {
		h.wouldReject.Add(1)
		return
	}
	h.wouldQueue.Add(1)
	e := &virtEntry{id: m.id, class: m.class, cost: m.cost, deadline: m.deadline, queued: true}
	c.virtQ = append(c.virtQ, e)
	c.virtIdx[m.id] = e
	c.virtN++
	c.virtCost += m.cost
	c.promoteVirtual(h.clk.Now())
}

// promoteVirtual moves shadow entries from the virtual queue to virtual
// in-flight as would-be capacity frees (FIFO per class), and forgets the
// ones whose deadline passed.
func (c *controller) promoteVirtual(now time.Time) {
	ns := now.UnixNano()
	var blocked [admission.NumClasses]bool
	keep := c.virtQ[:0]
	for _, e := range c.virtQ {
		if !e.queued {
			continue
		}
		if !now.Before(e.deadline) {
			e.queued = false
			delete(c.virtIdx, e.id)
		} else if !blocked[e.class] {
			if c.u.virt.Grant(e.class, e.cost, ns, 0) == admission.Granted {
				e.queued, e.promoted = false, true
			} else {
				blocked[e.class] = true
			}
		}
		if e.queued {
			keep = append(keep, e)
		} else {
			c.virtN--
			c.virtCost -= e.cost
		}
	}
	for i := len(keep); i < len(c.virtQ); i++ {
		c.virtQ[i] = nil
	}
	c.virtQ = keep
}

func (c *controller) closeWindow(ctx actor.Context) {
	now := c.u.h.clk.Now()
	idle := time.Duration(c.cfg.LaneIdleMs) * time.Millisecond
	for e := c.lru.Back(); e != nil; {
		info := e.Value.(*laneInfo)
		if now.Sub(info.lastUse) < idle {
			break
		}
		e = e.Prev()
		c.evict(ctx, info, LaneEvicted)
	}
	// Utilization of the window now closed: the in-flight integral over
	// it, against the limit.
	r := c.u.gate.Reading(now)
	if dt := r.At.Sub(c.winAt.At).Seconds(); !c.winAt.At.IsZero() && dt > 0 && c.ctl.Limit() > 0 {
		c.utilization = min(1, max(0, (r.Integral-c.winAt.Integral)/dt/float64(c.ctl.Limit())))
	}
	c.winAt = r
	c.lastDone, c.winDone = c.winDone, 0
	c.window = windowOf(c.ctl.Last())
	c.window.Phases = c.ctl.Phases()
	c.step(ctx)
	c.publish(true)
}

func (c *controller) publishLimit() {
	c.u.gate.SetLimit(c.ctl.Limit())
	if c.u.virt != nil {
		c.u.virt.SetLimit(c.ctl.Limit())
	}
}

// maxLaneTenants bounds laneTenants in the snapshot; laneCount is exact.
const maxLaneTenants = 100

// tenantsEvery is how many publishes reuse the sorted lane list.
const tenantsEvery = 10

func (c *controller) publish(full bool) {
	if c.sinceLanes++; full || c.sinceLanes >= tenantsEvery {
		c.sinceLanes = 0
		c.tenants = c.sortedTenants()
	}
	c.u.view.Store(c.buildView())
}

// queueTarget is the upstream's queueing target: the configured one, or
// half the no-queue latency, but never less than two turnovers of a
// place (the time held ÷ the limit): long streams free a place only so
// often, and a wait for the next one is no standing queue.
func (c *controller) queueTarget() time.Duration {
	t := c.cfg.QueueTarget(c.ctl.Baseline())
	if c.cfg.QueueTargetMs == 0 && c.ctl.Limit() > 0 {
		t = min(max(t, 2*c.ctl.Held()/time.Duration(c.ctl.Limit())), c.cfg.MaxWait())
	}
	return t
}

func (c *controller) buildView() *view {
	ctl := c.ctl
	v := &view{limit: ctl.Limit(), knee: ctl.Knee(), phase: ctl.Phase(), converged: ctl.Converged(),
		baseline: [2]time.Duration{ctl.BaselineOf(true), ctl.BaselineOf(false)}, held: ctl.Held(),
		drainRate: ctl.DrainRate(), target: c.queueTarget(), pressure: ctl.Pressure(), overloaded: c.flow.overloaded,
		last: ctl.Last(), window: c.window, virtQueuedCount: c.virtN, virtQueuedCost: c.virtCost, laneCount: len(c.lanes),
		laneTenants: c.tenants, utilization: c.utilization, answered: c.lastDone}
	v.shortEWMA, v.longEWMA = ctl.LatencyEWMAs()
	if c.shared != nil {
		for cl := range c.shared.count {
			v.sharedCount += c.shared.count[cl]
			v.sharedCost += c.shared.cost[cl]
		}
		if v.sharedCount > 0 {
			v.backlogged = 1
		}
	}
	for _, info := range c.lanes {
		var n, cost int64
		for cl := range info.count {
			n += info.count[cl]
			cost += info.cost[cl]
		}
		if n > 0 {
			v.backlogged++
		}
		v.laneQueuedCount += n
		v.laneQueuedCost += cost
	}
	return v
}

// sortedTenants lists up to maxLaneTenants lanes, most queued first.
func (c *controller) sortedTenants() []LaneTenant {
	out := make([]LaneTenant, 0, len(c.lanes))
	for _, info := range c.lanes {
		var n, cost int64
		for cl := range info.count {
			n += info.count[cl]
			cost += info.cost[cl]
		}
		out = append(out, LaneTenant{TenantKey: info.key.String(), QueuedCount: n, QueuedCost: cost, lastUse: info.lastUse})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.QueuedCost != b.QueuedCost {
			return a.QueuedCost > b.QueuedCost
		}
		return a.lastUse.After(b.lastUse)
	})
	if len(out) > maxLaneTenants {
		out = out[:maxLaneTenants]
	}
	return out
}
