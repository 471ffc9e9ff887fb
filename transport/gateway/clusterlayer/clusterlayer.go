// Package clusterlayer is cluster mode's part of the composition root
// (OMNIROUTE_CLUSTER=etcd, docs/cluster.md): it settles the install
// secret tenant ids derive from (ShareInstallSecret, before the gateway
// derives one), joins the cluster (the node, its credit grains and
// leases), shares the ledger's configured budgets as credit pools, starts
// the targets' cooldowns actor and the quota sharing, and hands the
// request pipeline the port it declares (transport.Cluster) over those
// handles: Layer.
//
// The pipeline keeps the steps it runs per request (take a ledger
// reservation's or a tenant's share, settle it; transport/plan, tenants.go)
// and reaches the pools only through that port, which spends them with
// atomics (package credit) and sends no message per request.
package clusterlayer

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/actors/credit"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/clock"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/growable"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/transport/port"
)

// Port is the request pipeline's port on the cluster (port.Cluster,
// which transport holds); Layer implements it.
type Port = port.Cluster

// Share is what one request took from the cluster's pools
// (port.ClusterShare).
type Share = port.ClusterShare

// Source is what the cluster layer is built from: the gateway being
// composed (transport's Assembly), which also takes the port.
type Source interface {
	Clock() clock.Clock
	Logger() *slog.Logger
	Env() config.Env
	AttachCluster(Port)
}

// Routing is the routing actors the cluster layer joins to the cluster:
// the ledger (its slots' configured budgets become shared pools), the
// quota actors (they share telemetry with the peers) and the targets
// actor (its cooldowns actor tells the peers).
type Routing struct {
	Ledger  *ledgeractor.Handle
	Slots   []ledgeractor.SlotSpec
	Quota   *quotaactor.Handle
	Targets *targets.Handle
}

// Tenants is what the cluster's grains read tenants' budgets from (the
// tenant layer's shares; transport/gateway/tenants.Layer).
type Tenants interface {
	Shares() *ikeys.Shares
}

// Layer is this node's membership and its pools of the budgets the
// cluster shares, behind the pipeline's port.
//
// Shared today: provider request and token budgets per (connection,
// upstream model) that are configured (their rolling windows per
// minute, hour and day), and each limited tenant's concurrency cap,
// request and token windows and spend budgets. The node-local limiters
// still run as before, so a node never exceeds the whole limit alone;
// the pools add the cluster-wide bound on top. The grains this node
// hosts read their budgets from this node's own configuration and keys
// (budget).
type Layer struct {
	name   string
	node   *icluster.Node
	leases *credit.Leases
	// ledger is each ledger slot's shared pools (nil: not shared); a
	// reload adding budgets adds theirs (AddSlots).
	ledger *growable.List[sharedSlot]
	// ledgerKeys are the ledger slots by grain key base
	// ("ledger/<connection>/<model>"), for the grains' budgets.
	ledgerKeys sync.Map
	// slotLimits reads a ledger slot's configured windows (the ledger's).
	slotLimits func(slot int) (rolling.Limits, bool)
	// ten is the tenant layer once it is started (after the cluster is
	// joined, and grains may be asked before): the tenants' policies the
	// grains read their budgets from.
	ten atomic.Pointer[Tenants]

	mu      sync.Mutex // serialises tenant pool creation
	tenants atomic.Pointer[map[tenant.ID]*sharedTenant]
	clk     clock.Clock
	// cooldowns counts the cooldowns this node told its peers, the ones
	// it applied from them and the ones it could not send or read
	// (actors/targets' cooldowns actor).
	cooldowns *targets.Cluster
	// quota shares quota telemetry with the peers.
	quota *quotaactor.Cluster
}

// Config is the cluster to join, from the environment; ok is false for
// a single node (cluster mode off).
func Config(env *config.Env) (cfg icluster.Config, ok bool) {
	e := env.Cluster
	if !e.ClusterMode.On() {
		return icluster.Config{}, false
	}
	return icluster.Config{Name: e.ClusterName, EtcdEndpoints: e.EtcdEndpoints, Listen: e.ClusterListen, Advertise: e.ClusterAdvertise,
		Secret:    e.ClusterSecret,
		RemoteTLS: icluster.RemoteTLS(e.ClusterTLSCA, e.ClusterTLSCert, e.ClusterTLSKey),
		EtcdTLS:   icluster.EtcdTLS(e.EtcdTLSCA, e.EtcdTLSCert, e.EtcdTLSKey)}, true
}

