// Package messages is the contract between packages: every message one
// package sends an actor of another package, every message one member of
// a cluster sends another, and the small vocabularies they carry (failure
// classes, quota readings, ingest outcomes). It imports nothing of the
// project, so any room may use it.
//
// A message only its own package sends (an actor's handle to its actor,
// an actor to itself or its children) stays private to that package.
// TestMessagesCrossingPackagesLiveHere fails on an actor that receives an
// exported message of its own package or one of another package of the
// module, and TestEveryTypeIsShared on a type here that does not cross a
// boundary (fewer than two packages use it, or, for the cluster's
// messages, no package at all).
//
// Who sends what to whom:
//
//	AttemptFinished               transport (once per upstream attempt) → actors/targets
//	QuotaObserved                 actors/targets → its observation subscriber (the composition
//	                              root's link to the quota and ledger actors, transport/gateway/spawn)
//	Published[T], Sync            actors/keys → its subscribers (actors/tenantlimit);
//	                              actors/pressure → its subscribers (actors/ingest, actors/lanes), no Sync
//	Crash                         the actor packages' restart tests → every actor under actors/
//	CreditRequest, CreditReply    actors/credit: a node's leases ↔ a budget's grain, on the member that owns it
//	SharedQuotaPoll,              actors/quota's cluster actor → every other member's
//	SharedQuotaHeaders
//	SharedCooldown                actors/targets' cooldowns actor → every other member's
//
// One file per concern: targets.go (an attempt's outcome and a cooldown a
// member shares), quota.go (the quota a response's headers report and the
// quota readings members share), ingest.go (how an ingest admission
// ended), credit.go (the credit grains' protocol), this file (what any
// actor or subscription uses); cluster.go and wire.go are the cluster's
// one codec.
//
// Names say what a message says, in its concern's words, with no package
// prefix (AttemptFinished, CreditRequest); a cluster message that passes
// on what one member saw is Shared and what it carries (SharedQuotaPoll,
// SharedCooldown), so a Receive switch shows it came from a peer.
//
// Messages are sent as pointers (Crash, which only tests send, as a
// value) and never modified after sending. They never hold a
// *fasthttp.RequestCtx or slices of its buffers: whatever an actor needs
// is copied in.
package messages

// Sync is a barrier: an actor that takes it answers it (with the same
// message) once it has handled every message sent to it before. Whoever
// asks an actor for a change that the actor then publishes to its
// subscribers sends each subscriber a Sync after the answer, so it returns
// only once they took the change (actors/keys: a key created is limited on
// the very next request) without the publisher ever waiting for them.
type Sync struct{}

// Crash makes the actor that receives it panic inside Receive. Tests send
// it (every actor under actors/ handles it first in its message switch,
// which TestEveryActorTakesCrash checks) to see that the actor restarts
// cleanly under its supervision strategy; nothing in the gateway sends it.
type Crash struct{ Reason string }

// Panic panics with c (called from an actor's Receive).
func (c Crash) Panic() { panic("messages.Crash: " + c.Reason) }

// Published carries a snapshot an actor published to an actor of another
// package that subscribed to it. The keys actor sends each key set it
// publishes to the tenant-limits actor as a Published[*internal/keys.Snapshot]
// (actors/keys Handle.Subscribe). Snapshot is immutable: the same value the
// publisher's handle returns to readers. Subscribers also answer Sync.
type Published[T any] struct{ Snapshot T }
