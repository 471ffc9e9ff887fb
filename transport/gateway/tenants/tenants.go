// Package tenants is the tenant layer's part of the composition root: it
// opens the keys' store (the node's own, or in cluster mode the cluster's
// etcd key store, copying this node's keys there first), spawns the keys
// actor, the tenant limiter (seeded with what budgeted tenants already
// spent), the tenants' shares follower and the request log writer, links
// them by subscriptions, and hands the request pipeline the port it
// declares (transport.Tenants) over their handles: Layer.
//
// The pipeline keeps the steps it runs per request (identify, reserve,
// settle, log; transport/tenants.go) and reaches the actors only through
// that port; nothing here runs on a request.
package tenants

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/actors/requestlog"
	tenantlimitactor "github.com/omniroute/gateway/actors/tenantlimit"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/etcdkeys"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// Port is the request pipeline's port on the tenant layer (port.Tenants,
// which transport holds); Layer implements it.
type Port = port.Tenants

// Source is what the tenant layer is built from: the gateway being
// composed (transport's Assembly), which also takes the port.
type Source interface {
	Clock() clock.Clock
	Logger() *slog.Logger
	// Store is the node's store (the data directory's, or the host's):
	// keys on a single node, the request log and usage always.
	Store() store.Store
	Env() config.Env
	// RequestLogLines is the logger the request log writes its lines to
	// when OMNIROUTE_REQUEST_LOG includes stdout: on the embedder's
	// output (stdout by default), in the gateway's log format, behind the
	// one redaction path every log line goes through (internal/sanitize).
	RequestLogLines() *slog.Logger
	// KeysConfig is the config in force's tenant resolver and tenants.
	KeysConfig() (*tenant.Resolver, []keys.ConfigTenant)
	AttachTenants(Port)
}

// Cluster is the cluster the node joined: its etcd client holds the
// cluster's keys. The zero value is a single node.
type Cluster struct {
	Etcd *clientv3.Client
	Name string
}

// Layer is the tenant layer's actors behind the pipeline's port.
type Layer struct {
	db         store.Store
	sharedKeys *etcdkeys.Store // cluster mode; nil on a single node
	stopWatch  func()          // the watch of sharedKeys; nil when none
	keys       *keys.Handle
	limits     *tenantlimitactor.Handle
	log        *requestlog.Handle
	stopShares func()
	// logOn: the request log takes records; then every request reads the
	// provider's usage report, so its tokens and cost can be logged.
	logOn bool
	// shares are the tenants' weights and policies, published by the
	// shares follower from every key snapshot (shares.go).
	shares atomic.Pointer[ikeys.Shares]
	clk    clock.Clock
}

// Start builds the tenant layer on src's store and hands src the port:
// the keys actor on the keys' store (in cluster mode etcd, with this
// node's own keys copied there first, and a watch that reloads the keys
// on every change there), the tenant limiter (the tenants of the keys
// loaded, with what those with budgets spent today and this month: a
// store that cannot be read stops start-up), the shares follower, and
// the request log writer. The limiter and the follower are subscribers
// of the keys actor: the keys actor only sends, and a key operation
// returns once both took its snapshot. On an error nothing it started
// is left running.
func Start(system *actor.ActorSystem, src Source, cl Cluster) (err error) {
	clk, log := src.Clock(), src.Logger()
	l := &Layer{db: src.Store(), clk: clk}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	var ks store.KeyStore = l.db
	if cl.Etcd != nil {
		if ks, err = l.openSharedKeys(cl, log.With("component", "keys")); err != nil {
			return err
		}
	}
	res, cfg := src.KeysConfig()
	if l.keys, err = keys.Spawn(system, keys.Options{Store: ks, Resolver: res, Config: cfg, Clock: clk, Log: log.With("component", "keys")}); err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	if l.sharedKeys != nil {
		l.stopWatch = watchKeys(l.sharedKeys.Watch, l.keys.Reload)
	}
	specs, err := l.specs(l.keys.Snapshot())
	if err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	if l.limits, err = tenantlimitactor.Spawn(system, tenantlimitactor.Options{Clock: clk, Tenants: specs, Spend: l.spend,
		SpendTimeout: spendTimeout, Log: log.With("component", "tenantlimit")}); err != nil {
		return err
	}
	// The limiter follows the keys: every snapshot the keys actor
	// publishes (from the one in force now) reaches it as a message, and
	// key operations return once it took theirs. The keys actor only
	// sends; the limiter reads what new tenants spent off both actors.
	if err := l.keys.Subscribe(l.limits.PID()); err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	// So do the tenants' shares, which admission (started after the
	// tenant layer) weighs by and the cluster's grains read budgets from.
	if _, l.stopShares, err = followShares(system, l.keys, &l.shares); err != nil {
		return err
	}
	ro := requestLogOptions(src)
	if l.log, err = requestlog.Spawn(system, ro); err != nil {
		return err
	}
	l.logOn = ro.Store != nil || ro.Lines != nil
	src.AttachTenants(l)
	return nil
}

