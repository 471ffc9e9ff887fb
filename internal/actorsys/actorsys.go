// Package actorsys builds the actor system the gateway runs on: protoactor's,
// with its process registry sized for the gateway instead of for a host of
// millions of actors.
//
// protoactor's registry of local processes is 1,024 concurrent maps of 32
// locked shards each, all allocated when the system is created: about 2.9 MB
// of heap that stays live for the life of the process, more than half of the
// gateway's whole live heap at idle. The gateway registers a few hundred
// processes at most (its actors, and one future per request that asks an
// actor and waits), and a registry lookup happens once per PID (the PID
// caches the process it resolved), so a few hundred shard locks serve it as
// well as 32,768 do.
package actorsys

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
)

// Buckets is how many of protoactor's concurrent maps the registry keeps
// (each has 32 shards with a lock each): 512 locks, about 45 KB.
const Buckets = 16

// New returns a new actor system (protoactor's NewActorSystem with opts)
// whose process registry has Buckets buckets. Use it, not
// actor.NewActorSystem, for a system the gateway's own binary or tests own.
func New(opts ...actor.ConfigOption) *actor.ActorSystem {
	sys := actor.NewActorSystem(opts...)
	Compact(sys, Buckets)
	return sys
}

// Compact shrinks a new system's process registry to n buckets, keeping
// what the system registered while it was built (its event stream, its
// dead letters). It must run before anything else uses the system: nothing
// may spawn, look a process up or join a cluster on it while it runs.
// A registry with n buckets or fewer is left as it is.
func Compact(sys *actor.ActorSystem, n int) {
	reg := sys.ProcessRegistry.LocalPIDs
	if n <= 0 || len(reg.LocalPIDs) <= n {
		return
	}
	type entry struct {
		id      string
		process any
	}
	var kept []entry
	for _, m := range reg.LocalPIDs {
		// IterCb, not Items or Clear: those start a goroutine per shard.
		m.IterCb(func(id string, p any) { kept = append(kept, entry{id, p}) })
	}
	for _, e := range kept {
		reg.GetBucket(e.id).Remove(e.id)
	}
	// The first n buckets are empty now; the others become garbage.
	small := &actor.SliceMap{LocalPIDs: slices.Clone(reg.LocalPIDs[:n])}
	for _, e := range kept {
		small.GetBucket(e.id).Set(e.id, e.process)
	}
	sys.ProcessRegistry.LocalPIDs = small
}
