package credit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

// KindName is the grain kind every member hosts.
const KindName = "omniroute-credit"

// LeaseTTL is how long a node's slot lease lasts at the grain after its
// last renewal. A node renews every RenewInterval and treats its own lease
// as expired LeaseTTL after it *sent* the last renewal that was answered,
// so the node always gives up before the grain reclaims.
const LeaseTTL = 3 * time.Second

// RenewInterval is how often a node renews its slot leases and tops up,
// renews or returns window credit.
const RenewInterval = 500 * time.Millisecond

// CreditTTL is how long a node may spend rolling credit: until CreditTTL
// after it *sent* the call that brought it. The grain counts every grant
// in its windows for CreditTTL longer than the window (from when it
// *received* the call), so credit is always spent inside the span the
// grain counted it in, and the cluster never spends more than the limit
// in any window. A node renews credit it still holds before then.
const CreditTTL = 2 * time.Second

// Identities: "r/<key>" is a rolling budget (credit counted in rolling
// windows, persisted), "w/<key>" a calendar budget (credit per UTC day or
// month, persisted), "s/<key>" a concurrency cap (slots leased per node,
// rebuilt from the holders' renewals).
const (
	rollingPrefix = "r/"
	windowPrefix  = "w/"
	slotsPrefix   = "s/"
)

// Budget is what a grain's budget is, as its own node configures it.
type Budget struct {
	// Windows are a rolling budget's limits by period (0: none).
	Windows [rolling.NumPeriods]int64
	// Limit is a calendar budget's limit per Period window (in units), or
	// a concurrency cap's slots.
	Limit  int64
	Period Period
}

// Budgets tells the grains this node hosts what their budgets are, from
// this node's own configuration and keys (every member reads the same
// config file and key store), never from the messages: a peer can ask for
// credit but not set a limit. The composition root sets the lookup once
// it can answer (transport/gateway/clusterlayer.Start); until then, and for a key
// the node does not know, a grain answers unavailable and the asking
// node tries again.
type Budgets struct {
	lookup   atomic.Pointer[func(key string) (Budget, bool)]
	refusals clusterwire.Refusals
}

// Set installs the lookup.
func (b *Budgets) Set(f func(key string) (Budget, bool)) { b.lookup.Store(&f) }

// Lookup is the budget of key, if this node knows it.
func (b *Budgets) Lookup(key string) (Budget, bool) {
	if b == nil {
		return Budget{}, false
	}
	f := b.lookup.Load()
	if f == nil {
		return Budget{}, false
	}
	return (*f)(key)
}

// grainStrategy restarts a grain that panicked from a fresh object; a
// fresh budget grain reloads its record and a fresh slots grain rebuilds
// from renewals, exactly as after a re-homing.
var grainStrategy = supervise.Restart("credit-grain")

// NewKind is the credit grain kind, keeping budget records in store,
// reading time from clk and budgets from budgets.
func NewKind(store Store, clk clock.Clock, budgets *Budgets) *pcluster.Kind {
	clk = clock.Or(clk)
	return pcluster.NewKind(KindName, grainProps(store, clk, budgets))
}

// grainProps builds grains without protoactor's cluster middleware, which
// NewKind adds; the unit tests host grains on a plain actor system.
func grainProps(store Store, clk clock.Clock, budgets *Budgets) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &grain{store: store, clk: clk, budgets: budgets} }, actor.WithSupervisor(grainStrategy))
}

type holder struct {
	held    int64
	expires time.Time
}

// grain is one shared budget. Only its own Receive touches its fields.
type grain struct {
	store   Store
	clk     clock.Clock
	budgets *Budgets
	id      string
	key     string // id without its prefix: what Budgets knows
	kind    string // its prefix

	// calendar and rolling
	loaded bool
	// version is the store's version of the record this grain last read
	// or wrote: its next write succeeds only over it.
	version int64
	window  uint64
	granted int64
	rolls   *rolling.Windows
	// calls is each node's last rolling call applied (by node), kept in
	// the record with the windows it changed.
	calls map[string]CallMark
	// fullAt is when a rolling window last filled.
	fullAt time.Time

	// slots mode
	holders      map[string]*holder
	recoverUntil time.Time
	// contendedUntil is LeaseTTL after the grain last refused a node
	// slots: until then every answer tells holders to keep none idle.
	contendedUntil time.Time
}