// migrateTimeout bounds copying a node's own keys into etcd at start-up.
const migrateTimeout = 30 * time.Second

// openSharedKeys makes the cluster's etcd key store the keys' store and
// copies the keys this node kept on its own into it, create-if-absent: a
// node that ran alone before joining keeps its keys working, now on every
// node. A name etcd already holds is never overwritten (etcd is the
// cluster's record; Migrate logs a disagreement by name and hash prefix).
// The node's own copies stay where they were, unused while in cluster
// mode. A failure stops start-up: serving with keys missing would refuse
// callers for no reason they could see.
func (l *Layer) openSharedKeys(cl Cluster, log *slog.Logger) (store.KeyStore, error) {
	ks := etcdkeys.New(cl.Etcd, cl.Name, etcdkeys.Options{Log: log})
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	local, err := l.db.Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot start: reading this node's keys to copy them to the cluster: %w", err)
	}
	m, err := ks.Migrate(ctx, local, log)
	if err != nil {
		return nil, fmt.Errorf("cannot start: %w", err)
	}
	if m.Copied > 0 || m.Conflicts > 0 {
		log.Info("copied this node's API keys to the cluster's key store", "copied", m.Copied, "alreadyThere", m.Present, "conflicts", m.Conflicts, "etcdPrefix", etcdkeys.Prefix(cl.Name))
	}
	l.sharedKeys = ks
	return ks, nil
}

// watchKeys links the cluster's key store to the keys actor (cluster
// mode): it runs watch, a goroutine of the root's and not an actor (it
// only forwards, and nothing it holds needs supervising: it
// re-establishes itself after an etcd outage), which calls reload (the
// keys actor's Reload, coalesced) on every change, so keys are the same
// on every node. It returns the stop, which ends the watch and waits for
// it; Stop runs it before the keys actor stops and before the cluster
// closes the etcd client it reads.
func watchKeys(watch func(ctx context.Context, onChange func()), reload func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx, reload)
	}()
	return func() { cancel(); <-done }
}

// requestLogOptions are the request log writer's options: its lines
// (redacted) on stdout and its rows in the store, as
// OMNIROUTE_REQUEST_LOG says.
func requestLogOptions(src Source) requestlog.Options {
	env := src.Env()
	mode := env.RequestLog.Mode
	var lines *slog.Logger
	if mode.Stdout() {
		lines = src.RequestLogLines().With("component", "requestlog")
	}
	var ls store.LogStore
	if mode.DB() {
		ls = src.Store()
	}
	return requestlog.Options{Store: ls, Lines: lines, Log: src.Logger().With("component", "requestlog"), Clock: src.Clock(), Retention: env.RequestLog.RetentionDays.Duration()}
}

// specs are the limiter's tenants at start-up: every active key with its
// policy, and for those with budgets, what they spent today and this
// month (from the usage aggregates), so that a restart does not forget
// spend. Tenants that later key changes add are seeded by the limiter
// itself (Options.Spend), off the keys actor.
func (l *Layer) specs(s *ikeys.Snapshot) ([]tenantlimitactor.TenantSpec, error) {
	out := tenantlimitactor.SpecsOf(s)
	var day, month map[string]int64
	for i := range out {
		sp := &out[i]
		if !tenantlimitactor.HasBudget(&sp.Policy) {
			continue
		}
		if day == nil {
			ctx, cancel := context.WithTimeout(context.Background(), spendTimeout)
			var err error
			day, month, err = l.spend(ctx, l.clk.Now())
			cancel()
			if err != nil {
				return nil, err
			}
		}
		id := sp.ID.String()
		sp.DaySpent, sp.MonthSpent = day[id], month[id]
	}
	return out, nil
}

// spendTimeout bounds one read of the tenants' spend.
const spendTimeout = 10 * time.Second

// spend reads each tenant's spend today and this month as of at, from the
// usage aggregates (tenantlimitactor.SpendFunc).
func (l *Layer) spend(ctx context.Context, at time.Time) (day, month map[string]int64, err error) {
	now := at.UTC()
	if day, err = l.db.Spend(ctx, tenantlimit.DayEnd(tenantlimit.DayIndex(now)-1)); err != nil {
		return nil, nil, fmt.Errorf("reading today's spend for the budgets: %w", err)
	}
	if month, err = l.db.Spend(ctx, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)); err != nil {
		return nil, nil, fmt.Errorf("reading this month's spend for the budgets: %w", err)
	}
	return day, month, nil
}

