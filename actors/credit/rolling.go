package credit

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

// A rolling budget's credit on a node is in two leases. Each holds what
// one grain call granted, stamped with the grant's time at the grain, and
// is spendable until CreditTTL after that call was sent (this node's
// clock): the grain counts the grant in its windows for the window's
// length plus CreditTTL from when it received the call, so whatever a
// node spends is inside the span the grain counted it in, and in any
// window the cluster spends at most the limit (plus usage above
// estimates, which is charged without refusing).
//
// The lease actor refills the lease that ends first when the credit runs
// low, renews a lease still holding credit before it ends (while requests
// use it; otherwise it gives the credit back), and gives back what a
// lease held when it ended and what requests did not use after their
// lease ended: the grain takes it out of the slot it was granted in.
// While it refills one lease, requests spend the other. For CreditTTL
// after a grant filled a window the grain says the budget is contended:
// the node then keeps no credit idle and asks only for what a refused
// request needs, so the grain's count is what was spent and the wait it
// gives a refused request is the truth for every node.

// callSeq numbers this process's rolling calls: increasing per node (a
// node is one process), whichever pool makes them.
var callSeq atomic.Uint64

// retryFor is how long a node sends a failed call again before it gives
// it up; a grain keeps a node's last call far longer (markAge).
const retryFor = 30 * time.Second

// rollLease is one lease: its word is the generation's tag and the
// credit left (packWord), so taking credit and noticing that the lease
// was replaced are one compare-and-swap.
type rollLease struct {
	word    atomic.Uint64
	expires atomic.Int64 // this node's clock, Unix ns
	at      atomic.Int64 // the grant's stamp, the grain's clock
}

// rollView is the grain's last word on its tightest window.
type rollView struct {
	limit, left int64
	period      rolling.Period
	resetAt     int64 // this node's clock, Unix ns
}

// ticket names a lease for Give: its generation and slot.
func ticket(gen uint64, slot int) uint64 { return gen<<1 | uint64(slot) }

// liveAvail is lease i's credit if it is live at now.
func (p *Pool) liveAvail(i int, now int64) int64 {
	l := &p.lease[i]
	tag, avail := unpackWord(l.word.Load())
	if tag == 0 || now >= l.expires.Load() {
		return 0
	}
	return avail
}

// liveFree is the credit of both leases that is spendable at now.
func (p *Pool) liveFree(now int64) int64 { return p.liveAvail(0, now) + p.liveAvail(1, now) }

// tryTakeRolling spends n from the lease that ends first and has enough.
func (p *Pool) tryTakeRolling(t, n int64) (uint64, bool) {
	first := 0
	if p.lease[1].expires.Load() < p.lease[0].expires.Load() {
		first = 1
	}
	for _, i := range [2]int{first, 1 - first} {
		l := &p.lease[i]
		for {
			old := l.word.Load()
			tag, avail := unpackWord(old)
			if tag == 0 || avail < n || t >= l.expires.Load() {
				break
			}
			if l.word.CompareAndSwap(old, (old&^availMask)|uint64(avail-n)) {
				if !p.demand.Load() {
					p.demand.Store(true)
				}
				if p.liveFree(t) < p.chunk.Load()/2+1 {
					p.kick()
				}
				return ticket(p.genOf(tag), i), true
			}
		}
	}
	return 0, false
}

// genOf is the generation whose tag is tag: the latest one with it, which
// is exact while fewer than tagMod leases were handed out since.
func (p *Pool) genOf(tag uint64) uint64 {
	g := p.gen.Load()
	return g - (tagOf(g)+tagMod-tag)%tagMod
}

