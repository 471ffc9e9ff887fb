package transport

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/actors/credit"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/internal/clock"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/growable"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
)

// clusterSys is cluster mode (OMNIROUTE_CLUSTER=etcd, docs/cluster.md):
// this node's membership and its pools of the budgets the cluster shares.
// nil in single-node mode, where none of it exists and the request path
// checks one pointer.
//
// Shared today: provider request and token budgets per (connection,
// upstream model) that are configured (their rolling windows per minute,
// hour and day), and each limited tenant's concurrency cap, request and
// token windows and spend budgets. The node-local limiters still run as
// before, so a node never exceeds the whole limit alone; the pools add the
// cluster-wide bound on top. The grains this node hosts read their
// budgets from this node's own configuration and keys (budget).
type clusterSys struct {
	node   *icluster.Node
	leases *credit.Leases
	// ledger is each ledger slot's shared pools (nil: not shared); a
	// reload adding budgets adds theirs (addSlots).
	ledger *growable.List[sharedSlot]
	// ledgerKeys are the ledger slots by grain key base
	// ("ledger/<connection>/<model>"), for the grains' budgets.
	ledgerKeys sync.Map
	// slotLimits reads a ledger slot's configured windows (the ledger's).
	slotLimits func(slot int) (rolling.Limits, bool)
	// ten is the tenant layer's port once it is attached (the root starts
	// the layer after the cluster is joined, and grains may be asked
	// before): the tenants' policies the grains read their budgets from.
	ten atomic.Pointer[Tenants]

	mu      sync.Mutex // serialises tenant pool creation
	tenants atomic.Pointer[map[tenant.ID]*sharedTenant]
	clk     clock.Clock
	// cooldowns counts the cooldowns this node told its peers, the ones
	// it applied from them and the ones it could not send or read
	// (actors/targets' cooldowns actor; AttachCooldowns).
	cooldowns CooldownCounts
	// quota shares quota telemetry with the peers (ShareQuota); nil until
	// then.
	quota *quotaactor.Cluster
}

// firstLeaseWait bounds how long a request waits for a cold pool's first
// lease (one grain call, whose own timeout is 2 s). Only a pool's first
// requests on a node wait this long; after its first answer an empty pool
// refuses at once, or after the short waits take describes.
const firstLeaseWait = 2 * time.Second

// takeWait bounds how long take waits, after a pool's first answer, for
// the grain's answers: two grain calls' time, so a call that failed (a
// grain moving to another member, an answer lost) is followed by one more.
const takeWait = 2 * firstLeaseWait

// take spends n of p's credit. A refusal carries the grain's word on when
// the budget has room for n, never a guess:
//   - a cold pool waits for its first lease;
//   - an empty pool whose grain has not said when there is room (the
//     answer that came brought credit others took, or the wait it gave
//     has passed) asks the grain and waits for its answer, rather than
//     refuse with a guess of one round trip;
//   - an empty pool whose grain said when there is room refuses at once
//     with that moment, however near. Room that appears then goes to
//     whichever node asks first (no node queues for it), as a provider's
//     own Retry-After does: the word is true when given, and waiting for
//     the unit instead only made callers wait and, when another node took
//     it, refuse with the window's next span (docs/cluster.md).
//
// All of it within takeWait: a grain that stays silent that long leaves
// the refusal with the pool's latest word.
func (cs *clusterSys) take(p *credit.Pool, now time.Time, n int64) (uint64, bool, time.Time) {
	idx, ok, retry := p.Take(now, n)
	if !ok && p.WaitFirst(firstLeaseWait) {
		idx, ok, retry = p.Take(cs.clk.Now(), n)
	}
	for deadline := time.Now().Add(takeWait); !ok && time.Until(deadline) > 0; {
		if _, said := p.Word(cs.clk.Now()); said {
			break // no room before then: the refusal says so
		}
		answered := p.Ask(n, time.Until(deadline))
		idx, ok = p.TryTake(cs.clk.Now(), n)
		if _, said := p.Word(cs.clk.Now()); !ok && !answered && !said {
			break // the lease actor made no call: nothing more to learn
		}
	}
	if !ok {
		retry = p.RetryAt(cs.clk.Now())
	}
	return idx, ok, retry
}

// takeSlot takes one of p's slots, waiting for the first lease when p is
// still cold.
func (cs *clusterSys) takeSlot(p *credit.Pool, now time.Time) bool {
	return p.TakeSlot(now) || p.WaitFirst(firstLeaseWait) && p.TakeSlot(cs.clk.Now())
}