// Stop flushes the request log and stops the tenant actors and the watch
// (the database is the composition root's to close, after this).
func (l *Layer) Stop() {
	if l.log != nil {
		l.log.Stop()
	}
	if l.stopWatch != nil {
		// Before the keys actor, which it sends to, and before the
		// cluster closes the etcd client it reads.
		l.stopWatch()
	}
	if l.keys != nil {
		l.keys.Stop()
	}
	if l.stopShares != nil {
		l.stopShares()
	}
	if l.limits != nil {
		l.limits.Stop()
	}
}

// The port (Port), over the actors' handles.

// Keys is the key snapshot in force (one atomic load).
func (l *Layer) Keys() *ikeys.Snapshot { return l.keys.Snapshot() }

// Shares are the tenants' weights and policies in force (one atomic
// load; nil until the follower published the first).
func (l *Layer) Shares() *ikeys.Shares { return l.shares.Load() }

// Reserve checks and reserves req against tenant id's limits (no
// message; tenantlimit.Handle.Reserve).
func (l *Layer) Reserve(id tenant.ID, req *tenantlimit.Request, now time.Time) (tenantlimit.Reservation, tenantlimit.Result) {
	return l.limits.Reserve(id, req, now)
}

// Settle settles a reservation from what the request used.
func (l *Layer) Settle(res *tenantlimit.Reservation, u tenantlimit.Usage, now time.Time) {
	l.limits.Settle(res, u, now)
}

// Logging reports whether the request log takes records.
func (l *Layer) Logging() bool { return l.logOn }

// Log hands the request log writer a copy of r without blocking (a full
// queue drops and counts it).
func (l *Layer) Log(r *store.Record, requestID, tenantID []byte) { l.log.Log(r, requestID, tenantID) }

// Refused counts a request refused before its tenant's limits took it.
func (l *Layer) Refused(tenantID []byte, tenantName, code string) {
	l.log.Refused(tenantID, tenantName, code)
}

// Create issues a key (the keys actor; its secret is returned once).
func (l *Layer) Create(name string, p tenantpolicy.Policy) (ikeys.Info, string, error) {
	return l.keys.Create(name, p)
}

// UpdatePolicy replaces a key's policy.
func (l *Layer) UpdatePolicy(name string, p tenantpolicy.Policy) (ikeys.Info, error) {
	return l.keys.UpdatePolicy(name, p)
}

// Rotate gives a key a new secret.
func (l *Layer) Rotate(name string) (ikeys.Info, string, error) { return l.keys.Rotate(name) }

// Revoke stops a key from working.
func (l *Layer) Revoke(name string) (ikeys.Info, error) { return l.keys.Revoke(name) }

// SetConfig replaces the config-file tenants (a config reload); they are
// in force when it returns.
func (l *Layer) SetConfig(cfg []keys.ConfigTenant) error { return l.keys.SetConfig(cfg) }

// Limiter is the tenant limiter's handle (tests read its snapshot).
func (l *Layer) Limiter() *tenantlimitactor.Handle { return l.limits }

// Windows are the tenant limiter's windows, as the operator APIs show
// them.
func (l *Layer) Windows() []ops.LimitWindow {
	out := []ops.LimitWindow{}
	s := l.limits.Snapshot()
	if s == nil {
		return out
	}
	for _, tv := range s.Tenants {
		for _, w := range tv.Windows {
			out = append(out, ops.LimitWindow{Kind: "tenant", Budget: tv.Name, Dimension: w.Dimension, Period: w.Period,
				Limit: w.Limit, Used: w.Used, Remaining: w.Remaining, ResetMs: w.ResetMs})
		}
	}
	return out
}

// Health is the tenants section of the health report: keys, the
// limiter's tenants, and the request log writer (degraded while writes
// fail: serving goes on, records are counted as failed); in cluster mode
// whether the watch of the keys in etcd is live (degraded while not).
func (l *Layer) Health() (any, string) {
	h := l.log.Health()
	status := "ok"
	if h.Failing {
		status = "degraded"
	}
	limited := 0
	if s := l.limits.Snapshot(); s != nil {
		limited = len(s.Tenants)
	}
	out := map[string]any{"activeKeys": len(l.keys.Snapshot().Active()), "limitedTenants": limited, "requestLog": h, "keyStore": "local",
		"windows": l.Windows()}
	if ks := l.sharedKeys; ks != nil {
		// Degraded while the watch is down: keys keep working, but
		// changes made on other nodes are not seen here and management
		// answers 503.
		out["keyStore"], out["keysWatching"] = "etcd", ks.Watching()
		if !ks.Watching() {
			status = "degraded"
		}
	}
	return out, status
}

// Brief is the tenants section for callers the management routes would
// refuse: without the tenants' names and windows.
func (l *Layer) Brief(body any) any { return brief(body) }

func brief(body any) any {
	m, ok := body.(map[string]any)
	if !ok {
		return body
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "windows" {
			out[k] = v
		}
	}
	return out
}