func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *pcluster.ClusterInit:
		g.id = m.Identity.Identity
		g.kind, g.key = g.id[:min(2, len(g.id))], g.id[min(2, len(g.id)):]
		if g.kind == slotsPrefix {
			// A fresh slots grain knows no holder. For one lease TTL it
			// grants nothing and takes the holders' renewals as the truth;
			// a node that does not renew by then has given its slots up
			// on its own (its lease expired on its side first). The very
			// first activation of a cap (no marker in the store) has no
			// holders to wait for and grants at once.
			g.holders = map[string]*holder{}
			if _, err := g.load(); err != nil || g.version != 0 {
				g.recoverUntil = g.clk.Now().Add(LeaseTTL)
			} else if g.save(Record{}) != nil {
				g.recoverUntil = g.clk.Now().Add(LeaseTTL)
			}
		}
	case *wrapperspb.BytesValue:
		req, err := decodeRequest(m)
		if err != nil {
			g.budgets.refused(ctx.Logger(), "credit grain", err)
			ctx.Respond(encodeReply(&messages.CreditReply{Refused: true}))
			return
		}
		b, known := g.budgets.Lookup(g.key)
		var rep messages.CreditReply
		switch {
		case !known:
			rep = messages.CreditReply{Unavailable: true}
		case g.kind == slotsPrefix:
			rep = g.slotsOp(req, b.Limit)
		case g.kind == rollingPrefix:
			rep = g.durable(func() (messages.CreditReply, error) { return g.rollingOp(req, b) })
		case g.kind == windowPrefix:
			rep = g.durable(func() (messages.CreditReply, error) { return g.windowOp(req, b) })
		default:
			rep = messages.CreditReply{Unavailable: true}
		}
		ctx.Respond(encodeReply(&rep))
	}
}

// windowOp serves a calendar budget (a UTC day's or month's spend). The
// total granted in a window never exceeds the limit the grain's own node
// configures, and it is written to the store before the answer leaves, so
// a re-activated grain continues from it. The window is the grain's: a
// request naming one other than the grain's current window, the one
// before or the one after (a node's clock a little off near the turn of a
// day) is refused.
func (g *grain) windowOp(r *messages.CreditRequest, b Budget) (messages.CreditReply, error) {
	if !g.loaded {
		rec, err := g.load()
		if err != nil {
			return messages.CreditReply{Unavailable: true}, nil
		}
		if g.version != 0 && rec.Rings == nil {
			g.window, g.granted = rec.Window, rec.Granted
		}
		g.loaded = true
	}
	now := b.Period.Index(g.clk.Now())
	if r.Window+1 < now || r.Window > now+1 {
		return messages.CreditReply{Refused: true}, nil
	}
	if r.Window > g.window {
		g.window, g.granted = r.Window, 0
	}
	left := max(b.Limit-g.granted, 0)
	if r.Window < g.window { // a node whose clock lags: nothing for a past window
		return messages.CreditReply{Left: left}, nil
	}
	switch r.Op {
	case messages.CreditAcquire:
		n := min(max(r.Amount, 0), left)
		if n == 0 {
			return messages.CreditReply{Left: left}, nil
		}
		if err := g.save(Record{Window: g.window, Granted: g.granted + n}); err != nil {
			return messages.CreditReply{Unavailable: true, Left: left}, err
		}
		g.granted += n
		return messages.CreditReply{Granted: n, Left: left - n}, nil
	case messages.CreditRelease:
		n := min(max(r.Amount, 0), g.granted)
		if n > 0 {
			if err := g.save(Record{Window: g.window, Granted: g.granted - n}); err != nil {
				return messages.CreditReply{Left: left}, err
			}
			g.granted -= n
		}
		return messages.CreditReply{Left: max(b.Limit-g.granted, 0)}, nil
	}
	return messages.CreditReply{Left: left}, nil
}