// giveRolling returns n to the lease of ticket idx while it is live, and
// otherwise to the grain, through the lease actor's next call.
func (p *Pool) giveRolling(idx uint64, n int64) {
	gen, i := idx>>1, int(idx&1)
	l := &p.lease[i]
	now := p.l.clk.Now().UnixNano()
	for {
		old := l.word.Load()
		tag, avail := unpackWord(old)
		if tag != tagOf(gen) || now >= l.expires.Load() {
			break
		}
		if l.word.CompareAndSwap(old, packWord(gen, avail+n)) {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := &p.stamps[gen%uint64(len(p.stamps))]; s.gen == gen {
		p.addBack(s.at, n)
	}
	// An older lease's stamp is forgotten: its credit stays counted at
	// the grain until it leaves the window (the safe direction).
}

// addBack queues n for the grant stamped at; mu is held.
func (p *Pool) addBack(at, n int64) {
	if p.backs == nil {
		p.backs = map[int64]int64{}
	}
	p.backs[at] += n
}

// chargeRolling takes up to n more from the live leases without refusing.
func (p *Pool) chargeRolling(n int64) {
	now := p.l.clk.Now().UnixNano()
	for i := range p.lease {
		l := &p.lease[i]
		for n > 0 {
			old := l.word.Load()
			tag, avail := unpackWord(old)
			if tag == 0 || avail == 0 || now >= l.expires.Load() {
				break
			}
			k := min(avail, n)
			if l.word.CompareAndSwap(old, (old&^availMask)|uint64(avail-k)) {
				n -= k
			}
		}
	}
	if p.liveFree(now) < p.chunk.Load()/2+1 {
		p.kick()
	}
}

// freeze takes all of lease i's credit out (to give back or renew) and
// returns it with the lease's stamp.
func (p *Pool) freeze(i int) (at, n int64) {
	l := &p.lease[i]
	for {
		old := l.word.Load()
		tag, avail := unpackWord(old)
		if tag == 0 || avail == 0 {
			return 0, 0
		}
		if l.word.CompareAndSwap(old, old&^availMask) {
			return l.at.Load(), avail
		}
	}
}

// takeBacks removes up to maxBacks queued give-backs.
func (p *Pool) takeBacks() []messages.CreditBack {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []messages.CreditBack
	for at, n := range p.backs {
		if len(out) == messages.MaxCreditBacks {
			break
		}
		out = append(out, messages.CreditBack{At: at, N: n})
		delete(p.backs, at)
	}
	return out
}

// install makes granted, stamped at, lease i's credit until expires.
// Credit a request gave back to the lease it replaces goes to the grain.
func (p *Pool) install(i int, granted, at, expires int64) {
	gen := p.gen.Add(1)
	p.mu.Lock()
	p.stamps[gen%uint64(len(p.stamps))] = struct {
		gen uint64
		at  int64
	}{gen, at}
	p.mu.Unlock()
	l := &p.lease[i]
	oldAt := l.at.Load()
	l.at.Store(at)
	old := l.word.Swap(packWord(gen, granted))
	l.expires.Store(expires)
	if _, avail := unpackWord(old); avail > 0 && oldAt != 0 {
		p.mu.Lock()
		p.addBack(oldAt, avail)
		p.mu.Unlock()
	}
}

// RetryAt is when a request the pool refuses now should try again: when
// the grain said there is room (Word), or about one refill round trip.
func (p *Pool) RetryAt(now time.Time) time.Time {
	if at, said := p.Word(now); said {
		return at
	}
	return now.Add(refillWait)
}

// Word is the grain's last word on when the budget has room that still
// holds at now: a rolling budget's wait for what was last asked, a spent
// calendar window's end. said is false when the grain gave none (it
// granted what was asked, or the wait it gave has passed).
func (p *Pool) Word(now time.Time) (at time.Time, said bool) {
	switch {
	case p.rolling:
		if d := p.dryUntil.Load(); d > now.UnixNano() {
			return time.Unix(0, d), true
		}
	case !p.slots && p.Spent(now):
		return p.per.End(p.per.Index(now)), true
	}
	return time.Time{}, false
}

// Ask asks the grain for n for a request the pool refused (Take counted
// the refusal) and waits at most max for the answer, reporting whether one
// came: then the pool holds the grain's credit or its word on when there
// is room, and taking again may succeed. When a call is in flight already
// (a renewal, a give-back, another request's), Ask waits for the one the
// lease actor makes after it (it makes it at once, as the request's need
// is recorded). It reports false at once when the lease actor makes no
// call: the grain said the budget is full and was asked less than
// dryRetry ago, or the pool has the credit after all.
func (p *Pool) Ask(n int64, max time.Duration) bool {
	ch, before := p.sig.Load(), p.answers.Load()
	if p.rolling {
		p.demand.Store(true)
	}
	for w := p.want.Load(); n > w && !p.want.CompareAndSwap(w, n); w = p.want.Load() {
	}
	p.kick()
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		select {
		case <-*ch:
		case <-t.C:
			return false
		}
		// An answer counts before its signal; a declined refill clears
		// pending before its signal.
		if p.answers.Load() > before {
			return true
		}
		if !p.pending.Load() {
			return false
		}
		ch = p.sig.Load()
	}
}

// signal wakes the requests waiting for the pool's grain call to answer.
func (p *Pool) signal() {
	next := make(chan struct{})
	close(*p.sig.Swap(&next))
}

// Bucket is the cluster's view of a rolling budget's tightest window, as
// the grain last said it, with the credit this node holds counted as
// left: what the rate-limit headers show in cluster mode. ok is false
// before the grain's first answer.
func (p *Pool) Bucket(now time.Time) (rolling.Bucket, bool) {
	v := p.view.Load()
	if v == nil || !p.rolling {
		return rolling.Bucket{}, false
	}
	t := now.UnixNano()
	left := min(v.left+p.liveFree(t), v.limit)
	return rolling.Bucket{Period: v.period, Limit: v.limit, Used: v.limit - left, Remaining: left, Reset: time.Duration(max(v.resetAt-t, 0))}, true
}

// nextRolling starts the grain call rolling pool p needs now, if any, and
// reports whether it did.
func (a *leaseActor) nextRolling(ctx actor.Context, p *Pool, kicked bool, now time.Time, chunk int64) bool {
	t := now.UnixNano()
	// A call whose answer did not come is sent again, as it was, before
	// anything new: the grain applies it once (messages.CreditRequest's
	// Seq), so its grant is not lost and its give-backs not lost or
	// taken twice. On the next tick after it failed (retryDue), so that
	// a grain that answers Unavailable at once is not asked in a loop;
	// given up after retryFor (what it gave back then stays counted at
	// the grain until it leaves the windows: the safe direction).
	if r := p.retry; r != nil {
		switch {
		case now.Sub(r.sentAt) > retryFor:
			p.retry = nil
		case !p.retryDue:
			return false
		default:
			p.retry, p.retryDue = nil, false
			r.rep, r.err = messages.CreditReply{}, nil
			a.call(ctx, r)
			return true
		}
	}
	// What a lease held when it ended goes back to the grain.
	for i := range p.lease {
		if p.lease[i].expires.Load() <= t {
			if at, n := p.freeze(i); n > 0 {
				p.mu.Lock()
				p.addBack(at, n)
				p.mu.Unlock()
			}
		}
	}
	// The lease to refill: an empty or ended one, else the one ending
	// first. Requests spend the other meanwhile.
	i := 0
	if e0, e1 := p.lease[0].expires.Load(), p.lease[1].expires.Load(); e1 < e0 {
		i = 1
	}
	free, held := p.liveFree(t), p.liveAvail(i, t)
	want := p.want.Load()
	// A request was refused since the last acquire (or just now): credit
	// is needed now, not only used.
	needed := kicked || want > 0
	demand := p.demand.Swap(false) || needed
	contended := p.contended.Load()
	low := free < chunk/2+1 || free < want
	ask := chunk
	if contended {
		// A window is full: keep nothing idle that another node's
		// request could use; ask for what a refused request needs.
		low, ask = free == 0 || free < want, 1
	}
	// A lease past half its time that still holds credit is renewed
	// while requests use the budget, and given back otherwise (while
	// contended, once it is a tick old and unused).
	left := p.lease[i].expires.Load() - t
	renew := held > 0 && (left <= int64(CreditTTL/2) || contended && left <= int64(CreditTTL-a.interval))
	dry := p.dryUntil.Load() > t && now.Sub(time.Unix(0, p.dryAt.Load())) < dryRetry
	req := messages.CreditRequest{Op: messages.CreditRelease, Node: a.l.node}
	switch {
	case low && !dry && (needed || demand && !contended): // while contended, only for a refused request
		req.Op, req.Amount, req.Need = messages.CreditAcquire, max(ask, p.want.Swap(0)-free), max(want-free, 0)
	case renew && demand && !contended:
		req.Op = messages.CreditAcquire
	case renew && !(contended && demand): // idle: both leases' credit goes back while contended
		if contended {
			if at, n := p.freeze(1 - i); n > 0 {
				p.mu.Lock()
				p.addBack(at, n)
				p.mu.Unlock()
			}
		}
	default:
		p.mu.Lock()
		pending := len(p.backs) > 0
		p.mu.Unlock()
		if !pending {
			return false
		}
		i = -1 // only the give-backs
	}
	if i >= 0 {
		if at, n := p.freeze(i); n > 0 {
			p.mu.Lock()
			p.addBack(at, n)
			p.mu.Unlock()
			if req.Op == messages.CreditAcquire {
				req.Amount += n // renew what the lease held
			}
		}
	}
	req.Backs = p.takeBacks()
	if req.Op == messages.CreditRelease && len(req.Backs) == 0 {
		return false
	}
	req.Seq = callSeq.Add(1)
	a.call(ctx, &result{p: p, req: req, sentAt: now, lease: i})
	return true
}

// applyRolling folds a rolling grain's answer into the pool. A call that
// failed without a refusal is kept to be sent again (nextRolling); what it
// gave back cannot be spent here meanwhile, since the grain may have
// taken it already.
func (a *leaseActor) applyRolling(m *result, failed bool) {
	p, req, rep := m.p, &m.req, &m.rep
	if failed {
		if !rep.Refused && req.Seq > 0 {
			// No answer, or the grain could not make it durable: it may
			// have applied the call all the same. Send it again.
			p.retry, p.retryDue = m, false
		}
		if req.Op == messages.CreditAcquire && m.err == nil && rep.Unavailable {
			// Not known there yet, or not durable: ask again a little
			// later (keeping a later wait the grain gave before).
			p.dryAt.Store(m.sentAt.UnixNano())
			if d := m.sentAt.Add(refillWait).UnixNano(); p.dryUntil.Load() < d {
				p.dryUntil.Store(d)
			}
		}
		return
	}
	for _, k := range req.Backs {
		p.returned.Add(k.N)
	}
	now := a.l.clk.Now()
	p.contended.Store(rep.Contended)
	if rep.Limit > 0 {
		p.view.Store(&rollView{limit: rep.Limit, left: rep.Left, period: rolling.Period(min(rep.Period, uint8(rolling.NumPeriods-1))),
			resetAt: now.Add(time.Duration(rep.ResetMs) * time.Millisecond).UnixNano()})
	}
	// The grain says when what the refused request needs fits again
	// (its windows are full), or that there is room: until then this
	// node does not ask again (at most dryRetry, as others may give
	// credit back), and a request it refuses is told to wait that long.
	switch {
	case rep.WaitMs > 0:
		p.dryAt.Store(m.sentAt.UnixNano())
		p.dryUntil.Store(m.sentAt.Add(time.Duration(rep.WaitMs) * time.Millisecond).UnixNano())
	case rep.Left > 0:
		p.dryUntil.Store(0)
	}
	if req.Op != messages.CreditAcquire {
		return
	}
	if rep.Granted > 0 && m.lease >= 0 {
		p.install(m.lease, rep.Granted, rep.At, m.sentAt.Add(CreditTTL).UnixNano())
		p.granted.Add(rep.Granted)
		p.refills.Add(1)
	}
}