type sharedSlot struct{ tokens, requests *credit.Pool }

// pool is the slot's pool of dimension d.
func (s *sharedSlot) pool(d rolling.Dim) *credit.Pool {
	if d == rolling.Tokens {
		return s.tokens
	}
	return s.requests
}

// sharedTenant is a limited tenant's cluster pools and the limits they
// were made for (a changed policy makes new ones).
type sharedTenant struct {
	lim            tenantlimit.Limits
	conc, rpm, tpm *credit.Pool
	// day and month are the spend budgets, in credit.SpendUnit.
	day, month *credit.Pool
}

// sharedRes is what a request took from the cluster pools, given back at
// settle. Zero when nothing was taken.
type sharedRes struct {
	// tokWin and reqWin are the pools' tickets for what was taken.
	tokWin, reqWin uint64
	tokens         int64
	request        bool
	slot           *credit.Pool // concurrency, tenant only
	tok, reqP      *credit.Pool
	tokenTaken     bool
	// spend: the cost estimate taken from the day and month pools (tenant
	// only), in their units, and the windows it was taken from.
	spend [2]spendRes
}

type spendRes struct {
	p     *credit.Pool
	win   uint64
	units int64
}

// ClusterConfig is the cluster to join, from the environment; ok is
// false for a single node (cluster mode off).
func (a *Assembly) ClusterConfig() (cfg icluster.Config, ok bool) {
	e := a.g.opts.Env.Cluster
	if !e.ClusterMode.On() {
		return icluster.Config{}, false
	}
	return icluster.Config{Name: e.ClusterName, EtcdEndpoints: e.EtcdEndpoints, Listen: e.ClusterListen, Advertise: e.ClusterAdvertise,
		Secret:    e.ClusterSecret,
		RemoteTLS: icluster.RemoteTLS(e.ClusterTLSCA, e.ClusterTLSCert, e.ClusterTLSKey),
		EtcdTLS:   icluster.EtcdTLS(e.EtcdTLSCA, e.EtcdTLSCert, e.EtcdTLSKey)}, true
}

// shareInstallSecret settles, in cluster mode, the install secret tenant
// ids derive from: the cluster's, from etcd (icluster.ShareInstallSecret),
// so a config-file tenant is one tenant with one set of limits on every
// member. The member offers its own (OMNIROUTE_TENANT_SECRET, else its
// data directory's), which becomes the cluster's when etcd holds none. A
// member whose OMNIROUTE_TENANT_SECRET differs from the cluster's refuses
// to start: the operator set it on purpose, and it would split tenants.
// It says where the secret came from ("" outside cluster mode).
func (g *Gateway) shareInstallSecret() (string, error) {
	e := &g.opts.Env
	c := e.Cluster
	if !c.ClusterMode.On() {
		return "", nil
	}
	own := e.Server.TenantSecret
	offer, err := tenant.LoadOrCreateSecret(own, e.ResolvedDataDir())
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
	e.Server.TenantSecret = string(shared)
	if created {
		return "stored in etcd by this member", nil
	}
	return "etcd", nil
}

// AttachCluster hands the front end the joined node and its credit
// leases: the ledger's slots (PlanRouting ran first) become shared pools.
// The cooldowns actor is spawned next (AttachCooldowns); when that fails,
// DetachCluster undoes this.
func (a *Assembly) AttachCluster(node *icluster.Node, leases *credit.Leases) {
	g := a.g
	cs := &clusterSys{node: node, leases: leases, ledger: &growable.List[sharedSlot]{}, clk: g.clk}
	empty := map[tenant.ID]*sharedTenant{}
	cs.tenants.Store(&empty)
	cs.slotLimits = func(slot int) (rolling.Limits, bool) {
		s, ok := g.qs.ledger.Configured(slot)
		return s.Configured, ok
	}
	cs.addSlots(g.qs.slots)
	leases.Budgets().Set(cs.budget)
	g.cs = cs
}

