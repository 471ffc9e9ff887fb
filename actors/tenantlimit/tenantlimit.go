// Package tenantlimit owns the per-tenant limits: which tenants have a
// policy, their counters, and the published view of both.
//
// The request path never waits for the actor: Reserve looks the tenant up
// in a table the actor publishes (one atomic load and a map read) and
// reserves all of the request's counters in one compare-and-swap on the
// tenant's state (internal/tenantlimit); Settle adjusts them the same way.
// Neither sends a message. The actor is the only writer of the table: it
// applies tenant sets (config-file tenants and keys from the store, each
// with its policy), keeps a tenant's counters across policy changes, seeds
// new tenants' spend from the request log, and publishes a snapshot once a
// second for health and the management API.
package tenantlimit

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
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
}

type table map[tenant.ID]*entry

// Handle is what the request path holds.
type Handle struct {
	root  *actor.RootContext
	pid   *actor.PID
	clk   clock.Clock
	table atomic.Pointer[table]
	snap  atomic.Pointer[Snapshot]
}

// Options configure Spawn.
type Options struct {
	Clock   clock.Clock
	Tenants []TenantSpec
	// PublishInterval is how often the snapshot is refreshed (default 1s).
	PublishInterval time.Duration
}

// setTenants replaces the tenant set.
type setTenants struct{ specs []TenantSpec }

type tick struct{}

// crash makes the actor panic, so tests can watch a restart.
type crash struct{}

// supervisor restarts the actor after a panic. Its state of record (the
// table and the counters) lives on the handle, so a fresh actor object
// loses nothing; a tenant set that made it panic is dropped with the
// message, and the old set stays in force. Ten failures within ten
// seconds stop it: the published table keeps serving, frozen.
var supervisor = actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)

// Spawn starts the limiter with an initial tenant set.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.PublishInterval <= 0 {
		o.PublishInterval = time.Second
	}
	h := &Handle{root: system.Root, clk: o.Clock}
	empty := table{}
	h.table.Store(&empty)
	h.apply(o.Tenants)
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

// Stop stops the actor and waits for it.
func (h *Handle) Stop() { _ = h.root.PoisonFuture(h.pid).Wait() }

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

// ApplyTenants is SetTenants that waits until the new set is in force, so
// a management operation (a key created, re-policied) answers only once
// the very next request is limited by it. It is for management paths; the
// request path never waits for the actor.
func (h *Handle) ApplyTenants(specs []TenantSpec, timeout time.Duration) error {
	_, err := h.root.RequestFuture(h.pid, &setTenants{specs: append([]TenantSpec(nil), specs...)}, timeout).Result()
	if err != nil {
		return fmt.Errorf("the tenant limiter did not take the new tenant set: %w", err)
	}
	return nil
}

// Snapshot returns the latest published view.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// apply builds and publishes the next table. Only the actor (and Spawn,
// before the actor exists) calls it.
func (h *Handle) apply(specs []TenantSpec) {
	old := *h.table.Load()
	next := make(table, len(specs))
	now := h.clk.Now()
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
		if e == nil {
			e = &entry{id: s.ID}
			e.state.Seed(now, s.DaySpent, s.MonthSpent)
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
	stop     func()
}

func (a *limiterActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.stop = repeat.Send(ctx.ActorSystem().Root, a.interval, a.interval, ctx.Self(), tick{})
	case *actor.Stopping, *actor.Restarting:
		if a.stop != nil {
			a.stop()
		}
	case *setTenants:
		a.h.apply(m.specs)
		a.h.publish()
		if ctx.Sender() != nil {
			ctx.Respond(true)
		}
	case tick:
		a.h.publish()
	case crash:
		panic("tenantlimit: crash requested by a test")
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
