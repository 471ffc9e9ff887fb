// Package tenantlimit owns the per-tenant limits: which tenants have a
// policy, their counters, and the published view of both.
//
// The request path never waits for the actor: Reserve looks the tenant up
// in a table the actor publishes (one atomic load and a map read) and
// reserves all of the request's counters in one step under the tenant's
// own lock (internal/tenantlimit); Settle adjusts them the same way.
// Neither sends a message. The actor is the only writer of the table: it
// applies tenant sets (config-file tenants and keys from the store, each
// with its policy), keeps a tenant's counters across policy changes, seeds
// new tenants' spend from the request log, and publishes a snapshot once a
// second for health and the management API.
//
// The tenant set follows the keys: the actor subscribes to the keys actor
// (actors/keys Subscribe, set up by the composition root) and takes every
// published key snapshot as a message, in order. A new tenant with a
// budget is in force at once, counting from zero; what it already spent
// today and this month is read from the store (Options.Spend) on a
// goroutine the actor owns, one read at a time, and comes back as a
// message that adds it (a goroutine, not an actor of its own: it makes
// one call and sends one answer, holds nothing to supervise; the actor
// cancels it when it stops or restarts, and Stop waits for it). A tenant that
// was limited by its rates and gets its first budget is read for too; it
// has counted its spend all along, so the read raises its counters to the
// store's figure rather than adding to them. A read covers the tenants that were new when it
// started, so the figures of an older read never land on a tenant that a
// newer snapshot added after it; those wait for the next read.
//
// Counting from zero until the read returns, rather than refusing, is on
// purpose: the operator's change is in force when the key API answers,
// and a slow database turns into a budget that may overshoot by what the
// tenant spends during the read (normally milliseconds, at most
// Options.SpendTimeout), a failed read (logged) into one that does not
// know the spend from before, never into an outage of the tenant's key.
package tenantlimit

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/messages"
)

// TenantSpec is one tenant and its policy.
type TenantSpec struct {
	ID     tenant.ID
	Name   string
	Policy tenantpolicy.Policy
	// DaySpent and MonthSpent (nano-dollars) seed a tenant the limiter
	// does not know yet with what it already spent today and this month
	// (from the store's usage), so a restart does not reset its budgets.
	DaySpent, MonthSpent int64
}

// entry is one limited tenant. Its state lives as long as the tenant stays
// in the set, whatever its policy becomes.
type entry struct {
	id     tenant.ID
	name   string
	limits atomic.Pointer[tenantlimit.Limits]
	state  tenantlimit.State
	// seedGen is the generation of the tenant set that added the tenant
	// (or gave it its first budget) while its spend is still to be read
	// (0: nothing to read). raise: the tenant was limited before, so its
	// counters hold its spend since then and the read's figure raises
	// them rather than adding to them (State.RaiseSpent). Only the actor
	// touches them.
	seedGen uint64
	raise   bool
}

type table map[tenant.ID]*entry

// Handle is what the request path holds.
type Handle struct {
	root  *actor.RootContext
	pid   *actor.PID
	clk   clock.Clock
	o     Options
	table atomic.Pointer[table]
	snap  atomic.Pointer[Snapshot]
	// gen counts the tenant sets applied; reads counts the spend reads
	// started. Only the actor touches them; they live here so that a
	// restarted actor carries on from them.
	gen, reads uint64
	// readers are the spend reads' goroutines, of every incarnation: a
	// restart cancels its read without waiting for it (a store that is
	// slow to notice would hold up the fresh actor, and with it the
	// barrier key management waits on); Stop waits for them all.
	readers sync.WaitGroup
}

// SpendFunc reads each tenant's spend (nano-dollars, by tenant id string)
// today and this month, as of at (UTC days and months).
type SpendFunc func(ctx context.Context, at time.Time) (day, month map[string]int64, err error)

// Options configure Spawn.
type Options struct {
	Clock   clock.Clock
	Tenants []TenantSpec
	// PublishInterval is how often the snapshot is refreshed (default 1s).
	PublishInterval time.Duration
	// Spend reads what tenants already spent, for tenants with a budget
	// that a key snapshot adds or gives their first budget (nil: they
	// count from zero, or from what they counted before). It runs on a
	// goroutine of the actor's, never on the actor or the keys actor.
	Spend SpendFunc
	// SpendTimeout bounds one Spend call (default 10s), in wall time
	// whatever Clock is: it bounds the store's I/O, which a test's fake
	// clock does not drive, while Clock dates the read (the day and month
	// it is for).
	SpendTimeout time.Duration
	// Log receives a spend read that failed (default: discarded).
	Log *slog.Logger
}

