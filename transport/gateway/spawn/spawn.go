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
package spawn

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/transport/gateway/clusterlayer"
	"github.com/omniroute/gateway/transport/gateway/tenants"
)

// Assembly is a gateway being composed (*transport.Assembly): for each
// actor, the options it derives from the catalog and the environment and
// the Attach method that takes the spawned handle. Each method's comment
// in transport says what it needs attached before it.
type Assembly interface {
	Clock() clock.Clock
	PlanRouting() ([]ledgeractor.SlotSpec, []quotaactor.ConnSpec, []string, error)
	QuotaOptions(*ledgeractor.Handle) quotaactor.Options
	TargetsOptions() targets.Options
	AttachRouting(*ledgeractor.Handle, *quotaactor.Handle, *targets.Handle)
	QuotaRoute(target int) (conn int, upstream string, slot int)
	AttachLink(stop func())
	Logger() *slog.Logger
	// The cluster layer's sources, and AttachCluster (package
	// clusterlayer).
	clusterlayer.Source
	StartFront()
	// The tenant layer's sources, and AttachTenants (package tenants).
	tenants.Source
	PressureOptions() pressureactor.Options
	IngestConfig(*pressureactor.Handle) ingest.Config
	AttachAdmission(*pressureactor.Handle, *ingest.Handle)
	LanesOptions() lanes.Options
	AttachLanes(*lanes.Handle)
	ServicesPlan() ([]services.Spec, services.Options)
	AttachServices(*services.Manager) error
	HistoryOptions() history.Options
	AttachHistory(*history.Handle)
	// Abort undoes a composition that failed before StartFront, Close
	// one that failed after it.
	Abort()
	Close()
}

// All spawns every actor onto a, in this order (each one's options may
// read the handles before it): ledger, quota and targets (routing); the
// cluster node, its credit leases, the targets' cooldowns actor and the
// quota sharing (cluster mode only, package clusterlayer); the front
// end's own state (StartFront); keys, tenant limits, the tenants' shares
// and the request log (the tenant layer, package tenants, which
// admission weighs by, and in cluster mode the grains' tenant budgets);
// pressure and ingest (admission); lanes; the services manager, whose auto-start
// services it waits for; history (the dashboard). On an error nothing it
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
	routing  clusterlayer.Routing
	pressure *pressureactor.Handle
	cluster  *clusterlayer.Layer // cluster mode; nil on a single node
}

// spawnRouting starts the ledger, the quota actors and the targets actor
// (whose attempt reports carry the header observations the other two
// need) on the start-up catalog's plan, and the observations link
// between them.
func spawnRouting(system *actor.ActorSystem, a Assembly, hs *handles) error {
	slots, conns, names, err := a.PlanRouting()
	if err != nil {
		return err
	}
	clk := a.Clock()
	ledger, err := ledgeractor.Spawn(system, slots, clk)
	if err != nil {
		return err
	}
	q, err := quotaactor.Spawn(system, conns, clk, a.QuotaOptions(ledger))
	if err != nil {
		ledger.Stop()
		return err
	}
	t, err := targets.SpawnWith(system, names, clk, a.TargetsOptions())
	if err != nil {
		q.Stop()
		ledger.Stop()
		return err
	}
	a.AttachRouting(ledger, q, t)
	link, err := spawnObservations(system, a.QuotaRoute, q, ledger)
	if err != nil {
		return err // Abort stops the three
	}
	t.SubscribeObservations(link)
	a.AttachLink(func() { _ = system.Root.PoisonFuture(link).Wait() })
	hs.routing = clusterlayer.Routing{Ledger: ledger, Slots: slots, Quota: q, Targets: t}
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
	return nil
}

// startTenants starts the tenant layer (package tenants: the keys' store,
// the keys actor, the tenant limiter and the shares follower subscribed
// to it, the request log writer) and hands the pipeline its port. It
// runs before admission, whose ingest queue and lanes read the tenants'
// weights, and after the cluster join: in cluster mode the keys live in
// etcd (this node's own keys copied there first), watched for changes
// other nodes make.
func startTenants(system *actor.ActorSystem, a Assembly, hs *handles) error {
	if hs.cluster == nil {
		return tenants.Start(system, a, tenants.Cluster{})
	}
	return tenants.Start(system, followed{Assembly: a, cluster: hs.cluster}, tenants.Cluster{Etcd: hs.cluster.Etcd(), Name: hs.cluster.Name()})
}

// followed hands the tenant layer's port to the cluster layer too (the
// grains hosted here read tenants' budgets from its shares) as it hands
// it to the pipeline.
type followed struct {
	Assembly
	cluster *clusterlayer.Layer
}

func (f followed) AttachTenants(p tenants.Port) {
	f.cluster.Follow(p)
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
	a.AttachLanes(h)
	return nil
}

// startServices spawns the services' supervisors; attaching them builds
// the relay and waits for the auto-start services, so that the first
// request finds them up.
func startServices(system *actor.ActorSystem, a Assembly, _ *handles) error {
	specs, so := a.ServicesPlan()
	mgr, err := services.Start(system, specs, so)
	if err != nil {
		return err
	}
	return a.AttachServices(mgr)
}

// startHistory spawns the history actor that samples the figures the
// dashboard charts, once a second.
func startHistory(system *actor.ActorSystem, a Assembly, _ *handles) error {
	h, err := history.Spawn(system, a.HistoryOptions())
	if err != nil {
		return err
	}
	a.AttachHistory(h)
	return nil
}
