// Package credit shares budgets across the gateway's cluster without a
// cross-node call on the request path: each protected budget is a grain
// (a virtual actor placed on one member by rendezvous hashing) that hands
// out chunks of credit, and each node keeps what it was handed in a Pool
// the request path spends with atomics. See docs/cluster.md.
//
// Two kinds of budget:
//
//   - rolling budgets (a provider's requests or tokens per minute, hour
//     and day for one connection and upstream model, a tenant's): the
//     grain counts what it grants in rolling windows (internal/rolling),
//     each grant for its window and CreditTTL more, and a node spends a
//     grant only within CreditTTL of asking for it, so no window ever sees
//     more than the limit spent across the cluster; the grain writes its
//     windows to the Store (etcd) before it answers, so a grain
//     re-activated on another member after its member died continues from
//     them;
//   - calendar budgets (a tenant's spend per UTC day and month): the grain
//     grants credit of one window; the total granted in a window never
//     exceeds the limit, persisted the same way;
//   - slot budgets (a tenant's concurrency cap): the grain leases slots to
//     nodes for LeaseTTL, renewed every RenewInterval; the sum leased to
//     live nodes never exceeds the cap. Nothing is persisted: a fresh grain
//     spends one LeaseTTL taking the holders' renewals as its table before
//     it grants again, because the holders are the only ones who know what
//     is in use, and a holder that cannot renew gives its slots up on its
//     own clock before the grain reclaims them.
package credit

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

// Requester is the grain call: protoactor's Cluster.Request.
type Requester interface {
	Request(identity, kind string, message any, opts ...pcluster.GrainCallOption) (any, error)
}

// Leases is this node's side of every shared budget: the pools the
// request path spends from and the actor that keeps them filled.
type Leases struct {
	root *actor.RootContext
	pid  *actor.PID
	c    Requester
	node string
	clk  clock.Clock

	mu    sync.Mutex // guards byID; pools is published copy-on-write
	byID  map[string]*Pool
	pools atomic.Pointer[[]*Pool]

	// calls counts grain calls, for the snapshot and the refill-rate
	// figures.
	calls, failures atomic.Int64
	stopped         atomic.Bool
	budgets         *Budgets
}

// Options configure Start.
type Options struct {
	// Node names this node to the grains (the cluster member id).
	Node  string
	Clock clock.Clock
	// Interval is the renewal tick (default RenewInterval).
	Interval time.Duration
	// Budgets is what the grains this node hosts read their budgets
	// from (NewKind's); the node's front end sets its lookup.
	Budgets *Budgets
}

type refill struct{ p *Pool }

type tick struct{}

// result is a grain call's outcome, back on the lease actor.
type result struct {
	p      *Pool
	req    messages.CreditRequest
	sentAt time.Time
	rep    messages.CreditReply
	err    error
	// lease is the rolling lease the call refills.
	lease int
}

// strategy restarts the lease actor from a fresh object: the pools and
// their credit live on the handle, and a call in flight when it failed
// still delivers its result to the fresh object.
var strategy = supervise.Restart("credit-leases")

// Start spawns the lease actor for this node.
func Start(system *actor.ActorSystem, c Requester, o Options) (*Leases, error) {
	o.Clock = clock.Or(o.Clock)
	if o.Interval <= 0 {
		o.Interval = RenewInterval
	}
	if o.Budgets == nil {
		o.Budgets = &Budgets{}
	}
	l := &Leases{root: system.Root, c: c, node: o.Node, clk: o.Clock, byID: map[string]*Pool{}, budgets: o.Budgets}
	empty := []*Pool{}
	l.pools.Store(&empty)
	interval := o.Interval
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &leaseActor{l: l, interval: interval} },
		actor.WithGuardian(strategy)), fmt.Sprintf("credit-leases-%p", l))
	if err != nil {
		return nil, fmt.Errorf("spawning the credit lease actor: %w", err)
	}
	l.pid = pid
	return l, nil
}