// setTenants replaces the tenant set.
type setTenants struct{ specs []TenantSpec }

// spendRead is a finished spend read: the figures, as of at, for the
// tenants added by tenant sets up to generation upTo.
type spendRead struct {
	seq, upTo  uint64
	at         time.Time
	day, month map[string]int64
	err        error
}

type tick struct{}

// supervisor restarts the actor after a panic. Its state of record (the
// table and the counters) lives on the handle, so a fresh actor object
// loses nothing; a tenant set that made it panic is dropped with the
// message, and the old set stays in force. Ten failures within ten
// seconds stop it: the published table keeps serving, frozen.
var supervisor = actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)

// Spawn starts the limiter with an initial tenant set.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	o.Clock = clock.Or(o.Clock)
	if o.PublishInterval <= 0 {
		o.PublishInterval = time.Second
	}
	if o.SpendTimeout <= 0 {
		o.SpendTimeout = 10 * time.Second
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	h := &Handle{root: system.Root, clk: o.Clock, o: o}
	empty := table{}
	h.table.Store(&empty)
	h.apply(o.Tenants, false)
	h.publish()
	interval := o.PublishInterval
	props := actor.PropsFromProducer(func() actor.Actor { return &limiterActor{h: h, interval: interval} }, actor.WithGuardian(supervisor))
	pid, err := system.Root.SpawnNamed(props, fmt.Sprintf("tenantlimit-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning tenant limiter: %w", err)
	}
	h.pid = pid
	return h, nil
}

// Stop stops the actor and waits for it (and for a spend read it started,
// which it cancels).
func (h *Handle) Stop() { _ = h.root.PoisonFuture(h.pid).Wait() }

// PID is the actor's address, for the composition root to subscribe it to
// the keys actor (actors/keys Handle.Subscribe): it takes every published
// *messages.Published[*internal/keys.Snapshot] as its tenant set, and answers *messages.Sync.
func (h *Handle) PID() *actor.PID { return h.pid }

// Reserve checks and reserves req against tenant id's limits at now. A
// tenant without a limiting policy is allowed with an inactive
// reservation and a result without buckets (no headers). It does not
// allocate and sends no message.
func (h *Handle) Reserve(id tenant.ID, req *tenantlimit.Request, now time.Time) (tenantlimit.Reservation, tenantlimit.Result) {
	e := (*h.table.Load())[id]
	if e == nil {
		return tenantlimit.Reservation{}, tenantlimit.Result{Allowed: true, Now: now}
	}
	return e.state.Reserve(now, e.limits.Load(), req)
}

// Settle settles r (see tenantlimit.Reservation.Settle); it does nothing
// for an inactive or already settled reservation.
func (h *Handle) Settle(r *tenantlimit.Reservation, u tenantlimit.Usage, now time.Time) {
	r.Settle(now, u)
}

// SetTenants replaces the tenant set (fire-and-forget). Tenants that stay
// keep their counters; new ones start from their seeds.
func (h *Handle) SetTenants(specs []TenantSpec) {
	h.root.Send(h.pid, &setTenants{specs: append([]TenantSpec(nil), specs...)})
}

// SpecsOf is the tenant set of a key snapshot: every active key with its
// policy, without spend.
func SpecsOf(s *keys.Snapshot) []TenantSpec {
	act := s.Active()
	out := make([]TenantSpec, 0, len(act))
	for _, e := range act {
		out = append(out, TenantSpec{ID: e.TenantID, Name: e.Name, Policy: *e.Policy})
	}
	return out
}

// HasBudget reports a policy with a daily or monthly budget: a tenant
// whose spend so far matters.
func HasBudget(p *tenantpolicy.Policy) bool { return p.DailyBudgetUSD > 0 || p.MonthlyBudgetUSD > 0 }

