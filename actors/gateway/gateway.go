// Package gateway is the gateway's composition root: New resolves the
// catalog, spawns every actor on the actor system it is given (pressure,
// ingest, ledger, quota, targets, lanes, keys, tenant limits, request
// log, history, the services manager, and in cluster mode the cluster
// node, its credit leases and the cooldowns actor) and hands their
// handles to transport, which only serves HTTP on them. A host service
// embeds the whole gateway with New plus either Handler (its own fasthttp
// server) or HTTPHandler (net/http); see docs/embedding.md.
//
// Keeping the spawning here, and not in transport, means the front end
// can be read (and tested) as what it is, an HTTP layer over published
// handles, and the order in which actors start and what each is given is
// in one place.
package gateway

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/omniroute/gateway/actors/credit"
	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/requestlog"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	tenantlimitactor "github.com/omniroute/gateway/actors/tenantlimit"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/transport"
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

// New builds a gateway on system: it resolves the catalog, creates the
// upstream clients, derives tenant identities and spawns the actors, in
// this order (each one's options may read the handles before it):
// ledger, quota and targets (routing); the cluster node, its credit
// leases and the cooldowns actor (cluster mode only); the front end's own
// state; keys, tenant limits and the request log (the tenant layer, which
// admission weighs by); pressure and ingest (admission); lanes; the
// services manager, whose auto-start services it waits for; history (the
// dashboard). On an error nothing it started is left running.
func New(system *actor.ActorSystem, o Options) (*Gateway, error) {
	a, err := transport.Prepare(system, o)
	if err != nil {
		return nil, err
	}
	if err := spawnRouting(system, a); err != nil {
		a.Abort()
		return nil, err
	}
	if err := joinCluster(system, a); err != nil {
		a.Abort()
		return nil, err
	}
	a.StartFront()
	g := a.Gateway()
	for _, start := range []func(*actor.ActorSystem, *transport.Assembly) error{
		startTenants, startAdmission, startLanes, startServices, startHistory,
	} {
		if err := start(system, a); err != nil {
			g.Close()
			return nil, err
		}
	}
	return &Gateway{Gateway: g}, nil
}

// spawnRouting starts the ledger, the quota actors and the targets actor
// (whose attempt reports carry the header observations the other two
// need) on the start-up catalog's plan.
func spawnRouting(system *actor.ActorSystem, a *transport.Assembly) error {
	p, err := a.PlanRouting()
	if err != nil {
		return err
	}
	clk := a.Clock()
	ledger, err := ledgeractor.Spawn(system, p.Slots, clk)
	if err != nil {
		return err
	}
	q, err := quotaactor.Spawn(system, p.Conns, clk, a.QuotaOptions(ledger))
	if err != nil {
		ledger.Stop()
		return err
	}
	t, err := targets.SpawnWith(system, p.Targets, clk, a.TargetsOptions())
	if err != nil {
		q.Stop()
		ledger.Stop()
		return err
	}
	a.AttachRouting(ledger, q, t)
	return nil
}

// joinCluster joins the cluster when cluster mode is on. It runs after
// the ledger exists (its slots become shared pools) and before the
// tenant layer.
func joinCluster(system *actor.ActorSystem, a *transport.Assembly) error {
	cfg, on := a.ClusterConfig()
	if !on {
		return nil
	}
	ec, err := icluster.DialEtcd(cfg.EtcdEndpoints, cfg.EtcdTLS)
	if err != nil {
		return err
	}
	store := credit.NewEtcdStore(ec, "/omniroute/credit/"+cfg.Name+"/")
	node, err := icluster.Start(system, cfg, icluster.Options{Kinds: []*pcluster.Kind{credit.NewKind(store, a.Clock())}, Etcd: ec})
	if err != nil {
		return err
	}
	leases, err := credit.Start(system, node.Cluster(), credit.Options{Node: node.ID(), Clock: a.Clock()})
	if err != nil {
		node.Stop()
		return err
	}
	a.AttachCluster(node, leases)
	if _, err := system.Root.SpawnNamed(a.CooldownsProps(), transport.CooldownsActorName); err != nil {
		a.DetachCluster()
		leases.Stop()
		node.Stop()
		return fmt.Errorf("spawning the cluster cooldowns actor %q: %w", transport.CooldownsActorName, err)
	}
	a.ClusterJoined()
	return nil
}

// startTenants opens the store, loads the keys, starts the limiter and
// the request log writer. It runs before admission, whose ingest queue
// and lanes read the tenants' weights.
func startTenants(system *actor.ActorSystem, a *transport.Assembly) error {
	if err := a.OpenStore(); err != nil {
		return err
	}
	kh, err := keys.Spawn(system, a.KeysOptions())
	if err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	lo, err := a.AttachKeys(kh)
	if err != nil {
		return err
	}
	lh, err := tenantlimitactor.Spawn(system, lo)
	if err != nil {
		return err
	}
	a.AttachTenantLimits(lh)
	ro := a.RequestLogOptions()
	lg, err := requestlog.Spawn(system, ro)
	if err != nil {
		return err
	}
	a.AttachRequestLog(lg, ro)
	return nil
}

// startAdmission starts the resource-pressure and ingest actors on the
// budget resolved once.
func startAdmission(system *actor.ActorSystem, a *transport.Assembly) error {
	ph, err := pressureactor.Spawn(system, a.PressureOptions())
	if err != nil {
		return err
	}
	ih, err := ingest.Spawn(system, a.IngestConfig(ph))
	if err != nil {
		ph.Stop()
		return err
	}
	a.AttachAdmission(ph, ih)
	return nil
}

// startLanes starts one admission controller per upstream.
func startLanes(system *actor.ActorSystem, a *transport.Assembly) error {
	h, err := lanes.Spawn(system, a.LanesOptions())
	if err != nil {
		return err
	}
	a.AttachLanes(h)
	return nil
}

// startServices spawns the services' supervisors; attaching them builds
// the relay and waits for the auto-start services, so that the first
// request finds them up.
func startServices(system *actor.ActorSystem, a *transport.Assembly) error {
	specs, so := a.ServicesPlan()
	mgr, err := services.Start(system, specs, so)
	if err != nil {
		return err
	}
	return a.AttachServices(mgr)
}

// startHistory spawns the history actor that samples the figures the
// dashboard charts, once a second.
func startHistory(system *actor.ActorSystem, a *transport.Assembly) error {
	h, err := history.Spawn(system, a.HistoryOptions())
	if err != nil {
		return err
	}
	a.AttachHistory(h)
	return nil
}