// rollingOp serves a rolling budget: it takes back what the node gives
// back (credit it did not spend, counted where it was granted), then
// grants up to what was asked where every window has room, counting the
// grant for its window and CreditTTL more. The new state is written to
// the store before the answer leaves. A give-back naming a grant from the
// future (beyond one slot of the grain's clock) is refused.
//
// For CreditTTL after a window filled (contended), holders keep no credit
// idle and ask only for what their requests need, so what the grain
// counts is what was spent, and a wait it gives is the truth for every
// node.
func (g *grain) rollingOp(r *messages.CreditRequest, b Budget) (messages.CreditReply, error) {
	var lim rolling.Limits
	lim[rolling.Requests] = b.Windows
	if !lim.Any() {
		return messages.CreditReply{Unavailable: true}, nil
	}
	if !g.loaded {
		rec, err := g.load()
		if err != nil {
			return messages.CreditReply{Unavailable: true}, nil
		}
		g.rolls = rolling.NewWindows(lim, CreditTTL)
		g.calls = map[string]CallMark{}
		if g.version != 0 {
			g.rolls.Restore(rec.Rings)
			for _, m := range rec.Calls {
				g.calls[m.Node] = m
			}
		}
		g.loaded = true
	}
	g.rolls.Set(lim)
	clockNow := g.clk.Now()
	now := clockNow.UnixNano()
	if m, ok := g.calls[r.Node]; ok && r.Seq > 0 && r.Seq <= m.Seq {
		if r.Seq < m.Seq {
			// An older call arriving after a newer one was applied: the
			// node has moved on and reads no answer to it.
			return messages.CreditReply{Refused: true}, nil
		}
		// A retry of the call applied last (its answer was lost, or the
		// write that made it durable timed out yet landed): the same
		// answer, nothing applied again.
		return g.rollingReply(r, clockNow, m.Granted, m.At), nil
	}
	for _, k := range r.Backs {
		if k.At > now+int64(rolling.Minute.Slot()) {
			return messages.CreditReply{Refused: true}, nil
		}
	}
	changed := false
	for _, k := range r.Backs {
		if k.N > 0 {
			g.rolls.Refund(now, k.At, rolling.Requests, k.N)
			changed = true
		}
	}
	var n int64
	if r.Op == messages.CreditAcquire && r.Amount > 0 {
		n = min(r.Amount, max(g.rolls.Room(now, rolling.Requests), 0))
		if n > 0 {
			g.rolls.Charge(now, rolling.Cost{rolling.Requests: n})
			changed = true
		}
	}
	if changed {
		if r.Seq > 0 {
			g.calls[r.Node] = CallMark{Node: r.Node, Seq: r.Seq, Granted: n, At: now}
		}
		if err := g.save(Record{Rings: g.rolls.State(), Calls: g.marks(now)}); err != nil {
			// Not durable: nothing is granted, and the windows in memory
			// are dropped so that the next call starts from the last
			// record, as a fresh activation would.
			g.loaded = false
			return messages.CreditReply{Unavailable: true}, err
		}
	}
	return g.rollingReply(r, clockNow, n, now), nil
}

// rollingReply is the answer to r that granted n stamped at: the tightest
// window's figures now, and, when a window is full, when what the node
// needs fits again.
func (g *grain) rollingReply(r *messages.CreditRequest, clockNow time.Time, n, at int64) messages.CreditReply {
	now := clockNow.UnixNano()
	rep := messages.CreditReply{Granted: n, At: at}
	if t, ok := g.rolls.Tightest(now, rolling.Requests); ok {
		rep.Left, rep.Limit, rep.Period, rep.ResetMs = t.Remaining, t.Limit, uint8(t.Period), t.Reset.Milliseconds()
	}
	if rep.Left == 0 {
		if r.Op == messages.CreditAcquire && r.Amount > 0 {
			g.fullAt = clockNow
		}
		// When what the node's refused request needs (or, none refused,
		// one unit) would not fit now, say when it will: the node refuses
		// with that wait once its credit is spent, rather than guess, and
		// asks again (with what the request then refused needs) after
		// dryRetry.
		need := int64(1) // a request refused later needs at least a unit
		if r.Need > 0 {
			need = r.Need
		}
		if ref, fits := g.rolls.Fits(now, rolling.Cost{rolling.Requests: need}); !fits {
			rep.WaitMs = (ref.RetryAt - now + int64(time.Millisecond) - 1) / int64(time.Millisecond)
		}
	}
	rep.Contended = clockNow.Sub(g.fullAt) < CreditTTL
	return rep
}

