// Package spawn spawns a gateway's actors, in order, onto the Assembly
// transport.Prepare returns, and links them: the composition root's
// steps. It is its own package, importing the actor packages and not
// transport, so that both the composition root (transport/gateway.New)
// and transport's own internal tests compose a gateway with the same
// code.
//
// Every link between two actors is set up here, as a subscription by
// which one actor sends the other a typed message (package messages) and
// goes on, never as code of one actor run on another's goroutine:
//
//	targets  → the observations link → quota, ledger     messages.QuotaObserved (link.go)
//	targets  → its cooldowns actor → the peers (cluster)  messages.SharedCooldown
//	pressure → ingest, the lanes' pressure follower       messages.Published[*pressure.State]
//	keys     → tenant limits                              messages.Published[*keys.Snapshot], messages.Sync (tenants)
//	keys     → the shares follower (weights, policies)    messages.Published[*keys.Snapshot], messages.Sync (tenants)
//	the cluster's key store → keys (cluster)              Reload, from the root's watch (tenants)
//
// The layers the root builds are handed each other's ports here too: the
// operator layer (package opslayer) gets the routing actors, the
// cluster's and the tenant layer's ports, the admission and lanes actors
// and the services (package sidecars) as they start.
package spawn

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/transport/gateway/clusterlayer"
	"github.com/omniroute/gateway/transport/gateway/opslayer"
	"github.com/omniroute/gateway/transport/gateway/routing"
	"github.com/omniroute/gateway/transport/gateway/sidecars"
	"github.com/omniroute/gateway/transport/gateway/tenants"
	"github.com/omniroute/gateway/transport/port"
)

// Assembly is a gateway being composed (*transport.Assembly): for each
// actor, the options it derives from the catalog and the environment and
// the Attach method that takes the spawned handle. Each method's comment
// in transport says what it needs attached before it.
type Assembly interface {
	Clock() clock.Clock
	// The routing layer's sources, and AttachRouting (package routing).
	routing.Source
	QuotaRoute(target int) (conn int, upstream string, slot int)
	AttachLink(stop func())
	Logger() *slog.Logger
	// The cluster layer's sources, and AttachCluster (package
	// clusterlayer).
	clusterlayer.Source
	// The operator layer's sources, and AttachOperator (package
	// opslayer).
	opslayer.Source
	StartFront()
	// The tenant layer's sources, and AttachTenants (package tenants).
	tenants.Source
	PressureOptions() pressureactor.Options
	IngestConfig(*pressureactor.Handle) ingest.Config
	AttachAdmission(*pressureactor.Handle, *ingest.Handle)
	LanesOptions() lanes.Options
	AttachLanes(*lanes.Handle)
	// The services' sources, and AttachServices (package sidecars).
	sidecars.Source
	// Abort undoes a composition that failed before StartFront, Close
	// one that failed after it.
	Abort()
	Close()
}

// All spawns every actor onto a, in this order (each one's options may
// read the handles before it): ledger, quota and targets (package
// routing); the
// cluster node, its credit leases, the targets' cooldowns actor and the
// quota sharing (cluster mode only, package clusterlayer); the operator
// layer (package opslayer: the operator APIs, the health registry), whose
// handlers the front end's edge serves (StartFront); keys, tenant limits,
// the tenants' shares and the request log (the tenant layer, package
// tenants, which admission weighs by, and in cluster mode the grains'
// tenant budgets); pressure and ingest (admission); lanes; the services
// manager, whose auto-start services it waits for (package sidecars);
// history (the dashboard, package opslayer). On an error nothing it
// started is left running.
func All(system *actor.ActorSystem, a Assembly) error {
	var hs handles
	if err := spawnRouting(system, a, &hs); err != nil {
		a.Abort()
		return err
	}
	if err := joinCluster(system, a, &hs); err != nil {
		a.Abort()
		return err
	}
	buildOps(a, &hs)
	a.StartFront()
	for _, start := range []func(*actor.ActorSystem, Assembly, *handles) error{
		startTenants, startAdmission, startLanes, startServices, startHistory,
	} {
		if err := start(system, a, &hs); err != nil {
			a.Close()
			return err
		}
	}
	return nil
}

// handles are the actors spawned so far that a later step links to.
type handles struct {
	layer    *routing.Layer // the routing actors' layer
	routing  clusterlayer.Routing
	pressure *pressureactor.Handle
	cluster  *clusterlayer.Layer // cluster mode; nil on a single node
	ops      *opslayer.Layer
}

// spawnRouting starts the ledger, the quota actors and the targets actor
// (whose attempt reports carry the header observations the other two
// need) on the start-up catalog's plan (package routing, which also
// registers what a reload adds with them, and with the lanes and the
// cluster's pools once they are attached), and the observations link
// between them.
func spawnRouting(system *actor.ActorSystem, a Assembly, hs *handles) error {
	r, err := routing.Start(system, a)
	if err != nil {
		return err
	}
	q, ledger, t := r.Quota(), r.Ledger(), r.Targets()
	link, err := spawnObservations(system, a.QuotaRoute, q, ledger)
	if err != nil {
		return err // Abort stops the three
	}
	t.SubscribeObservations(link)
	a.AttachLink(func() { _ = system.Root.PoisonFuture(link).Wait() })
	hs.layer = r
	hs.routing = clusterlayer.Routing{Ledger: ledger, Slots: r.Slots(), Quota: q, Targets: t}
	return nil
}