// ShareInstallSecret settles, in cluster mode, the install secret tenant
// ids derive from: the cluster's, from etcd (icluster.ShareInstallSecret),
// so a config-file tenant is one tenant with one set of limits on every
// member. The member offers its own (OMNIROUTE_TENANT_SECRET, else its
// data directory's), which becomes the cluster's when etcd holds none,
// and env's OMNIROUTE_TENANT_SECRET is set to the cluster's. A member
// whose OMNIROUTE_TENANT_SECRET differs from the cluster's refuses to
// start: the operator set it on purpose, and it would split tenants. It
// runs before the gateway derives any tenant id (and builds its
// redactor, which must know the secret), and says where the secret came
// from ("" outside cluster mode).
func ShareInstallSecret(env *config.Env) (string, error) {
	c := env.Cluster
	if !c.ClusterMode.On() {
		return "", nil
	}
	own := env.Server.TenantSecret
	offer, err := tenant.LoadOrCreateSecret(own, env.ResolvedDataDir())
	if err != nil {
		return "", err
	}
	ec, err := icluster.DialEtcd(c.EtcdEndpoints, icluster.EtcdTLS(c.EtcdTLSCA, c.EtcdTLSCert, c.EtcdTLSKey))
	if err != nil {
		return "", err
	}
	defer ec.Close()
	shared, created, err := icluster.ShareInstallSecret(ec, c.ClusterName, offer)
	if err != nil {
		return "", err
	}
	if own != "" && string(shared) != own {
		return "", fmt.Errorf("OMNIROUTE_TENANT_SECRET differs from the install secret cluster %q keeps in etcd (%s): this member would give every caller "+
			"another tenant id than the other members do, and each tenant's limits would hold per member. Unset OMNIROUTE_TENANT_SECRET on this member "+
			"to use the cluster's, or set the same value on every member (to replace the cluster's, delete that etcd key while no member runs)",
			c.ClusterName, icluster.InstallSecretKey(c.ClusterName))
	}
	env.Server.TenantSecret = string(shared)
	if created {
		return "stored in etcd by this member", nil
	}
	return "etcd", nil
}

// Start joins the cluster when cluster mode is on (nil, nil when it is
// off): the node with its credit grains, whose budgets are this node's
// configuration (budget), and its credit leases, with the ledger's
// configured slots as shared pools; the targets' cooldowns actor (the
// targets actor tells it what cooled here; it tells the peers, and
// applies theirs by name); the quota sharing (this node polls the usage
// APIs of the connections it owns by rendezvous hashing of the member
// list, and its poll readings and header observations reach its peers'
// quota state). Then it hands src the port. It runs after the routing
// actors exist and before the tenant layer (Follow). On an error nothing
// it started is left running but the targets' cooldowns actor, which the
// targets actor's Stop stops.
func Start(system *actor.ActorSystem, src Source, r Routing) (*Layer, error) {
	env := src.Env()
	cfg, on := Config(&env)
	if !on {
		return nil, nil
	}
	clk, log := src.Clock(), src.Logger()
	ec, err := icluster.DialEtcd(cfg.EtcdEndpoints, cfg.EtcdTLS)
	if err != nil {
		return nil, err
	}
	store := credit.NewEtcdStore(ec, "/omniroute/credit/"+cfg.Name+"/")
	// The grains read their budgets from this node's configuration,
	// which the leases hand them (budget).
	budgets := &credit.Budgets{}
	node, err := icluster.Start(system, cfg, icluster.Options{Kinds: []*pcluster.Kind{credit.NewKind(store, clk, budgets)}, Etcd: ec})
	if err != nil {
		return nil, err
	}
	leases, err := credit.Start(system, node.Cluster(), credit.Options{Node: node.ID(), Clock: clk, Budgets: budgets})
	if err != nil {
		node.Stop()
		return nil, err
	}
	l := &Layer{name: cfg.Name, node: node, leases: leases, ledger: &growable.List[sharedSlot]{}, clk: clk}
	empty := map[tenant.ID]*sharedTenant{}
	l.tenants.Store(&empty)
	l.slotLimits = func(slot int) (rolling.Limits, bool) {
		s, ok := r.Ledger.Configured(slot)
		return s.Configured, ok
	}
	l.AddSlots(r.Slots)
	leases.Budgets().Set(l.budget)
	if l.cooldowns, err = r.Targets.StartCluster(targets.ClusterOptions{Self: node.ID(), Log: log.With("component", "cooldowns"),
		Members: memberList[targets.Member](node)}); err != nil {
		l.Stop()
		return nil, err
	}
	if l.quota, err = r.Quota.StartCluster(quotaactor.ClusterOptions{Members: memberList[quotaactor.Member](node)}); err != nil {
		l.Stop() // the targets actor's Stop (the root's Abort) stops its cooldowns actor
		return nil, err
	}
	l.joined(env, log)
	src.AttachCluster(l)
	return l, nil
}

// memberList reads the node's members as an actor's Member type: the
// cooldowns and quota actors each declare one of the same fields (they do
// not import the cluster), so one conversion serves both.
func memberList[M ~struct {
	ID, Address string
	Self        bool
}](node *icluster.Node) func() []M {
	return func() []M {
		ms := node.Members()
		out := make([]M, len(ms))
		for i, m := range ms {
			out[i] = M(m)
		}
		return out
	}
}

