// Package cooldowns is cluster mode's sharing of cooldowns: when a
// failure on this member opens a target's circuit or pushes its cooldown
// later, every other member hears it at once through the remote layer
// (one message per member to its cooldowns actor), and cools the same
// target (by name) until the same time. So a provider incident seen by
// one member stops every member sending to that target within a
// message's flight, not after each has failed on its own.
//
// The actor is the targets actor's cooldown subscriber: the targets actor
// sends it a *messages.TargetCooledDown and goes on (the composition root
// subscribes it, transport/gateway/spawn), and this actor does the
// wrapping and the sends to the members on its own goroutine. A peer's
// cooldown (a *messages.SharedCooldown through the remote layer) is
// applied to the local targets actor by name, never passed on again (no
// echo), never shortens a longer local one, and is capped at
// MaxPeerCooldown from the receiver's clock (a peer with a wrong clock
// cannot cool a target for ever); the receiver's own probe closes the
// circuit afterwards.
package cooldowns

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/clock"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/messages"
)

// ActorName is the name each member runs its cooldowns actor under; the
// remote layer delivers the peers' cooldowns to it by that name.
const ActorName = "omniroute-cooldowns"

// MaxPeerCooldown bounds a cooldown taken from a peer.
const MaxPeerCooldown = time.Hour

// Node is what the actor needs of the cluster node (*internal/cluster.Node):
// its own id and the members to tell.
type Node interface {
	ID() string
	Members() []icluster.Member
}

// Options configure the actor.
type Options struct {
	Node    Node
	Targets *targets.Handle
	Clock   clock.Clock
	Log     *slog.Logger
}

// Handle is the running actor.
type Handle struct {
	pid         *actor.PID
	root        *actor.RootContext
	sent, heard atomic.Int64
	refusals    clusterwire.Refusals
	stopped     atomic.Bool
	opts        Options
}

// Spawn starts the actor under ActorName. It holds no state, so the
// default strategy (restart on a panic) is all it needs: a message it
// cannot read is dropped, counted and logged once, never applied.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handle{root: system.Root, opts: o}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &cooldownsActor{h: h} }), ActorName)
	if err != nil {
		return nil, fmt.Errorf("spawning the cluster cooldowns actor %q: %w", ActorName, err)
	}
	h.pid = pid
	return h, nil
}

// PID is the actor, for the targets actor's SubscribeCooldowns.
func (h *Handle) PID() *actor.PID { return h.pid }

// Counts are what the actor did so far, for the cluster's health
// section: cooldowns told to the peers, peers' cooldowns applied here,
// and cooldowns that could not be sent or read (malformed, or from a
// member of another release).
func (h *Handle) Counts() (sent, heard, dropped int64) {
	return h.sent.Load(), h.heard.Load(), h.refusals.Count()
}

// Stop stops the actor and waits for it. It is idempotent.
func (h *Handle) Stop() {
	if h.stopped.CompareAndSwap(false, true) {
		_ = h.root.PoisonFuture(h.pid).Wait()
	}
}

type cooldownsActor struct{ h *Handle }

func (a *cooldownsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Touch:
	case *messages.TargetCooledDown:
		a.tell(ctx, m)
	default:
		a.apply(ctx)
	}
}

// tell sends every other member this member's cooldown.
func (a *cooldownsActor) tell(ctx actor.Context, m *messages.TargetCooledDown) {
	h := a.h
	node := h.opts.Node
	msg, err := clusterwire.Wrap(&messages.SharedCooldown{Target: m.Name, Until: m.Until.UnixMilli(), Reason: m.Reason, From: node.ID()})
	if err != nil {
		h.refusals.Note(h.opts.Log, "cooldowns actor", err)
		return
	}
	for _, mb := range node.Members() {
		if !mb.Self {
			ctx.Send(actor.NewPID(mb.Address, ActorName), msg)
		}
	}
	h.sent.Add(1)
}

// apply cools the local target a peer's cooldown names.
func (a *cooldownsActor) apply(ctx actor.Context) {
	h := a.h
	pc, err := clusterwire.UnwrapAs[*messages.SharedCooldown](ctx.Message(), "the cooldowns actor")
	if err != nil {
		h.refusals.Note(ctx.Logger(), "cooldowns actor", err)
		return
	}
	now := h.opts.Clock.Now()
	until := time.UnixMilli(pc.Until)
	if !until.After(now) {
		return
	}
	if limit := now.Add(MaxPeerCooldown); until.After(limit) {
		until = limit
	}
	if id, ok := h.opts.Targets.ID(pc.Target); ok {
		h.opts.Targets.PeerCooldown(id, until, pc.Reason+" (from "+pc.From+")")
		h.heard.Add(1)
	}
}