// WindowChunks is how many refills a window budget is split into: a
// refill asks for limit/WindowChunks (at least 1).
const WindowChunks = 32

// dryRetry is how often a node whose window budget the grain said was
// spent asks again while it refuses requests.
const dryRetry = time.Second

// SlotChunks is the same for a concurrency cap (at least one slot).
const SlotChunks = 10

// Budgets is what this node's grains read their budgets from: the front
// end sets its lookup (Budgets.Set).
func (l *Leases) Budgets() *Budgets { return l.budgets }

// Rolling returns the pool of rolling budget key ("r/" + key at the
// grain) with limits windows (by period; the grain reads its own from its
// node's configuration, Budgets), creating it on first use and starting
// its first refill at once. Chunks are a WindowChunks-th of the smallest
// window; a changed limit applies from the next refill.
func (l *Leases) Rolling(key string, windows [rolling.NumPeriods]int64) *Pool {
	var limit int64
	for _, v := range windows {
		if v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	return l.pool(rollingPrefix+key, func(p *Pool) { p.rolling = true }, limit, min(max((limit+WindowChunks-1)/WindowChunks, 1), availMask/8))
}

// Window is a calendar budget of one epoch-aligned minute (tests of the
// calendar grain; rates are Rolling budgets).
func (l *Leases) Window(key string, limit int64) *Pool { return l.Budget(key, limit, PerMinute, 1) }

// Budget returns the pool of calendar budget key ("w/" + key at the
// grain) of limit per window of per (a UTC day or month), credit counted
// in units of unit (spend, in nano-dollars, uses SpendUnit). limit is in
// the caller's amounts; the grain and the snapshot see units. A key names
// one budget of one period and unit for ever: the grain's record is that
// period's window index and a count of units.
func (l *Leases) Budget(key string, limit int64, per Period, unit int64) *Pool {
	unit = max(unit, 1)
	limit /= unit
	// A chunk is at most an eighth of what a pool's credit word holds, so
	// a pool always has room for the few chunks it keeps.
	p := l.pool(windowPrefix+key, func(p *Pool) { p.per = per }, limit, min(max((limit+WindowChunks-1)/WindowChunks, 1), availMask/8))
	p.unit.Store(unit)
	return p
}

// SpendUnit is the unit of a spend budget's credit: a micro-dollar (1000
// nano-dollars). A request is charged its cost rounded up to it, so the
// cluster pools never under-count, and a billion-dollar budget (the
// policy's maximum) still fits a pool's credit word.
const SpendUnit = 1000

// Slots returns the pool of concurrency cap key ("s/" + key) of limit
// slots.
func (l *Leases) Slots(key string, limit int64) *Pool {
	return l.pool(slotsPrefix+key, func(p *Pool) { p.slots = true }, limit, max(limit/SlotChunks, 1))
}

// pool returns pool id, creating it on first use (kind sets what kind of
// budget it is), with limit and chunk, and kicks a refill.
func (l *Leases) pool(id string, kind func(*Pool), limit, chunk int64) *Pool {
	l.mu.Lock()
	p := l.byID[id]
	if p == nil {
		p = &Pool{l: l, id: id, answered: make(chan struct{})}
		ch := make(chan struct{})
		p.sig.Store(&ch)
		kind(p)
		l.byID[id] = p
		next := append(append([]*Pool(nil), *l.pools.Load()...), p)
		l.pools.Store(&next)
	}
	l.mu.Unlock()
	p.limit.Store(limit)
	p.chunk.Store(chunk)
	p.kick()
	return p
}

// Stop gives back what this node holds (best effort, so the others can
// use it at once rather than after the leases expire) and stops the actor.
func (l *Leases) Stop() {
	if !l.stopped.CompareAndSwap(false, true) {
		return
	}
	_ = l.root.PoisonFuture(l.pid).Wait()
	now := l.clk.Now()
	var wg sync.WaitGroup
	for _, p := range *l.pools.Load() {
		if p.rolling {
			backs := p.takeBacks()
			for i := range p.lease {
				if at, n := p.freeze(i); n > 0 {
					backs = append(backs, messages.CreditBack{At: at, N: n})
				}
			}
			if len(backs) > 0 {
				wg.Add(1)
				go func(p *Pool, backs []messages.CreditBack) {
					defer wg.Done()
					l.giveBack(p, &messages.CreditRequest{Op: messages.CreditRelease, Node: l.node, Backs: backs[:min(len(backs), messages.MaxCreditBacks)]})
				}(p, backs)
			}
			continue
		}
		idx := p.per.Index(now)
		var n int64
		if p.slots {
			n = max(p.avail.Swap(0), 0)
			p.expires.Store(0)
		} else {
			n = p.takeExcess(idx, 0)
		}
		if n == 0 {
			continue
		}
		wg.Add(1)
		go func(p *Pool, n int64) {
			defer wg.Done()
			l.giveBack(p, &messages.CreditRequest{Op: messages.CreditRelease, Node: l.node, Window: idx, Amount: n})
		}(p, n)
	}
	wg.Wait()
}

// giveBack makes Stop's release call to p's grain, waiting a second at
// most: the grain's lease expiry takes back whatever this misses.
func (l *Leases) giveBack(p *Pool, req *messages.CreditRequest) {
	if v, err := encodeRequest(req); err == nil {
		_, _ = l.c.Request(p.id, KindName, v, pcluster.WithTimeout(time.Second), pcluster.WithRetryCount(1))
	}
}

// PoolView is one pool as health shows it.
type PoolView struct {
	ID       string `json:"id"`
	Period   string `json:"period,omitempty"` // a budget's: rolling (rates), day or month (spend)
	Unit     int64  `json:"unit,omitempty"`   // what one unit of limit, chunk and free is, when not 1
	Limit    int64  `json:"limit"`
	Chunk    int64  `json:"chunk"`
	Held     int64  `json:"held,omitempty"`
	Free     int64  `json:"free"`
	Granted  int64  `json:"granted,omitempty"`
	Returned int64  `json:"returned,omitempty"`
	Refused  int64  `json:"refused"`
	Refills  int64  `json:"refills"`
	Expired  bool   `json:"leaseExpired,omitempty"`
	// Window is a rolling budget's tightest window across the cluster, as
	// its grain last said (with this node's unspent credit counted as
	// left).
	Window *WindowView `json:"window,omitempty"`
}

// WindowView is a rolling budget's tightest window.
type WindowView struct {
	Period    string `json:"period"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	ResetMs   int64  `json:"resetMs"`
}

// Snapshot is the node's pools, sorted by id.
type Snapshot struct {
	Calls    int64 `json:"grainCalls"`
	Failures int64 `json:"grainCallFailures"`
	// Refused counts the grain calls and answers this node could not
	// read (clusterwire: malformed, or from a member of another release).
	Refused int64      `json:"grainMessagesRefused"`
	Pools   []PoolView `json:"pools"`
}

// Snapshot reads the pools (atomics only; no message).
func (l *Leases) Snapshot() Snapshot {
	now := l.clk.Now()
	s := Snapshot{Calls: l.calls.Load(), Failures: l.failures.Load(), Refused: l.budgets.Refused()}
	for _, p := range *l.pools.Load() {
		v := PoolView{ID: p.id, Limit: p.limit.Load(), Chunk: p.chunk.Load(), Refused: p.refused.Load(), Refills: p.refills.Load(),
			Granted: p.granted.Load(), Returned: p.returned.Load()}
		switch {
		case p.rolling:
			v.Period, v.Free = "rolling", p.liveFree(now.UnixNano())
			if b, ok := p.Bucket(now); ok {
				v.Window = &WindowView{Period: b.Period.String(), Limit: b.Limit, Remaining: b.Remaining, ResetMs: b.Reset.Milliseconds()}
			}
		case p.slots:
			v.Held, v.Free = p.held.Load(), p.avail.Load()
			v.Expired = now.UnixNano() >= p.expires.Load()
		default:
			v.Period, v.Free = p.per.String(), p.available(p.per.Index(now))
			if u := p.unit.Load(); u > 1 {
				v.Unit = u
			}
		}
		s.Pools = append(s.Pools, v)
	}
	sort.Slice(s.Pools, func(i, j int) bool { return s.Pools[i].ID < s.Pools[j].ID })
	return s
}

// leaseActor keeps the pools filled: one grain call per pool at a time,
// made on a goroutine of its own (a grain call blocks for a network round
// trip, and the actor must keep taking kicks), its result handled here.
type leaseActor struct {
	l        *Leases
	interval time.Duration
	ticks    repeat.Ticker
}

func (a *leaseActor) Receive(ctx actor.Context) {
	// Wall-clock ticks, the one actor left on them: its tests run three
	// nodes on one fake clock and look at the instant after a jump, before
	// a tick has refilled or renewed at the new time.
	if a.ticks.Lifecycle(ctx, clock.Real{}, a.interval, tick{}) {
		return
	}
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *refill:
		// pending is already set by the kick.
		if !a.next(ctx, m.p, true) {
			m.p.pending.Store(false)
			m.p.signal() // a request waiting for a call that will not be made
		}
	case tick:
		for _, p := range *a.l.pools.Load() {
			p.retryDue = p.retry != nil // a failed call goes again now
			if p.pending.CompareAndSwap(false, true) && !a.next(ctx, p, false) {
				p.pending.Store(false)
			}
		}
	case *result:
		a.apply(m)
		m.p.pending.Store(false)
		// A rolling pool's next call goes out at once when it needs one
		// (a request refused while this call was in flight kicked
		// nothing), so a request waiting in Ask gets its answer.
		if m.p.rolling && m.p.pending.CompareAndSwap(false, true) && !a.next(ctx, m.p, false) {
			m.p.pending.Store(false)
		}
		m.p.signal()
	}
}

// next starts the grain call pool p needs now, if any, and reports
// whether it did. kicked is set when the request path asked for credit.
func (a *leaseActor) next(ctx actor.Context, p *Pool, kicked bool) bool {
	now := a.l.clk.Now()
	limit, chunk := p.limit.Load(), p.chunk.Load()
	if limit <= 0 {
		return false
	}
	if p.rolling {
		return a.nextRolling(ctx, p, kicked, now, chunk)
	}
	req := messages.CreditRequest{Node: a.l.node}
	if p.slots {
		req.Window = uint64(max(p.held.Load(), 0)) // what this node holds, for a grain rebuilding
		free := p.avail.Load()
		// While the grain refuses some node slots, a holder keeps none
		// idle and asks for more only when a request of its own was
		// refused. Otherwise a node keeps up to two chunks idle, and with
		// a small cap (a chunk is one slot below 20) the idle slots of
		// the others could be most of it.
		contended := p.contended.Load()
		switch {
		case free < chunk && (!contended || p.wantSlot.Load()):
			p.wantSlot.Store(false)
			req.Op, req.Amount = messages.CreditAcquire, chunk
		case free > 2*chunk || contended && free > 0 && !kicked:
			// Give back what is idle beyond one chunk (all of it when
			// contended), so other nodes can use it. The slots leave the
			// pool before the call.
			n := free - chunk
			if contended {
				n = free
			}
			if !p.avail.CompareAndSwap(free, free-n) {
				return false
			}
			req.Op, req.Amount = messages.CreditRelease, n
		case now.UnixNano() >= p.expires.Load()-int64(LeaseTTL)+int64(a.interval):
			req.Op, req.Amount = messages.CreditRenew, p.held.Load()
		default:
			return false
		}
	} else {
		idx := p.per.Index(now)
		req.Window = idx
		free := p.available(idx)
		end := p.per.End(idx)
		low := free < chunk/2+1 || free < p.want.Load()
		switch {
		case free > 3*chunk && !low && !kicked:
			// Give back what is idle beyond one chunk, so other nodes can
			// use it (a spent window's holder too: they need it most).
			n := p.takeExcess(idx, chunk)
			if n == 0 {
				return false
			}
			req.Op, req.Amount = messages.CreditRelease, n
		case p.dry.Load() == idx+1:
			// The grain said this window is spent; near its end, fetch
			// the next window's first chunk so the window turns over
			// without refusals.
			if end.Sub(now) <= 2*a.interval && p.available(idx+1) == 0 {
				req.Window, req.Op, req.Amount = idx+1, messages.CreditAcquire, chunk
				break
			}
			// Other nodes give credit back (what a request did not use,
			// what sits idle): a node refusing requests asks again, at
			// most once per dryRetry, so a day's or a month's budget is
			// not lost to this node for the rest of its window.
			if !low || !kicked || now.Sub(time.Unix(0, p.dryAt.Load())) < dryRetry {
				return false
			}
			req.Op, req.Amount = messages.CreditAcquire, max(chunk, p.want.Swap(0)-free)
		case low:
			req.Op, req.Amount = messages.CreditAcquire, max(chunk, p.want.Swap(0)-free)
		case end.Sub(now) <= 2*a.interval && p.available(idx+1) == 0:
			req.Window, req.Op, req.Amount = idx+1, messages.CreditAcquire, chunk
		default:
			return false
		}
	}
	a.call(ctx, &result{p: p, req: req, sentAt: now})
	return true
}

// call makes res's grain call on a goroutine of its own and hands the
// answer back to the actor.
func (a *leaseActor) call(ctx actor.Context, res *result) {
	a.l.calls.Add(1)
	root, self, c, p, req := ctx.ActorSystem().Root, ctx.Self(), a.l.c, res.p, res.req
	budgets, log := a.l.budgets, ctx.Logger()
	go func() {
		v, err := encodeRequest(&req)
		if err == nil {
			var rep any
			if rep, err = c.Request(p.id, KindName, v); err == nil {
				if res.rep, err = decodeReply(rep); err != nil {
					budgets.refused(log, "credit lease actor", fmt.Errorf("grain %s: %w", p.id, err))
				}
			}
		}
		res.err = err
		root.Send(self, res)
	}()
}

// apply folds a grain's answer into the pool.
func (a *leaseActor) apply(m *result) {
	p, req, rep := m.p, &m.req, &m.rep
	defer p.markAnswered()
	failed := m.err != nil || rep.Unavailable || rep.Refused
	if failed {
		a.l.failures.Add(1)
	}
	if p.rolling {
		a.applyRolling(m, failed)
		return
	}
	if p.slots {
		if failed {
			if req.Op == messages.CreditRelease {
				// The slots left the pool; the grain will reclaim them
				// when the lease expires if it never heard.
				return
			}
			return // no renewal: the lease runs out on its own (fail closed)
		}
		old := p.held.Swap(rep.Granted)
		p.avail.Add(rep.Granted - old + func() int64 {
			if req.Op == messages.CreditRelease {
				return req.Amount // already taken out of avail before the call
			}
			return 0
		}())
		p.expires.Store(m.sentAt.Add(LeaseTTL).UnixNano())
		p.contended.Store(rep.Contended)
		if req.Op == messages.CreditAcquire {
			p.refills.Add(1)
		}
		if req.Op == messages.CreditRenew {
			p.renewals.Add(1)
		}
		return
	}
	switch req.Op {
	case messages.CreditAcquire:
		if failed {
			return
		}
		if rep.Granted > 0 {
			p.addWindow(req.Window, rep.Granted)
			p.granted.Add(rep.Granted)
			p.refills.Add(1)
		}
		if rep.Granted < req.Amount && rep.Left == 0 {
			p.dryAt.Store(m.sentAt.UnixNano())
			p.dry.Store(req.Window + 1)
		} else if rep.Granted > 0 {
			p.dry.CompareAndSwap(req.Window+1, 0) // credit came back
		}
	case messages.CreditRelease:
		if failed {
			p.addWindow(req.Window, req.Amount) // keep it: the grain still counts it as ours
			return
		}
		p.returned.Add(req.Amount)
	}
}