// joined logs the membership once the cooldowns actor runs, and warns
// when etcd, which holds the cluster's keys, budgets and install secret,
// is reached in plaintext off this host.
func (l *Layer) joined(env config.Env, log *slog.Logger) {
	c := env.Cluster
	log.Info("joined the cluster", "cluster", c.ClusterName, "member", l.node.ID(), "address", l.node.Address(), "members", len(l.node.Members()))
	if c.EtcdTLSCA != "" {
		return
	}
	for _, ep := range c.EtcdEndpoints {
		host, _, _ := net.SplitHostPort(ep)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			log.Warn("etcd is reached in plaintext off this host: whoever can reach it can issue API keys and read or change the cluster's budgets and install secret; set OMNIROUTE_CLUSTER_ETCD_CA (and _ETCD_CERT, _ETCD_KEY for an etcd that requires client certificates)", "endpoint", ep)
			return
		}
	}
}

// Etcd is the node's etcd client (the cluster's key store reads it) and
// Name the cluster's name.
func (l *Layer) Etcd() *clientv3.Client { return l.node.Etcd() }

// Name is the cluster's name.
func (l *Layer) Name() string { return l.name }

// Follow has the grains hosted here read tenants' budgets from t (the
// tenant layer, started after the cluster is joined); until then a
// tenant's grain grants nothing.
func (l *Layer) Follow(t Tenants) { l.ten.Store(&t) }

// Stop gives the node's credit back and leaves the cluster. It stops
// the actor system (protoactor's cluster shutdown does), so the gateway
// runs it last in Close.
func (l *Layer) Stop() {
	l.leases.Stop()
	l.node.Stop()
}

// budget is a grain's budget as this node configures it: a ledger
// slot's configured windows, a tenant's windows, spend budgets or cap
// from its policy. Unknown keys (a tenant this node has not heard of
// yet) are not granted.
func (l *Layer) budget(key string) (credit.Budget, bool) {
	if rest, ok := strings.CutPrefix(key, "tenant/"); ok {
		id, what, _ := strings.Cut(rest, "/")
		ts := l.ten.Load()
		if ts == nil {
			return credit.Budget{}, false
		}
		p, ok := (*ts).Shares().Policy(id)
		if !ok {
			return credit.Budget{}, false
		}
		lim := tenantlimit.LimitsOf(p)
		switch what {
		case "requests":
			return credit.Budget{Windows: lim.Rates[rolling.Requests]}, lim.Rates.Dim(rolling.Requests)
		case "tokens":
			return credit.Budget{Windows: lim.Rates[rolling.Tokens]}, lim.Rates.Dim(rolling.Tokens)
		case "concurrency":
			return credit.Budget{Limit: lim.MaxConcurrent}, lim.MaxConcurrent > 0
		case "spend/day":
			return credit.Budget{Limit: lim.DailyBudget / credit.SpendUnit, Period: credit.PerDay}, lim.DailyBudget > 0
		case "spend/month":
			return credit.Budget{Limit: lim.MonthlyBudget / credit.SpendUnit, Period: credit.PerMonth}, lim.MonthlyBudget > 0
		}
		return credit.Budget{}, false
	}
	for d := range rolling.NumDims {
		base, ok := strings.CutSuffix(key, "/"+d.String())
		if !ok {
			continue
		}
		v, ok := l.ledgerKeys.Load(base)
		if !ok {
			return credit.Budget{}, false
		}
		lim, ok := l.slotLimits(v.(int))
		return credit.Budget{Windows: lim[d]}, ok && lim.Dim(d)
	}
	return credit.Budget{}, false
}

// Summary is the operator APIs' view of the cluster.
func (l *Layer) Summary() map[string]any {
	return map[string]any{"name": l.name, "self": l.node.ID(), "members": l.node.Members()}
}

// Health is the cluster section of the health report: this node, the
// members it sees (degraded while it sees none) and its pools.
func (l *Layer) Health() (any, string) {
	ms := l.node.Members()
	status := "ok"
	if len(ms) == 0 {
		status = "degraded"
	}
	return map[string]any{
		"mode": "etcd", "name": l.name, "self": l.node.ID(), "address": l.node.Address(),
		"members": ms, "trust": l.node.Trust(), "credit": l.leases.Snapshot(),
		"cooldowns": cooldownCounts(l.cooldowns),
		"quota":     l.quotaStats(),
	}, status
}

// Brief is the cluster section for callers the management routes
// refuse: the cluster's name and how many members this node sees, not
// their addresses, ids or the credit grains.
func (l *Layer) Brief(body any) any { return brief(body) }

func brief(body any) any {
	full, _ := body.(map[string]any)
	n := 0
	if ms, ok := full["members"].([]icluster.Member); ok {
		n = len(ms)
	}
	return map[string]any{"mode": full["mode"], "name": full["name"], "memberCount": n,
		"detail": "members, addresses and credit are shown to callers allowed on the management routes (loopback, or the management key)"}
}

// cooldownCounts is the cluster section's cooldowns entry.
func cooldownCounts(c *targets.Cluster) map[string]int64 {
	var sent, heard, dropped int64
	if c != nil {
		sent, heard, dropped = c.Counts()
	}
	return map[string]int64{"sent": sent, "heard": heard, "dropped": dropped}
}

// quotaStats is health's cluster.quota: readings sent to and heard from
// peers, and the connections this node polls.
func (l *Layer) quotaStats() quotaactor.ClusterStats {
	if l.quota == nil {
		return quotaactor.ClusterStats{Polling: []string{}}
	}
	return l.quota.Stats()
}
