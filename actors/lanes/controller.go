package lanes

import (
	"container/list"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/tenant"
)

// controller owns the adaptive limit, the window statistics, the lane
// registry (creation, LRU and idle eviction), the fair scheduler over lane
// heads, and shadow mode's virtual queue. It publishes the limit to the
// gate and a view for snapshots; nothing reads its fields.
type controller struct {
	h      *Handle
	cfg    admission.Config
	manual bool
	adapt  *admission.Adapter
	sched  *admission.Scheduler
	lanes  map[tenant.ID]*laneInfo
	byID   map[admission.LaneID]*laneInfo
	lru    *list.List // most recently used first
	nextID admission.LaneID
	shared *laneInfo
	// limited: a queued head found no room under the limit itself in this
	// window (slow start); cleared at each window close.
	limited bool

	virtQ    []*virtEntry
	virtIdx  map[uint64]*virtEntry
	virtCost int64
	virtN    int64

	cancels []scheduler.CancelFunc
	last    admission.WindowReport
	nowNs   int64
	extra   [admission.NumClasses]int64
	decide  [admission.NumClasses]func(int64) admission.Decision
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

	// What the lane holds from grants, for the reserve of light lanes.
	flight    [admission.NumClasses]int64
	peak      [admission.NumClasses]int64
	peakAt    [admission.NumClasses]time.Time
	lastGrant [admission.NumClasses]time.Time
}

type virtEntry struct {
	id       uint64
	class    admission.Class
	cost     int64
	deadline time.Time
	queued   bool
	promoted bool
}

func newController(h *Handle, o Options) *controller {
	c := &controller{h: h, cfg: o.Config, manual: o.ManualTicks,
		adapt: admission.NewAdapter(o.Config, h.clk.Now()), sched: admission.NewScheduler(o.Config.HistoryHalfLifeMs * int64(time.Millisecond)),
		lanes: map[tenant.ID]*laneInfo{}, byID: map[admission.LaneID]*laneInfo{}, lru: list.New(), virtIdx: map[uint64]*virtEntry{}}
	for cl := range c.decide {
		cl := admission.Class(cl)
		c.decide[cl] = func(cost int64) admission.Decision {
			switch c.h.gate.GrantReserving(cl, cost, c.nowNs, c.extra[cl]) {
			case admission.Granted:
				return admission.Take
			case admission.TooBig:
				return admission.Drop
			case admission.NoRoom:
				// Demand waits at the limit itself (slow start may grow
				// it); not when it waits only for room kept for another
				// class's floor or another lane's recent demand, which a
				// higher limit would hand to this queue past the provider's
				// knee.
				c.limited = true
			}
			return admission.Skip
		}
	}
	return c
}

func (c *controller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *actor.Started:
		if pid := c.h.shared; pid != nil {
			c.shared = &laneInfo{id: sharedLaneID, pid: pid}
			c.byID[sharedLaneID] = c.shared
			c.sched.AddLane(sharedLaneID, 1)
		}
		if c.h.incarnations.Add(1) > 1 && c.shared != nil {
			ctx.Send(c.shared.pid, resync{}) // a restart: the shared lane may hold a queue
		}
		// After a restart: no tenant lane survived, and the gate follows
		// this incarnation's limit.
		c.publishLanes()
		c.publishLimit()
		if !c.manual {
			w := c.cfg.Window()
			sub := min(max(w/10, 10*time.Millisecond), 100*time.Millisecond)
			c.cancels = append(c.cancels, repeat.Send(ctx.ActorSystem().Root, w, w, ctx.Self(), windowTick{}), repeat.Send(ctx.ActorSystem().Root, sub, sub, ctx.Self(), subTick{}))
		}
	case *actor.Restarting, *actor.Stopping:
		for _, cancel := range c.cancels {
			cancel()
		}
		c.cancels = nil
	case *waiter:
		c.route(ctx, m)
	case *withdraw:
		if info := c.laneOf(m.tenant); info != nil {
			ctx.Send(info.pid, m)
		}
	case *laneState:
		c.onLaneState(ctx, m)
	case releaseKick:
		c.onReleases(ctx)
	case *shadowQueue:
		c.onShadow(m)
	case *pressureMsg:
		c.adapt.ObservePressure(m.sev)
		c.publishLimit()
		c.dispatch(ctx)
		c.publish()
	case windowTick:
		c.closeWindow(ctx)
	case subTick:
		c.tick(ctx)
	case manualTick:
		c.tick(ctx)
		for _, info := range c.byID {
			ctx.Send(info.pid, deadlineDue{})
		}
	case syncMsg:
		c.publish()
		ctx.Respond(true)
	}
}

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
	h := c.h
	pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &laneActor{h: h, id: id, key: key} }))
	info := &laneInfo{id: id, key: key, pid: pid, lastUse: c.h.clk.Now()}
	info.elem = c.lru.PushFront(info)
	c.lanes[key], c.byID[id] = info, info
	c.sched.AddLane(id, 1)
	c.publishLanes()
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
	ctx.Send(info.pid, &evict{reason: r})
}