// joinCluster joins the cluster when cluster mode is on (package
// clusterlayer: the node, its credit leases, the targets' cooldowns
// actor, the quota sharing) and hands the pipeline its port. It runs
// after the ledger exists (its slots become shared pools) and before the
// tenant layer.
func joinCluster(system *actor.ActorSystem, a Assembly, hs *handles) error {
	l, err := clusterlayer.Start(system, a, hs.routing)
	if err != nil {
		return err
	}
	hs.cluster = l
	if l != nil {
		hs.layer.AttachCluster(l) // the budgets a reload adds are shared too
	}
	return nil
}

// buildOps builds the operator layer on the routing actors, the cluster's
// port (cluster mode) and the node's store (the request log), and hands
// the pipeline its port, before the front end starts: the edge's
// operator rows are its handlers. The later steps hand it their actors.
func buildOps(a Assembly, hs *handles) {
	var cl port.Cluster // nil on a single node
	if hs.cluster != nil {
		cl = hs.cluster
	}
	r := hs.routing
	hs.ops = opslayer.New(a, opslayer.Routing{Ledger: r.Ledger, Quota: r.Quota, Targets: r.Targets, Cluster: cl}, a.Store())
}

// startTenants starts the tenant layer (package tenants: the keys' store,
// the keys actor, the tenant limiter and the shares follower subscribed
// to it, the request log writer) and hands the pipeline its port. It
// runs before admission, whose ingest queue and lanes read the tenants'
// weights, and after the cluster join: in cluster mode the keys live in
// etcd (this node's own keys copied there first), watched for changes
// other nodes make.
func startTenants(system *actor.ActorSystem, a Assembly, hs *handles) error {
	f := followed{Assembly: a, ops: hs.ops, cluster: hs.cluster}
	if hs.cluster == nil {
		return tenants.Start(system, f, tenants.Cluster{})
	}
	return tenants.Start(system, f, tenants.Cluster{Etcd: hs.cluster.Etcd(), Name: hs.cluster.Name()})
}

// followed hands the tenant layer's port to the operator layer (the keys
// API, the tenants' windows and health section) and, in cluster mode, to
// the cluster layer (the grains hosted here read tenants' budgets from
// its shares) as it hands it to the pipeline.
type followed struct {
	Assembly
	ops     *opslayer.Layer
	cluster *clusterlayer.Layer // nil on a single node
}

func (f followed) AttachTenants(p tenants.Port) {
	if f.cluster != nil {
		f.cluster.Follow(p)
	}
	f.ops.AttachTenants(p)
	f.Assembly.AttachTenants(p)
}

// startAdmission starts the resource-pressure and ingest actors on the
// budget resolved once; the ingest actor follows the pressure (under
// critical pressure it aborts the largest uploads still being read).
func startAdmission(system *actor.ActorSystem, a Assembly, hs *handles) error {
	ph, err := pressureactor.Spawn(system, a.PressureOptions())
	if err != nil {
		return err
	}
	ih, err := ingest.Spawn(system, a.IngestConfig(ph))
	if err != nil {
		ph.Stop()
		return err
	}
	ph.Subscribe(ih.PID())
	a.AttachAdmission(ph, ih)
	hs.ops.AttachAdmission(ph, ih)
	hs.pressure = ph
	return nil
}

// startLanes starts one admission controller per upstream, whose pressure
// follower takes the gateway's memory pressure (critical halves every
// upstream's limit, high stops growth, a used-up CPU makes latency no
// evidence of a provider's queue).
func startLanes(system *actor.ActorSystem, a Assembly, hs *handles) error {
	h, err := lanes.Spawn(system, a.LanesOptions())
	if err != nil {
		return err
	}
	hs.pressure.Subscribe(h.PressurePID())
	hs.layer.AttachLanes(h) // a reload registers new targets' upstreams with it
	a.AttachLanes(h)
	hs.ops.AttachLanes(h)
	return nil
}

// startServices spawns the services' supervisors (package sidecars),
// hands them to the pipeline, which builds the relay on them, and to the
// operator layer, and waits for the auto-start services, so that the
// first request finds them up.
func startServices(system *actor.ActorSystem, a Assembly, hs *handles) error {
	s, err := sidecars.Start(system, a, hs.ops)
	if err != nil {
		return err
	}
	hs.ops.AttachServices(s)
	return nil
}

// startHistory spawns the history actor that samples the figures the
// dashboard charts, once a second (package opslayer).
func startHistory(system *actor.ActorSystem, _ Assembly, hs *handles) error {
	return hs.ops.StartHistory(system)
}