// budget is a grain's budget as this node configures it: a ledger
// slot's configured windows, a tenant's windows, spend budgets or cap
// from its policy. Unknown keys (a tenant this node has not heard of
// yet) are not granted.
func (cs *clusterSys) budget(key string) (credit.Budget, bool) {
	if rest, ok := strings.CutPrefix(key, "tenant/"); ok {
		id, what, _ := strings.Cut(rest, "/")
		ts := cs.ten.Load()
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
		v, ok := cs.ledgerKeys.Load(base)
		if !ok {
			return credit.Budget{}, false
		}
		l, ok := cs.slotLimits(v.(int))
		return credit.Budget{Windows: l[d]}, ok && l.Dim(d)
	}
	return credit.Budget{}, false
}

// DetachCluster forgets the node AttachCluster gave, without stopping
// it: the composition root that spawned it stops it.
func (a *Assembly) DetachCluster() { a.g.cs = nil }

// CooldownCounts is the cluster cooldowns actor as the health section
// reads it (*actors/targets.Cluster): the cooldowns told to the peers,
// applied from them, and dropped (could not be sent or read). An alias
// of the literal, so the composition root's interface names the same
// type without importing this package.
type CooldownCounts = interface {
	Counts() (sent, heard, dropped int64)
}

// AttachCooldowns hands the front end the cluster cooldowns actor the
// composition root spawned (the targets actor's cooldown subscriber),
// for the health section's counts.
func (a *Assembly) AttachCooldowns(c CooldownCounts) { a.g.cs.cooldowns = c }

// ShareQuota starts sharing quota telemetry with the other members
// (actors/quota's cluster actor, under quotaactor.PeersActorName): this
// node polls the usage APIs of the connections it owns by rendezvous
// hashing of the member list, and its poll readings and header
// observations reach its peers' quota state. It runs after
// AttachCluster; on an error the composition root undoes the cluster.
func (a *Assembly) ShareQuota() error {
	g := a.g
	node := g.cs.node
	cl, err := g.qs.quota.StartCluster(quotaactor.ClusterOptions{Members: func() []quotaactor.Member {
		ms := node.Members()
		out := make([]quotaactor.Member, len(ms))
		for i, m := range ms {
			out[i] = quotaactor.Member{ID: m.ID, Address: m.Address, Self: m.Self}
		}
		return out
	}})
	if err != nil {
		return err
	}
	g.cs.quota = cl
	return nil
}

// cooldownCounts is the cluster section's cooldowns entry.
func cooldownCounts(c CooldownCounts) map[string]int64 {
	var sent, heard, dropped int64
	if c != nil {
		sent, heard, dropped = c.Counts()
	}
	return map[string]int64{"sent": sent, "heard": heard, "dropped": dropped}
}

// ClusterJoined logs the membership once the cooldowns actor runs, and
// warns when etcd, which holds the cluster's keys, budgets and install
// secret, is reached in plaintext off this host.
func (a *Assembly) ClusterJoined() {
	g, node := a.g, a.g.cs.node
	c := g.opts.Env.Cluster
	g.log.Info("joined the cluster", "cluster", c.ClusterName, "member", node.ID(), "address", node.Address(), "members", len(node.Members()))
	if c.EtcdTLSCA != "" {
		return
	}
	for _, ep := range c.EtcdEndpoints {
		host, _, _ := net.SplitHostPort(ep)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			g.log.Warn("etcd is reached in plaintext off this host: whoever can reach it can issue API keys and read or change the cluster's budgets and install secret; set OMNIROUTE_CLUSTER_ETCD_CA (and _ETCD_CERT, _ETCD_KEY for an etcd that requires client certificates)", "endpoint", ep)
			return
		}
	}
}

// addSlots shares the next ledger slots' budgets with the cluster.
func (cs *clusterSys) addSlots(slots []ledgeractor.SlotSpec) {
	for _, s := range slots {
		var sl sharedSlot
		key := "ledger/" + s.Connection + "/" + s.Model
		cs.ledgerKeys.Store(key, cs.ledger.Len())
		if s.Configured.Dim(rolling.Tokens) {
			sl.tokens = cs.leases.Rolling(key+"/tokens", s.Configured[rolling.Tokens])
		}
		if s.Configured.Dim(rolling.Requests) {
			sl.requests = cs.leases.Rolling(key+"/requests", s.Configured[rolling.Requests])
		}
		cs.ledger.Append(sl)
	}
}

// stopCluster gives the node's credit back and leaves the cluster. It
// stops the actor system (protoactor's cluster shutdown does), so it runs
// last in Close.
func (g *Gateway) stopCluster() {
	if g.cs == nil {
		return
	}
	g.cs.leases.Stop()
	g.cs.node.Stop()
}

