// Package gateway is the gateway's composition root: New resolves the
// catalog, spawns every actor on the actor system it is given (pressure,
// ingest, ledger, quota, targets, lanes, keys, tenant limits, request
// log, history, the services manager, and in cluster mode the cluster
// node, its credit leases and the cooldowns actor) and hands their
// handles to transport, which only serves HTTP on them. A host service
// embeds the whole gateway with New plus either Handler (its own fasthttp
// server) or HTTPHandler (net/http); see docs/embedding.md.
//
// The steps themselves are package spawn (spawn.All), which transport's
// internal tests use too. Keeping the spawning here, and not in
// transport, means the front end
// can be read (and tested) as what it is, an HTTP layer over published
// handles, and the order in which actors start and what each is given is
// in one place.
package gateway

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway/clusterlayer"
	"github.com/omniroute/gateway/transport/gateway/datadir"
	"github.com/omniroute/gateway/transport/gateway/spawn"
)

// Options configures a Gateway: the environment, the config file, and the
// embedder's hooks (logger, clock, store, tracer, …); see
// transport.Options for each field.
type Options = transport.Options

// Gateway is one running gateway: its HTTP front end (Handler,
// HTTPHandler, ServerConfig, Serve, Shutdown, Close, Reload, Catalog and
// the actors' handles) on the actors New spawned. Close stops them.
type Gateway struct {
	*transport.Gateway
}

// New builds a gateway on system: it takes the data directory (its lock,
// then the SQLite store unless Options.Store is the host's;
// datadir.Hold), transport.Prepare resolves the catalog, creates the
// upstream clients and derives tenant identities, then spawn.All spawns
// the actors in order (its comment gives it). On an error nothing it
// started is left running; Close releases the data directory last.
func New(system *actor.ActorSystem, o Options) (*Gateway, error) {
	a, err := prepare(system, o)
	if err != nil {
		return nil, err
	}
	if err := spawn.All(system, a); err != nil {
		return nil, err
	}
	return &Gateway{Gateway: a.Gateway()}, nil
}

// prepare is New's first half: the data directory held, in cluster
// mode the install secret settled (clusterlayer.ShareInstallSecret:
// tenant ids are HMACs under the cluster's, and transport.Prepare
// derives them and builds the redactor that must know it), then
// transport.Prepare on its store; the gateway's Close (or the
// composition's Abort) releases it.
func prepare(system *actor.ActorSystem, o Options) (*transport.Assembly, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	var secret string
	a, err := datadir.Hold(o.Env.ResolvedDataDir(), o.Store, func(st store.Store) (*transport.Assembly, error) {
		o.Store = st
		var err error
		if secret, err = clusterlayer.ShareInstallSecret(&o.Env); err != nil {
			return nil, err
		}
		return transport.Prepare(system, o)
	})
	if err != nil {
		return nil, err
	}
	if secret != "" {
		a.Logger().Info("tenant ids use the cluster's install secret", "cluster", o.Env.Cluster.ClusterName, "source", secret)
	}
	return a, nil
}