// Snapshot returns the latest published view.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// apply builds and publishes the next table. Only the actor (and Spawn,
// before the actor exists) calls it. A new tenant starts from its spec's
// seeds; with readLater (a key snapshot, whose specs carry none) a new
// tenant with a budget starts from zero and is left for the next spend
// read instead, and so is a tenant that stays but gets its first budget
// (limited by its rates before: it keeps what it counted meanwhile, which
// the read raises to what the store holds).
func (h *Handle) apply(specs []TenantSpec, readLater bool) {
	old := *h.table.Load()
	next := make(table, len(specs))
	now := h.clk.Now()
	h.gen++
	for i := range specs {
		s := &specs[i]
		if !s.Policy.Limited() {
			continue
		}
		lim := tenantlimit.LimitsOf(&s.Policy)
		// A tenant that stays (renamed or with a new policy) keeps its
		// entry, so its counters and the reservations pointing at them
		// carry on (its rate windows keep what they counted under the new
		// limits). name is read only by the actor.
		e := old[s.ID]
		read := readLater && h.o.Spend != nil && HasBudget(&s.Policy)
		switch {
		case e == nil:
			e = &entry{id: s.ID}
			if read {
				e.seedGen = h.gen
			} else {
				e.state.Seed(now, s.DaySpent, s.MonthSpent)
			}
		case read && e.seedGen == 0 && !HasBudget(e.limits.Load().Policy):
			e.seedGen, e.raise = h.gen, true
		}
		e.name = s.Name
		e.limits.Store(&lim)
		next[s.ID] = e
	}
	h.table.Store(&next)
}

type limiterActor struct {
	h        *Handle
	interval time.Duration
	ticks    repeat.Ticker
	// reading is the sequence number of the spend read in flight (0:
	// none); cancelRead ends it.
	reading    uint64
	cancelRead context.CancelFunc
}

func (a *limiterActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		a.ticks.Start(ctx, a.h.clk, a.interval, tick{})
		a.startRead(ctx) // a restarted actor: tenants still waiting for theirs
	case *actor.Stopping:
		a.ticks.Stop()
		a.endRead()
		a.h.readers.Wait() // this read's goroutine and those of earlier incarnations
	case *actor.Restarting:
		a.ticks.Stop()
		a.endRead()
	case *setTenants:
		a.h.apply(m.specs, false)
		a.h.publish()
	case *messages.Published[*keys.Snapshot]:
		a.h.apply(SpecsOf(m.Snapshot), true)
		a.h.publish()
		a.startRead(ctx)
	case *spendRead:
		if m.seq != a.reading {
			return // started by an incarnation before a restart
		}
		a.reading, a.cancelRead = 0, nil
		a.h.seed(m)
		a.h.publish()
		a.startRead(ctx)
	case *messages.Sync:
		ctx.Respond(m)
	case tick:
		a.h.publish()
	}
}

// startRead starts a spend read for the tenants waiting for theirs, unless
// one is in flight (its answer starts the next). The read runs on its own
// goroutine and comes back as a spendRead message.
func (a *limiterActor) startRead(ctx actor.Context) {
	h := a.h
	if a.reading != 0 || h.o.Spend == nil || !h.waitingSeeds(h.gen) {
		return
	}
	h.reads++
	seq, upTo, at := h.reads, h.gen, h.clk.Now()
	rctx, cancel := context.WithTimeout(context.Background(), h.o.SpendTimeout)
	a.reading, a.cancelRead = seq, cancel
	root, self, spend := ctx.ActorSystem().Root, ctx.Self(), h.o.Spend
	h.readers.Add(1)
	go func() {
		defer h.readers.Done()
		defer cancel()
		day, month, err := spend(rctx, at)
		root.Send(self, &spendRead{seq: seq, upTo: upTo, at: at, day: day, month: month, err: err})
	}()
}

// endRead cancels the read in flight; its answer, if it still sends one,
// is dropped (its sequence number is no longer the one read), and the
// tenants it was for stay waiting, for the next incarnation's read.
func (a *limiterActor) endRead() {
	if a.cancelRead != nil {
		a.cancelRead()
	}
	a.reading, a.cancelRead = 0, nil
}

// waitingSeeds reports a tenant, added by a set up to generation upTo,
// still waiting for its spend.
func (h *Handle) waitingSeeds(upTo uint64) bool {
	for _, e := range *h.table.Load() {
		if e.seedGen != 0 && e.seedGen <= upTo {
			return true
		}
	}
	return false
}