// takeLedger takes a ledger reservation's share from slot's cluster pools
// (nothing when the slot is not shared). On refusal it says when to try
// again.
func (cs *clusterSys) takeLedger(r *sharedRes, slot int, tokens int64, now time.Time) (bool, time.Time) {
	*r = sharedRes{}
	sl, ok := cs.ledger.Get(slot)
	if !ok {
		return true, time.Time{}
	}
	if sl.tokens != nil {
		idx, ok, retry := cs.take(sl.tokens, now, tokens)
		if !ok {
			return false, retry
		}
		r.tokWin, r.tok, r.tokens, r.tokenTaken = idx, sl.tokens, tokens, true
	}
	if sl.requests != nil {
		idx, ok, retry := cs.take(sl.requests, now, 1)
		if !ok {
			cs.give(r, 0, 0, true)
			return false, retry
		}
		r.reqWin, r.reqP, r.request = idx, sl.requests, true
	}
	return true, time.Time{}
}

// give settles what r took: actual tokens were used and cost nano-dollars
// (more than taken is charged without refusing), refund gives the request
// back too.
func (cs *clusterSys) give(r *sharedRes, actual, cost int64, refund bool) {
	for i := range r.spend {
		sp := &r.spend[i]
		if sp.p == nil {
			continue
		}
		used := sp.p.Units(cost)
		if refund {
			used = 0
		}
		if d := sp.units - used; d > 0 {
			sp.p.Give(sp.win, d)
		} else {
			sp.p.Charge(sp.win, -d)
		}
	}
	if r.tokenTaken {
		if refund {
			actual = 0
		}
		if d := r.tokens - actual; d > 0 {
			r.tok.Give(r.tokWin, d)
		} else {
			r.tok.Charge(r.tokWin, -d)
		}
	}
	if r.request && refund {
		r.reqP.Give(r.reqWin, 1)
	}
	if r.slot != nil {
		r.slot.GiveSlot()
	}
	*r = sharedRes{}
}