// markAge is how long the grain keeps a node's last call: far longer than
// a node retries one (retryFor), so a retry is never applied twice, and
// short enough that the members of past runs leave the record.
const markAge = 5 * time.Minute

// marks are the calls to keep in the record: the last one of each node,
// for markAge.
func (g *grain) marks(now int64) []CallMark {
	out := make([]CallMark, 0, len(g.calls))
	for node, m := range g.calls {
		if now-m.At > int64(markAge) {
			delete(g.calls, node)
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b CallMark) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// conflictRetries bounds how often one call re-reads a record another
// activation wrote in between; each retry is one store round trip, and
// two activations of a grain exist only while members disagree.
const conflictRetries = 4

// durable runs a budget operation whose state change is written to the
// store before it answers. When another activation of this grain wrote
// the record since this one read it, the write fails without effect; the
// grain then drops what it holds in memory, reads the record again and
// runs the operation anew on it, so two activations never grant the same
// room.
func (g *grain) durable(op func() (messages.CreditReply, error)) messages.CreditReply {
	for try := 0; ; try++ {
		rep, err := op()
		if !errors.Is(err, ErrConflict) {
			return rep
		}
		g.loaded = false
		if try == conflictRetries {
			return messages.CreditReply{Unavailable: true}
		}
	}
}

// load reads the record and its version.
func (g *grain) load() (Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rec, v, err := g.store.Load(ctx, g.id)
	if err == nil {
		g.version = v
	}
	return rec, err
}

// save writes rec over the version last read or written.
func (g *grain) save(rec Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := g.store.Save(ctx, g.id, rec, g.version)
	if err == nil {
		g.version = v
	}
	return err
}

// slotsOp serves a concurrency cap: the sum of the slots leased to live
// nodes never exceeds the limit.
func (g *grain) slotsOp(r *messages.CreditRequest, limit int64) messages.CreditReply {
	now := g.clk.Now()
	var out int64
	for node, h := range g.holders {
		if now.After(h.expires) {
			delete(g.holders, node) // its lease ran out: it gave up first
			continue
		}
		out += h.held
	}
	recovering := now.Before(g.recoverUntil)
	h := g.holders[r.Node]
	if h == nil {
		h = &holder{}
		g.holders[r.Node] = h
	}
	if recovering && r.Op != messages.CreditRenew {
		// Every slots request carries what the node holds (in window):
		// while rebuilding, that is the truth whatever the node asks.
		n := int64(min(r.Window, 1<<40))
		out += n - h.held
		h.held = n
	}
	switch r.Op {
	case messages.CreditRenew:
		n := max(r.Amount, 0)
		if !recovering {
			// Outside recovery the grain's count is the truth; a node
			// that reports more (its acquire answer was lost the other
			// way) keeps only what the grain knows.
			n = min(n, h.held)
		}
		out += n - h.held
		h.held = n
	case messages.CreditAcquire:
		n := int64(0)
		if !recovering {
			n = min(max(r.Amount, 0), max(limit-out, 0))
			h.held += n
			out += n
		}
		if n < r.Amount {
			g.contendedUntil = now.Add(LeaseTTL)
		}
	case messages.CreditRelease:
		n := min(max(r.Amount, 0), h.held)
		h.held -= n
		out -= n
	}
	h.expires = now.Add(LeaseTTL)
	if h.held == 0 && r.Op == messages.CreditRelease {
		delete(g.holders, r.Node)
	}
	return messages.CreditReply{Granted: h.held, Left: max(limit-out, 0), Recovering: recovering, Contended: now.Before(g.contendedUntil)}
}
