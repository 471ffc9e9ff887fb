package transport

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/messages"
)

// Cluster mode spreads cooldowns: when a failure on this node opens a
// target's circuit or pushes its cooldown later, every other member hears
// it at once through the remote layer (one message per member to its
// cooldowns actor), and cools the same target (by name) until the same
// time. So a provider incident seen by one node stops every node sending
// to that target within a message's flight, not after each has failed on
// its own. A peer's cooldown is never passed on again (no echo), never
// shortens a longer local one, and is capped at maxPeerCooldown from the
// receiver's clock (a peer with a wrong clock cannot cool a target for
// ever); the receiver's own probe closes the circuit afterwards.

// CooldownsActorName is the actor each member runs for its peers'
// cooldowns; the remote layer delivers to it by name.
const CooldownsActorName = "omniroute-cooldowns"

// maxPeerCooldown bounds a cooldown taken from a peer.
const maxPeerCooldown = time.Hour

// onCooldown is the targets actor's OnCooldown hook: in cluster mode it
// tells the other members.
func (g *Gateway) onCooldown(target int, until time.Time, reason string) {
	cs := g.cs
	if cs == nil {
		return
	}
	name := ""
	for _, t := range g.rc.Load().cat.Targets {
		if t.ID == target {
			name = t.Name
			break
		}
	}
	if name == "" {
		return
	}
	msg, err := clusterwire.Wrap(&messages.SharedCooldown{Target: name, Until: until.UnixMilli(), Reason: reason, From: cs.node.ID()})
	if err != nil {
		cs.cooldownRefusals.Note(g.log, "cooldowns hook", err)
		return
	}
	for _, m := range cs.node.Members() {
		if !m.Self {
			g.system.Root.Send(actor.NewPID(m.Address, CooldownsActorName), msg)
		}
	}
	cs.cooldownsSent.Add(1)
}

// cooldownsActor applies the cooldowns peers send. Only current members'
// messages reach it: the remote layer is mutual TLS and internal/cluster's
// gate drops what anyone else sends (docs/cluster.md, "Trust"). It holds
// no state, so the default strategy (restart on a panic) is all it needs:
// a message it cannot read (malformed, or from a member of another
// release) is dropped, counted and logged once, never applied.
type cooldownsActor struct{ g *Gateway }

func (a *cooldownsActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	g := a.g
	pc, err := clusterwire.UnwrapAs[*messages.SharedCooldown](ctx.Message(), "the cooldowns actor")
	if err != nil {
		g.cs.cooldownRefusals.Note(ctx.Logger(), "cooldowns actor", err)
		return
	}
	now := g.clk.Now()
	until := time.UnixMilli(pc.Until)
	if !until.After(now) {
		return
	}
	if cap := now.Add(maxPeerCooldown); until.After(cap) {
		until = cap
	}
	for _, t := range g.rc.Load().cat.Targets {
		if t.Name == pc.Target {
			g.targets.PeerCooldown(t.ID, until, pc.Reason+" (from "+pc.From+")")
			g.cs.cooldownsHeard.Add(1)
			return
		}
	}
}

// CooldownsActor gives the props of this member's cooldowns actor and the
// name (CooldownsActorName) the composition root spawns it under once the
// cluster is attached: the peers address it by that name.
func (a *Assembly) CooldownsActor() (*actor.Props, string) {
	g := a.g
	return actor.PropsFromProducer(func() actor.Actor { return &cooldownsActor{g: g} }), CooldownsActorName
}
