package clusterlayer

import (
	"time"

	"github.com/omniroute/gateway/actors/credit"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
)

// The port's per-request steps: the shared credit pools a request draws
// from, spent with atomics (credit.Pool), never a message of its own.

// firstLeaseWait bounds how long a request waits for a cold pool's first
// lease (one grain call, whose own timeout is 2 s). Only a pool's first
// requests on a node wait this long; after its first answer an empty pool
// refuses at once, or after the short waits take describes.
const firstLeaseWait = 2 * time.Second

// takeWait bounds how long take waits, after a pool's first answer, for
// the grain's answers: two grain calls' time, so a call that failed (a
// grain moving to another member, an answer lost) is followed by one more.
const takeWait = 2 * firstLeaseWait

// take spends n of p's credit. A refusal carries the grain's word on when
// the budget has room for n, never a guess:
//   - a cold pool waits for its first lease;
//   - an empty pool whose grain has not said when there is room (the
//     answer that came brought credit others took, or the wait it gave
//     has passed) asks the grain and waits for its answer, rather than
//     refuse with a guess of one round trip;
//   - an empty pool whose grain said when there is room refuses at once
//     with that moment, however near. Room that appears then goes to
//     whichever node asks first (no node queues for it), as a provider's
//     own Retry-After does: the word is true when given, and waiting for
//     the unit instead only made callers wait and, when another node took
//     it, refuse with the window's next span (docs/cluster.md).
//
// All of it within takeWait: a grain that stays silent that long leaves
// the refusal with the pool's latest word.
func (l *Layer) take(p *credit.Pool, now time.Time, n int64) (uint64, bool, time.Time) {
	idx, ok, retry := p.Take(now, n)
	if !ok && p.WaitFirst(firstLeaseWait) {
		idx, ok, retry = p.Take(l.clk.Now(), n)
	}
	for deadline := time.Now().Add(takeWait); !ok && time.Until(deadline) > 0; {
		if _, said := p.Word(l.clk.Now()); said {
			break // no room before then: the refusal says so
		}
		answered := p.Ask(n, time.Until(deadline))
		idx, ok = p.TryTake(l.clk.Now(), n)
		if _, said := p.Word(l.clk.Now()); !ok && !answered && !said {
			break // the lease actor made no call: nothing more to learn
		}
	}
	if !ok {
		retry = p.RetryAt(l.clk.Now())
	}
	return idx, ok, retry
}

// takeSlot takes one of p's slots, waiting for the first lease when p is
// still cold.
func (l *Layer) takeSlot(p *credit.Pool, now time.Time) bool {
	return p.TakeSlot(now) || p.WaitFirst(firstLeaseWait) && p.TakeSlot(l.clk.Now())
}

type sharedSlot struct{ tokens, requests *credit.Pool }

// sharedTenant is a limited tenant's cluster pools and the limits they
// were made for (a changed policy makes new ones).
type sharedTenant struct {
	lim            tenantlimit.Limits
	conc, rpm, tpm *credit.Pool
	// day and month are the spend budgets, in credit.SpendUnit.
	day, month *credit.Pool
}

// pool is the *credit.Pool a Share holds in v (nil when none).
func pool(v any) *credit.Pool {
	p, _ := v.(*credit.Pool)
	return p
}

// AddSlots shares the next ledger slots' budgets with the cluster (at
// start, and the slots a reload adds).
func (l *Layer) AddSlots(slots []ledgeractor.SlotSpec) {
	for _, s := range slots {
		var sl sharedSlot
		key := "ledger/" + s.Connection + "/" + s.Model
		l.ledgerKeys.Store(key, l.ledger.Len())
		if s.Configured.Dim(rolling.Tokens) {
			sl.tokens = l.leases.Rolling(key+"/tokens", s.Configured[rolling.Tokens])
		}
		if s.Configured.Dim(rolling.Requests) {
			sl.requests = l.leases.Rolling(key+"/requests", s.Configured[rolling.Requests])
		}
		l.ledger.Append(sl)
	}
}

// TakeLedger takes a ledger reservation's share from slot's cluster pools
// (nothing when the slot is not shared). On refusal it says when to try
// again.
func (l *Layer) TakeLedger(r *Share, slot int, tokens int64, now time.Time) (bool, time.Time) {
	*r = Share{}
	sl, ok := l.ledger.Get(slot)
	if !ok {
		return true, time.Time{}
	}
	if sl.tokens != nil {
		idx, ok, retry := l.take(sl.tokens, now, tokens)
		if !ok {
			return false, retry
		}
		r.TokWin, r.Tok, r.Tokens = idx, sl.tokens, tokens
	}
	if sl.requests != nil {
		idx, ok, retry := l.take(sl.requests, now, 1)
		if !ok {
			l.Give(r, 0, 0, true)
			return false, retry
		}
		r.ReqWin, r.Req = idx, sl.requests
	}
	return true, time.Time{}
}

// Give settles what r took: actual tokens were used and cost nano-dollars
// (more than taken is charged without refusing), refund gives the request
// back too.
func (l *Layer) Give(r *Share, actual, cost int64, refund bool) {
	for i := range r.Spend {
		sp := &r.Spend[i]
		p := pool(sp.Pool)
		if p == nil {
			continue
		}
		used := p.Units(cost)
		if refund {
			used = 0
		}
		settle(p, sp.Win, sp.Units, used)
	}
	if tok := pool(r.Tok); tok != nil {
		if refund {
			actual = 0
		}
		settle(tok, r.TokWin, r.Tokens, actual)
	}
	if req := pool(r.Req); req != nil && refund {
		req.Give(r.ReqWin, 1)
	}
	if slot := pool(r.Slot); slot != nil {
		slot.GiveSlot()
	}
	*r = Share{}
}