func (c *controller) publishLanes() {
	m := make(map[tenant.ID]*actor.PID, len(c.lanes))
	for k, info := range c.lanes {
		m[k] = info.pid
	}
	c.h.lanes.Store(&m)
}

func (c *controller) onLaneState(ctx actor.Context, m *laneState) {
	info := c.byID[m.id]
	if info == nil { // evicted meanwhile
		if m.bounce {
			c.dispatch(ctx)
		}
		return
	}
	now := c.h.clk.Now()
	info.count, info.cost, info.lastUse = m.count, m.cost, now
	if m.bounce {
		info.flight[m.bounced.class] = max(0, info.flight[m.bounced.class]-m.bounced.cost)
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
}

func (c *controller) onReleases(ctx actor.Context) { c.dispatch(ctx) }

// drainReleases folds finished leases into the window statistics and the
// lanes' holdings. It reports whether the limit changed (a slow-start
// probe whose answers queued is undone as soon as they show it).
func (c *controller) drainReleases(now time.Time) bool {
	active := c.h.gate.Stats().ActiveCost()
	batch := c.h.done.drain()
	changed := false
	for i := range batch {
		m := &batch[i]
		if c.adapt.Complete(now, active, m.c) {
			changed = true
		}
		if m.queued && c.cfg.VirtualLanes {
			if info := c.lanes[m.tenant]; info != nil {
				info.flight[m.class] = max(0, info.flight[m.class]-m.cost)
			}
		}
		if m.virtID != 0 {
			if e := c.virtIdx[m.virtID]; e != nil {
				delete(c.virtIdx, m.virtID)
				if e.promoted {
					c.h.virt.Release(e.class, e.cost)
				} else if e.queued {
					e.queued = false
					c.virtN--
					c.virtCost -= e.cost
				}
			}
		}
	}
	return changed
}

// dispatch grants freed capacity to lane heads, interactive first, each
// class in fair order, until nothing more fits.
func (c *controller) dispatch(ctx actor.Context) {
	now := c.h.clk.Now()
	c.nowNs = now.UnixNano()
	if c.drainReleases(now) {
		c.publishLimit()
		c.h.log.Debug("admission limit changed", "to", c.adapt.Limit(), "rule", "probe_undone")
	}
	for cl := range c.extra {
		c.extra[cl] = c.laneReserve(admission.Class(cl), now)
	}
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
				c.charge(info, cl, cost, now)
				c.extra[cl] = c.laneReserve(cl, now) // the lane may just have become light
				ctx.Send(info.pid, &grant{class: cl, seq: seq, cost: cost})
			} else {
				ctx.Send(info.pid, &rejectHead{class: cl, seq: seq, reason: Oversized})
			}
		}
	}
	if c.h.virt != nil {
		c.promoteVirtual(now)
	}
}

// charge records a grant to a lane: what it holds, its recent peak, and
// when it was last served.
func (c *controller) charge(info *laneInfo, cl admission.Class, cost int64, now time.Time) {
	info.flight[cl] += cost
	if info.flight[cl] >= info.peak[cl] || now.Sub(info.peakAt[cl]) >= c.classIdle() {
		info.peak[cl], info.peakAt[cl] = info.flight[cl], now
	}
	info.lastGrant[cl] = now
}

func (c *controller) classIdle() time.Duration {
	return time.Duration(c.cfg.ClassIdleMs) * time.Millisecond
}

// laneReserve is the room a grant must leave free for the light lanes of
// class cl: lanes served in the last ClassIdle that have nothing queued now
// keep, up to their fair share, the most they held recently, so that a
// tenant's steady traffic is not made to wait behind another tenant's
// backlog for the next completion. Lanes with queued work need no reserve:
// the fair scheduler serves them in order. This is the noisy-neighbour
// protection; it lends the rest of every share.
func (c *controller) laneReserve(cl admission.Class, now time.Time) int64 {
	if !c.cfg.VirtualLanes || len(c.lanes) < 2 {
		return 0
	}
	idle := c.classIdle()
	active := int64(0)
	for _, info := range c.lanes {
		if info.flight[cl] > 0 || c.queued(info, cl) > 0 || now.Sub(info.lastGrant[cl]) < idle {
			active++
		}
	}
	if active < 2 {
		return 0
	}
	share := c.adapt.Limit() / active
	var sum int64
	for _, info := range c.lanes {
		if c.queued(info, cl) > 0 {
			continue // contending: the scheduler serves it in fair order
		}
		if info.flight[cl] == 0 && now.Sub(info.lastGrant[cl]) >= idle {
			continue
		}
		peak := info.flight[cl]
		if now.Sub(info.peakAt[cl]) < idle {
			peak = max(peak, info.peak[cl])
		}
		if r := min(share, peak) - info.flight[cl]; r > 0 {
			sum += r
		}
	}
	return sum
}