// tenant returns e's cluster pools, creating them when the tenant is new
// or its limits changed (once per tenant and policy, not per request).
func (cs *clusterSys) tenant(e *ikeys.Entry) *sharedTenant {
	lim := tenantlimit.LimitsOf(e.Policy)
	lim.Policy = nil
	if st := (*cs.tenants.Load())[e.TenantID]; st != nil && st.lim == lim {
		return st
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := *cs.tenants.Load()
	if st := m[e.TenantID]; st != nil && st.lim == lim {
		return st
	}
	key := "tenant/" + e.TenantID.String()
	st := &sharedTenant{lim: lim}
	if lim.MaxConcurrent > 0 {
		st.conc = cs.leases.Slots(key+"/concurrency", lim.MaxConcurrent)
	}
	if lim.Rates.Dim(rolling.Requests) {
		st.rpm = cs.leases.Rolling(key+"/requests", lim.Rates[rolling.Requests])
	}
	if lim.Rates.Dim(rolling.Tokens) {
		st.tpm = cs.leases.Rolling(key+"/tokens", lim.Rates[rolling.Tokens])
	}
	if lim.DailyBudget > 0 {
		st.day = cs.leases.Budget(key+"/spend/day", lim.DailyBudget, credit.PerDay, credit.SpendUnit)
	}
	if lim.MonthlyBudget > 0 {
		st.month = cs.leases.Budget(key+"/spend/month", lim.MonthlyBudget, credit.PerMonth, credit.SpendUnit)
	}
	next := make(map[tenant.ID]*sharedTenant, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[e.TenantID] = st
	cs.tenants.Store(&next)
	return st
}

// takeTenant takes a tenant's request from its cluster pools: a slot, a
// request, the token estimate and the cost estimate (nano-dollars). On
// refusal it names the limit.
func (cs *clusterSys) takeTenant(r *sharedRes, e *ikeys.Entry, tokens, cost int64, now time.Time) (tenantlimit.Kind, time.Time) {
	*r = sharedRes{}
	st := cs.tenant(e)
	if st.conc != nil {
		if !cs.takeSlot(st.conc, now) {
			return tenantlimit.KindConcurrency, now.Add(time.Second)
		}
		r.slot = st.conc
	}
	if st.rpm != nil {
		idx, ok, retry := cs.take(st.rpm, now, 1)
		if !ok {
			cs.give(r, 0, 0, true)
			return rateKind(st.rpm, rolling.Requests, now), retry
		}
		r.reqWin, r.reqP, r.request = idx, st.rpm, true
	}
	if st.tpm != nil {
		idx, ok, retry := cs.take(st.tpm, now, tokens)
		if !ok {
			cs.give(r, 0, 0, true)
			return rateKind(st.tpm, rolling.Tokens, now), retry
		}
		r.tokWin, r.tok, r.tokens, r.tokenTaken = idx, st.tpm, tokens, true
	}
	for i, b := range [2]struct {
		p          *credit.Pool
		spent, out tenantlimit.Kind
	}{{st.day, tenantlimit.KindDailyBudget, tenantlimit.KindDailyBudgetHeld}, {st.month, tenantlimit.KindMonthlyBudget, tenantlimit.KindMonthlyBudgetHeld}} {
		if b.p == nil {
			continue
		}
		units := b.p.Units(cost)
		idx, ok, retry := cs.take(b.p, now, units)
		if !ok {
			cs.give(r, 0, 0, true)
			if b.p.Spent(now) {
				// The grain has granted the whole budget for the period:
				// what is left of it sits in other nodes' pools or was
				// spent. Either way it is used up for this period.
				return b.spent, retry
			}
			// Credit is on its way, or held by requests in flight here.
			return b.out, retry
		}
		r.spend[i] = spendRes{p: b.p, win: idx, units: units}
	}
	return tenantlimit.KindNone, time.Time{}
}

// takeTenantRequest takes one request of a limited tenant's shared
// request windows for a call that generates nothing (chargeRequest); it
// is never given back.
func (cs *clusterSys) takeTenantRequest(e *ikeys.Entry, now time.Time) (tenantlimit.Kind, time.Time) {
	st := cs.tenant(e)
	if st.rpm == nil {
		return tenantlimit.KindNone, time.Time{}
	}
	if _, ok, retry := cs.take(st.rpm, now, 1); !ok {
		return rateKind(st.rpm, rolling.Requests, now), retry
	}
	return tenantlimit.KindNone, time.Time{}
}

// rateKind names the window of p that refused: the tightest one, as its
// grain last said.
func rateKind(p *credit.Pool, d rolling.Dim, now time.Time) tenantlimit.Kind {
	b, _ := p.Bucket(now)
	return tenantlimit.RateKind(d, b.Period)
}

// tenantWindows puts the cluster's view of a tenant's tightest request
// and token windows in r where it has less left than this node's own
// (the rate-limit headers in cluster mode).
func (cs *clusterSys) tenantWindows(e *ikeys.Entry, r *tenantlimit.Result) {
	st := cs.tenant(e)
	for d, p := range [rolling.NumDims]*credit.Pool{rolling.Requests: st.rpm, rolling.Tokens: st.tpm} {
		if p == nil {
			continue
		}
		if b, ok := p.Bucket(r.Now); ok {
			r.Tighter(rolling.Dim(d), b)
		}
	}
}

// clusterHealth is the health section: this node, the members it sees and
// its pools.
func (g *Gateway) clusterHealth() (any, string) {
	cs := g.cs
	ms := cs.node.Members()
	status := "ok"
	if len(ms) == 0 {
		status = "degraded"
	}
	return map[string]any{
		"mode": "etcd", "name": g.opts.Env.Cluster.ClusterName, "self": cs.node.ID(), "address": cs.node.Address(),
		"members": ms, "trust": cs.node.Trust(), "credit": cs.leases.Snapshot(),
		"cooldowns": cooldownCounts(cs.cooldowns),
		"quota":     cs.quotaStats(),
	}, status
}

// briefCluster is the cluster section for callers the management routes
// refuse: the cluster's name and how many members this node sees, not
// their addresses, ids or the credit grains.
func briefCluster(body any) any {
	full, _ := body.(map[string]any)
	n := 0
	if ms, ok := full["members"].([]icluster.Member); ok {
		n = len(ms)
	}
	return map[string]any{"mode": full["mode"], "name": full["name"], "memberCount": n,
		"detail": "members, addresses and credit are shown to callers allowed on the management routes (loopback, or the management key)"}
}

// quotaStats is health's cluster.quota: readings sent to and heard from
// peers, and the connections this node polls.
func (cs *clusterSys) quotaStats() quotaactor.ClusterStats {
	if cs.quota == nil {
		return quotaactor.ClusterStats{Polling: []string{}}
	}
	return cs.quota.Stats()
}