// tenant returns e's cluster pools, creating them when the tenant is new
// or its limits changed (once per tenant and policy, not per request).
func (l *Layer) tenant(e *ikeys.Entry) *sharedTenant {
	lim := tenantlimit.LimitsOf(e.Policy)
	lim.Policy = nil
	if st := (*l.tenants.Load())[e.TenantID]; st != nil && st.lim == lim {
		return st
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := *l.tenants.Load()
	if st := m[e.TenantID]; st != nil && st.lim == lim {
		return st
	}
	key := "tenant/" + e.TenantID.String()
	st := &sharedTenant{lim: lim}
	if lim.MaxConcurrent > 0 {
		st.conc = l.leases.Slots(key+"/concurrency", lim.MaxConcurrent)
	}
	if lim.Rates.Dim(rolling.Requests) {
		st.rpm = l.leases.Rolling(key+"/requests", lim.Rates[rolling.Requests])
	}
	if lim.Rates.Dim(rolling.Tokens) {
		st.tpm = l.leases.Rolling(key+"/tokens", lim.Rates[rolling.Tokens])
	}
	if lim.DailyBudget > 0 {
		st.day = l.leases.Budget(key+"/spend/day", lim.DailyBudget, credit.PerDay, credit.SpendUnit)
	}
	if lim.MonthlyBudget > 0 {
		st.month = l.leases.Budget(key+"/spend/month", lim.MonthlyBudget, credit.PerMonth, credit.SpendUnit)
	}
	next := make(map[tenant.ID]*sharedTenant, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[e.TenantID] = st
	l.tenants.Store(&next)
	return st
}

// TakeTenant takes a tenant's request from its cluster pools: a slot, a
// request, the token estimate and the cost estimate (nano-dollars). On
// refusal it names the limit.
func (l *Layer) TakeTenant(r *Share, e *ikeys.Entry, tokens, cost int64, now time.Time) (tenantlimit.Kind, time.Time) {
	*r = Share{}
	st := l.tenant(e)
	if st.conc != nil {
		if !l.takeSlot(st.conc, now) {
			return tenantlimit.KindConcurrency, now.Add(time.Second)
		}
		r.Slot = st.conc
	}
	if st.rpm != nil {
		idx, ok, retry := l.take(st.rpm, now, 1)
		if !ok {
			l.Give(r, 0, 0, true)
			return rateKind(st.rpm, rolling.Requests, now), retry
		}
		r.ReqWin, r.Req = idx, st.rpm
	}
	if st.tpm != nil {
		idx, ok, retry := l.take(st.tpm, now, tokens)
		if !ok {
			l.Give(r, 0, 0, true)
			return rateKind(st.tpm, rolling.Tokens, now), retry
		}
		r.TokWin, r.Tok, r.Tokens = idx, st.tpm, tokens
	}
	for i, b := range [2]struct {
		p          *credit.Pool
		spent, out tenantlimit.Kind
	}{{st.day, tenantlimit.KindDailyBudget, tenantlimit.KindDailyBudgetHeld}, {st.month, tenantlimit.KindMonthlyBudget, tenantlimit.KindMonthlyBudgetHeld}} {
		if b.p == nil {
			continue
		}
		units := b.p.Units(cost)
		idx, ok, retry := l.take(b.p, now, units)
		if !ok {
			l.Give(r, 0, 0, true)
			if b.p.Spent(now) {
				// The grain has granted the whole budget for the period:
				// what is left of it sits in other nodes' pools or was
				// spent. Either way it is used up for this period.
				return b.spent, retry
			}
			// Credit is on its way, or held by requests in flight here.
			return b.out, retry
		}
		sp := &r.Spend[i]
		sp.Pool, sp.Win, sp.Units = b.p, idx, units
	}
	return tenantlimit.KindNone, time.Time{}
}

// TakeTenantRequest takes one request of a limited tenant's shared
// request windows for a call that generates nothing (the pipeline's
// chargeRequest); it is never given back.
func (l *Layer) TakeTenantRequest(e *ikeys.Entry, now time.Time) (tenantlimit.Kind, time.Time) {
	st := l.tenant(e)
	if st.rpm == nil {
		return tenantlimit.KindNone, time.Time{}
	}
	if _, ok, retry := l.take(st.rpm, now, 1); !ok {
		return rateKind(st.rpm, rolling.Requests, now), retry
	}
	return tenantlimit.KindNone, time.Time{}
}

// rateKind names the window of p that refused: the tightest one, as its
// grain last said.
func rateKind(p *credit.Pool, d rolling.Dim, now time.Time) tenantlimit.Kind {
	b, _ := p.Bucket(now)
	return tenantlimit.RateKind(d, b.Period)
}

// TenantWindows puts the cluster's view of a tenant's tightest request
// and token windows in r where it has less left than this node's own
// (the rate-limit headers in cluster mode).
func (l *Layer) TenantWindows(e *ikeys.Entry, r tenantlimit.Result) tenantlimit.Result {
	st := l.tenant(e)
	for d, p := range [rolling.NumDims]*credit.Pool{rolling.Requests: st.rpm, rolling.Tokens: st.tpm} {
		if p == nil {
			continue
		}
		if b, ok := p.Bucket(r.Now); ok {
			r.Tighter(rolling.Dim(d), b)
		}
	}
	return r
}

// settle squares what was taken from p's window win with what was used:
// the rest given back, or the excess charged without refusing.
func settle(p *credit.Pool, win uint64, taken, used int64) {
	if d := taken - used; d > 0 {
		p.Give(win, d)
	} else {
		p.Charge(win, -d)
	}
}