// queued is what a lane still has waiting in class cl: its last report
// less a head granted or rejected since.
func (c *controller) queued(info *laneInfo, cl admission.Class) int64 {
	n := info.count[cl]
	if info.inflight[cl] != 0 {
		n--
	}
	return n
}

func (c *controller) onShadow(m *shadowQueue) {
	c.adapt.NoteLimited() // enforce would have queued or refused it
	if c.virtN >= c.cfg.MaxQueueCount || m.cost > c.cfg.MaxQueueCost-c.virtCost {
		c.h.wouldReject.Add(1)
		return
	}
	c.h.wouldQueue.Add(1)
	e := &virtEntry{id: m.id, class: m.class, cost: m.cost, deadline: m.deadline, queued: true}
	c.virtQ = append(c.virtQ, e)
	c.virtIdx[m.id] = e
	c.virtN++
	c.virtCost += m.cost
	c.promoteVirtual(c.h.clk.Now())
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
			switch c.h.virt.Grant(e.class, e.cost, ns) {
			case admission.Granted:
				e.queued, e.promoted = false, true
			case admission.TooBig:
				e.queued = false
				delete(c.virtIdx, e.id)
			default:
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

func (c *controller) tick(ctx actor.Context) {
	now := c.h.clk.Now()
	c.adapt.ObservePeak(c.h.gate.TakePeak())
	c.adapt.Sample(now, c.h.gate.Stats().ActiveCost())
	c.dispatch(ctx)
	c.publish()
}

func (c *controller) closeWindow(ctx actor.Context) {
	now := c.h.clk.Now()
	idle := time.Duration(c.cfg.LaneIdleMs) * time.Millisecond
	for e := c.lru.Back(); e != nil; {
		info := e.Value.(*laneInfo)
		if now.Sub(info.lastUse) < idle {
			break
		}
		e = e.Prev()
		c.evict(ctx, info, LaneEvicted)
	}
	c.adapt.ObservePeak(c.h.gate.TakePeak())
	if c.limited {
		c.adapt.NoteLimited()
		c.limited = false
	}
	rep := c.adapt.CloseWindow(now, c.h.gate.Stats().ActiveCost())
	c.last = rep
	c.publishLimit()
	if rep.After != rep.Before {
		c.h.log.Debug("admission limit changed", "from", rep.Before, "to", rep.After, "rule", rep.Rule.String(),
			"utilization", rep.Utilization, "gradient", rep.Gradient, "drops", rep.Drops, "guarded", rep.Guarded)
	}
	c.dispatch(ctx)
	c.publish()
}

func (c *controller) publishLimit() {
	solo := c.adapt.Pressure() == admission.PressureNormal
	c.h.gate.SetLimit(c.adapt.Limit(), solo)
	if c.h.virt != nil {
		c.h.virt.SetLimit(c.adapt.Limit(), solo)
	}
}

// maxLaneTenants bounds laneTenants in the snapshot; laneCount is exact.
const maxLaneTenants = 100

func (c *controller) publish() { c.h.view.Store(c.buildView()) }

func (c *controller) buildView() *view {
	short, long := c.adapt.EWMAs()
	v := &view{limit: c.adapt.Limit(), short: short, long: long, util: c.adapt.Utilization(),
		pressure: c.adapt.Pressure(), recentPeak: c.adapt.RecentPeak(), baseline: c.adapt.Baseline(), last: c.last,
		virtQueuedCount: c.virtN, virtQueuedCost: c.virtCost, laneCount: len(c.lanes)}
	if c.shared != nil {
		for cl := range c.shared.count {
			v.sharedCount += c.shared.count[cl]
			v.sharedCost += c.shared.cost[cl]
		}
	}
	for _, info := range c.lanes {
		var n, cost int64
		for cl := range info.count {
			n += info.count[cl]
			cost += info.cost[cl]
		}
		v.laneQueuedCount += n
		v.laneQueuedCost += cost
		v.laneTenants = append(v.laneTenants, LaneTenant{TenantKey: info.key.String(), QueuedCount: n, QueuedCost: cost, lastUse: info.lastUse})
	}
	sort.Slice(v.laneTenants, func(i, j int) bool {
		a, b := v.laneTenants[i], v.laneTenants[j]
		if a.QueuedCost != b.QueuedCost {
			return a.QueuedCost > b.QueuedCost
		}
		return a.lastUse.After(b.lastUse)
	})
	if len(v.laneTenants) > maxLaneTenants {
		v.laneTenants = v.laneTenants[:maxLaneTenants]
	}
	return v
}
