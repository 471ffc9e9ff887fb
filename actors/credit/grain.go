package credit

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
)

// KindName is the grain kind every member hosts.
const KindName = "omniroute-credit"

// LeaseTTL is how long a node's slot lease lasts at the grain after its
// last renewal. A node renews every RenewInterval and treats its own lease
// as expired LeaseTTL after it *sent* the last renewal that was answered,
// so the node always gives up before the grain reclaims.
const LeaseTTL = 3 * time.Second

// RenewInterval is how often a node renews its slot leases and tops up or
// returns window credit.
const RenewInterval = 500 * time.Millisecond

// Identities: "w/<key>" is a window budget (credit per one-minute window,
// persisted), "s/<key>" a concurrency cap (slots leased per node, rebuilt
// from the holders' renewals).
const (
	windowPrefix = "w/"
	slotsPrefix  = "s/"
)

// grainStrategy restarts a grain that panicked from a fresh object; a
// fresh window grain reloads its record and a fresh slots grain rebuilds
// from renewals, exactly as after a re-homing.
var grainStrategy = supervise.Restart("credit-grain")

// NewKind is the credit grain kind, keeping window records in store and
// reading time from clk.
func NewKind(store Store, clk clock.Clock) *pcluster.Kind {
	if clk == nil {
		clk = clock.Real{}
	}
	return pcluster.NewKind(KindName, grainProps(store, clk))
}

// grainProps builds grains without protoactor's cluster middleware, which
// NewKind adds; the unit tests host grains on a plain actor system.
func grainProps(store Store, clk clock.Clock) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &grain{store: store, clk: clk} }, actor.WithSupervisor(grainStrategy))
}

type holder struct {
	held    int64
	expires time.Time
}

// grain is one shared budget. Only its own Receive touches its fields.
type grain struct {
	store Store
	clk   clock.Clock
	id    string
	slots bool

	// window mode
	loaded  bool
	window  uint64
	granted int64

	// slots mode
	holders      map[string]*holder
	recoverUntil time.Time
	// contendedUntil is LeaseTTL after the grain last refused a node
	// slots: until then every answer tells holders to keep none idle.
	contendedUntil time.Time
}

func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *pcluster.ClusterInit:
		g.id = m.Identity.Identity
		g.slots = strings.HasPrefix(g.id, slotsPrefix)
		if g.slots {
			// A fresh slots grain knows no holder. For one lease TTL it
			// grants nothing and takes the holders' renewals as the truth;
			// a node that does not renew by then has given its slots up
			// on its own (its lease expired on its side first). The very
			// first activation of a cap (no marker in the store) has no
			// holders to wait for and grants at once.
			g.holders = map[string]*holder{}
			if _, seen, err := g.load(); err != nil || seen {
				g.recoverUntil = g.clk.Now().Add(LeaseTTL)
			} else if g.save(Record{}) != nil {
				g.recoverUntil = g.clk.Now().Add(LeaseTTL)
			}
		}
	case *wrapperspb.BytesValue:
		req, err := decodeRequest(m.Value)
		if err != nil {
			ctx.Respond(&wrapperspb.BytesValue{})
			return
		}
		var rep reply
		if g.slots {
			rep = g.slotsOp(&req)
		} else {
			rep = g.windowOp(&req)
		}
		ctx.Respond(rep.encode())
	}
}

// windowOp serves a window budget. The total granted in a window never
// exceeds the limit the request carries, and it is written to the store
// before the answer leaves, so a re-activated grain continues from it.
func (g *grain) windowOp(r *request) reply {
	if !g.loaded {
		rec, ok, err := g.load()
		if err != nil {
			return reply{unavailable: true}
		}
		if ok {
			g.window, g.granted = rec.Window, rec.Granted
		}
		g.loaded = true
	}
	if r.window > g.window {
		g.window, g.granted = r.window, 0
	}
	left := max(r.limit-g.granted, 0)
	if r.window < g.window { // a node whose clock lags: nothing for a past window
		return reply{left: left}
	}
	switch r.op {
	case opAcquire:
		n := min(max(r.amount, 0), left)
		if n == 0 {
			return reply{left: left}
		}
		if err := g.save(Record{Window: g.window, Granted: g.granted + n}); err != nil {
			return reply{unavailable: true, left: left}
		}
		g.granted += n
		return reply{granted: n, left: left - n}
	case opRelease:
		n := min(max(r.amount, 0), g.granted)
		if n > 0 && g.save(Record{Window: g.window, Granted: g.granted - n}) == nil {
			g.granted -= n
		}
		return reply{left: max(r.limit-g.granted, 0)}
	}
	return reply{left: left}
}

func (g *grain) load() (Record, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return g.store.Load(ctx, g.id)
}

func (g *grain) save(rec Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return g.store.Save(ctx, g.id, rec)
}

// slotsOp serves a concurrency cap: the sum of the slots leased to live
// nodes never exceeds the limit.
func (g *grain) slotsOp(r *request) reply {
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
	h := g.holders[r.node]
	if h == nil {
		h = &holder{}
		g.holders[r.node] = h
	}
	if recovering && r.op != opRenew {
		// Every slots request carries what the node holds (in window):
		// while rebuilding, that is the truth whatever the node asks.
		n := int64(min(r.window, 1<<40))
		out += n - h.held
		h.held = n
	}
	switch r.op {
	case opRenew:
		n := max(r.amount, 0)
		if !recovering {
			// Outside recovery the grain's count is the truth; a node
			// that reports more (its acquire answer was lost the other
			// way) keeps only what the grain knows.
			n = min(n, h.held)
		}
		out += n - h.held
		h.held = n
	case opAcquire:
		n := int64(0)
		if !recovering {
			n = min(max(r.amount, 0), max(r.limit-out, 0))
			h.held += n
			out += n
		}
		if n < r.amount {
			g.contendedUntil = now.Add(LeaseTTL)
		}
	case opRelease:
		n := min(max(r.amount, 0), h.held)
		h.held -= n
		out -= n
	}
	h.expires = now.Add(LeaseTTL)
	if h.held == 0 && r.op == opRelease {
		delete(g.holders, r.node)
	}
	return reply{granted: h.held, left: max(r.limit-out, 0), recovering: recovering, contended: now.Before(g.contendedUntil)}
}
