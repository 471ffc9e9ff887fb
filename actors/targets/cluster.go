package targets

// Cluster mode spreads cooldowns: when a failure on this member opens a
// target's circuit or pushes its cooldown later, every other member hears
// it at once through the remote layer (one message per member to its
// cooldowns actor), and cools the same target (by name) until the same
// time. So a provider incident seen by one member stops every member
// sending to that target within a message's flight, not after each has
// failed on its own.
//
// The cooldowns actor (StartCluster) is the targets actor's cooldown
// subscriber: the targets actor sends it a cooledDown and goes on, and
// this actor does the wrapping and the sends to the members on its own
// goroutine. A peer's cooldown (a *messages.SharedCooldown through the
// remote layer) is applied to the targets actor by name, never passed on
// again (no echo), never shortens a longer local one, and is capped at
// MaxPeerCooldown from the receiver's clock (a peer with a wrong clock
// cannot cool a target for ever); the receiver's own probe closes the
// circuit afterwards. The quota actors share their readings the same way
// (actors/quota's StartCluster).

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/messages"
)

// CooldownsActorName is the name each member runs its cooldowns actor
// under; the remote layer delivers the peers' cooldowns to it by that
// name.
const CooldownsActorName = "omniroute-cooldowns"

// MaxPeerCooldown bounds a cooldown taken from a peer.
const MaxPeerCooldown = time.Hour

// Member is a member of the cluster as the cooldowns actor addresses it.
type Member struct {
	ID, Address string
	Self        bool
}

// ClusterOptions configure the cooldowns actor.
type ClusterOptions struct {
	// Self is this member's id (the From of what it tells).
	Self string
	// Members returns the current member list (this member included,
	// with Self set); called for every cooldown told.
	Members func() []Member
	Log     *slog.Logger
}

// Cluster is the running cooldowns actor.
type Cluster struct {
	h           *Handle
	pid         *actor.PID
	sent, heard atomic.Int64
	refusals    clusterwire.Refusals
	o           ClusterOptions
}

// cooledDown is what the targets actor sends its cooldown subscriber: a
// failure seen here opened target's circuit or pushed its cooldown later.
// A cooldown applied from a peer is never reported (no echo).
type cooledDown struct {
	target int
	name   string // names, not ids, are the same on every member
	until  time.Time
	reason string
}

// StartCluster spawns this member's cooldowns actor under
// CooldownsActorName and subscribes it to the targets actor's cooldowns.
// Call it once; Stop stops it after the targets actor. It holds no state,
// so protoactor's default strategy (restart on a panic) is all it needs:
// a message it cannot read is dropped, counted and logged once, never
// applied.
func (h *Handle) StartCluster(o ClusterOptions) (*Cluster, error) {
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	cl := &Cluster{h: h, o: o}
	pid, err := h.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &cooldownsActor{cl: cl} }), CooldownsActorName)
	if err != nil {
		return nil, fmt.Errorf("spawning the cluster cooldowns actor %q: %w", CooldownsActorName, err)
	}
	cl.pid = pid
	h.cluster.Store(cl)
	return cl, nil
}

// Counts are what the cooldowns actor did so far, for the cluster's
// health section: cooldowns told to the peers, peers' cooldowns applied
// here, and cooldowns that could not be sent or read (malformed, or from
// a member of another release).
func (cl *Cluster) Counts() (sent, heard, dropped int64) {
	return cl.sent.Load(), cl.heard.Load(), cl.refusals.Count()
}

// stop ends the cooldowns actor (Handle.Stop, after the targets actor).
func (cl *Cluster) stop() { _ = cl.h.root.PoisonFuture(cl.pid).Wait() }

type cooldownsActor struct{ cl *Cluster }

func (a *cooldownsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Touch:
	case *cooledDown:
		a.tell(ctx, m)
	default:
		a.apply(ctx)
	}
}

// tell sends every other member this member's cooldown.
func (a *cooldownsActor) tell(ctx actor.Context, m *cooledDown) {
	cl := a.cl
	msg, err := clusterwire.Wrap(&messages.SharedCooldown{Target: m.name, Until: m.until.UnixMilli(), Reason: m.reason, From: cl.o.Self})
	if err != nil {
		cl.refusals.Note(cl.o.Log, "cooldowns actor", err)
		return
	}
	for _, mb := range cl.o.Members() {
		if !mb.Self {
			ctx.Send(actor.NewPID(mb.Address, CooldownsActorName), msg)
		}
	}
	cl.sent.Add(1)
}

// apply cools the local target a peer's cooldown names.
func (a *cooldownsActor) apply(ctx actor.Context) {
	cl := a.cl
	pc, err := clusterwire.UnwrapAs[*messages.SharedCooldown](ctx.Message(), "the cooldowns actor")
	if err != nil {
		cl.refusals.Note(ctx.Logger(), "cooldowns actor", err)
		return
	}
	now := cl.h.clk.Now()
	until := time.UnixMilli(pc.Until)
	if !until.After(now) {
		return
	}
	if limit := now.Add(MaxPeerCooldown); until.After(limit) {
		until = limit
	}
	if id, ok := cl.h.ID(pc.Target); ok {
		cl.h.PeerCooldown(id, until, pc.Reason+" (from "+pc.From+")")
		cl.heard.Add(1)
	}
}