// seed adds a finished read's figures to the tenants it was for: those
// added (or given a budget) up to its generation and still waiting; a
// tenant that was limited before its budget has its counters raised to
// them instead. A tenant added after the read started waits for the next
// one. A read that failed leaves them counting what this gateway settled
// since it took them (from zero for a new tenant); the new policy is in
// force either way.
func (h *Handle) seed(r *spendRead) {
	n := 0
	for _, e := range *h.table.Load() {
		if e.seedGen == 0 || e.seedGen > r.upTo {
			continue
		}
		raise := e.raise
		e.seedGen, e.raise = 0, false
		n++
		if r.err != nil {
			continue
		}
		id := e.id.String()
		if raise {
			e.state.RaiseSpent(r.at, r.day[id], r.month[id])
		} else {
			e.state.AddSpent(r.at, r.day[id], r.month[id])
		}
	}
	if r.err != nil {
		h.o.Log.Warn("reading what tenants spent today and this month failed; their budgets count only the spend this gateway settled, not what the store holds from before", "tenants", n, "err", r.err)
	}
}

// TenantView is one limited tenant as published.
type TenantView struct {
	ID       string               `json:"id"`
	Name     string               `json:"name"`
	Policy   *tenantpolicy.Policy `json:"policy"`
	InFlight int64                `json:"inFlight"`
	// Requests and Tokens are the tightest request and token windows, as
	// the rate-limit headers show them (nil when unlimited); Windows are
	// all of them.
	Requests *BucketView  `json:"requests,omitempty"`
	Tokens   *BucketView  `json:"tokens,omitempty"`
	Windows  []WindowView `json:"windows"`
	// Spend in US dollars: settled and held by requests in flight.
	DaySpentUSD   float64           `json:"daySpentUsd"`
	DayHeldUSD    float64           `json:"dayHeldUsd"`
	MonthSpentUSD float64           `json:"monthSpentUsd"`
	MonthHeldUSD  float64           `json:"monthHeldUsd"`
	Admitted      uint64            `json:"admitted"`
	Settled       uint64            `json:"settled"`
	SettledTokens int64             `json:"settledTokens"`
	SettledUSD    float64           `json:"settledUsd"`
	Refused       map[string]uint64 `json:"refused"`
}

// BucketView is a rolling window: its limit, what is left, and how long
// until everything it counted has left it.
type BucketView struct {
	Period    string `json:"period"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	ResetMs   int64  `json:"resetMs"`
}

// WindowView is one rate window with what it counts now.
type WindowView struct {
	Dimension string `json:"dimension"`
	Used      int64  `json:"used"`
	BucketView
}

// Snapshot is the limiter's published view, tenants sorted by name.
type Snapshot struct {
	At      time.Time    `json:"at"`
	Tenants []TenantView `json:"tenants"`
}

// Tenant returns the view of tenant id, if it is limited.
func (s *Snapshot) Tenant(id tenant.ID) (TenantView, bool) {
	for _, t := range s.Tenants {
		if t.ID == id.String() {
			return t, true
		}
	}
	return TenantView{}, false
}

func bucketView(b tenantlimit.Bucket) *BucketView {
	if b.Limit == 0 {
		return nil
	}
	return &BucketView{Period: b.Period.String(), Limit: b.Limit, Remaining: b.Remaining, ResetMs: b.Reset.Milliseconds()}
}

func (h *Handle) publish() {
	now := h.clk.Now()
	t := *h.table.Load()
	s := &Snapshot{At: now, Tenants: make([]TenantView, 0, len(t))}
	for _, e := range t {
		lim := e.limits.Load()
		v := e.state.View(now, lim)
		tv := TenantView{ID: e.id.String(), Name: e.name, Policy: lim.Policy, InFlight: v.InFlight,
			Requests: bucketView(v.Requests), Tokens: bucketView(v.Tokens),
			DaySpentUSD: pricing.USD(v.DaySpent), DayHeldUSD: pricing.USD(v.DayHeld),
			MonthSpentUSD: pricing.USD(v.MonthSpent), MonthHeldUSD: pricing.USD(v.MonthHeld),
			Admitted: v.Admitted, Settled: v.Settled, SettledTokens: v.SettledTokens, SettledUSD: pricing.USD(v.SettledCostNano),
			Refused: map[string]uint64{}, Windows: make([]WindowView, 0, len(v.Windows))}
		for _, w := range v.Windows {
			tv.Windows = append(tv.Windows, WindowView{Dimension: w.Dim.String(), Used: w.Used, BucketView: *bucketView(w.Bucket)})
		}
		for _, k := range tenantlimit.Kinds() {
			tv.Refused[k.String()] = v.Refused[k]
		}
		s.Tenants = append(s.Tenants, tv)
	}
	sort.Slice(s.Tenants, func(i, j int) bool { return s.Tenants[i].Name < s.Tenants[j].Name })
	h.snap.Store(s)
}
