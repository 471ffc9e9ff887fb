package transport

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

// The set of targets and connections grows and shrinks at run time.
//
// Every connection and target the gateway has ever routed to has an id
// (catalog.IDs): the first catalog's indexes, then the next free ids for
// the new ones a reload brings (catalog.Onto). The per-id state lives in
// append-only tables (internal/growable) that requests index without a
// lock: the upstream clients, the routing info and the metric handles
// here, the success accumulators and probes of the targets actor, the
// budgets of the ledger, the gates of the admission lanes and the quota
// aggregators. A reload registers what is new with each of them, waiting
// for every actor's acknowledgement, and only then publishes the routing
// config that names the new ids, so no request can see a target half
// registered. A removed connection's quota telemetry (its usage-API
// poller included) stops once the new config is in force; a removed
// target keeps its id and state, unused, and leaves the health, quota and
// dashboard views and the lanes snapshot, until a reload brings it back.

// targetRegistry is what the gateway has numbered. The tables are read
// by requests; the rest is the writer's (start-up, then reloads under
// reloadState.mu).
type targetRegistry struct {
	connNames   *growable.List[string]                          // by connection id
	targetNames *growable.List[string]                          // by target id
	clients     *growable.List[atomic.Pointer[upstream.Client]] // by connection id

	ids catalog.IDs
	// conns are the connection definitions in force by id, with their
	// resolved addresses and header mappings.
	conns   []*catalog.Connection
	addrs   []upstreamAddr
	mapping []*quota.Mapping
	// running tells which connections' quota telemetry runs (false once
	// removed); models are each connection's upstream models as its quota
	// aggregator indexes them.
	running []bool
	models  [][]string
	// caps are the targets' max_concurrent in force, by target id.
	caps []int
	// replaced are clients a changed endpoint replaced: requests in flight
	// may still use them, so Close closes them.
	replaced []*upstream.Client
	// broken is set when a reload failed half way through registering:
	// the tables may disagree with the ids, so reloads are refused.
	broken error
}

// upstreamAddr is a connection's resolved endpoint.
type upstreamAddr struct {
	addr string
	tls  bool
}

func newTargetRegistry() *targetRegistry {
	return &targetRegistry{connNames: &growable.List[string]{}, targetNames: &growable.List[string]{},
		clients: &growable.List[atomic.Pointer[upstream.Client]]{},
		ids:     catalog.IDs{Conns: map[string]int{}, Targets: map[string]int{}}}
}

// client returns connection id's upstream client.
func (g *Gateway) client(id int) *upstream.Client { return g.reg.clients.At(id).Load() }

// targetName returns target id's name.
func (g *Gateway) targetName(id int) string { return *g.reg.targetNames.At(id) }

// targetPlan is what registering connections and targets takes, worked
// out (and validated) before anything is registered.
type targetPlan struct {
	conns     []*catalog.Connection // new connections, in id order
	connSpecs []quotaactor.ConnSpec // their quota telemetry
	addrs     []upstreamAddr
	mapping   []*quota.Mapping
	// restart are known connections whose telemetry restarts: a changed
	// endpoint, credential or usage API, or back after a removal.
	restart []connRestart
	// models are the upstream models new to a known connection whose
	// telemetry keeps running.
	models map[int][]string
	// allModels are every connection's models once the plan is applied.
	allModels map[int][]string
	slots     []ledgeractor.SlotSpec // new budgets, from slot firstSlot
	firstSlot int
	slotOf    map[string]int // the new budgets' slots
	targets   []*catalog.Target
	info      []targetInfo         // the new targets', in id order
	ups       []lanes.UpstreamSpec // their admission upstreams
	// defs are the definitions of every connection of the new catalog
	// (nil at start-up); removed the running connections it lacks.
	defs    []*catalog.Connection
	removed []int
	// limits are known budgets whose connection's limits changed; caps
	// known targets whose max_concurrent changed (target id → cap).
	limits []slotLimits
	caps   map[int]int
}

type connRestart struct {
	conn      *catalog.Connection
	spec      quotaactor.ConnSpec
	addr      upstreamAddr
	newClient bool // the endpoint or max_conns changed: a new client
}

type slotLimits struct {
	slot   int
	limits rolling.Limits
}

// planTargets works out the registration of conns and targets, which
// catalog.Onto (or the first Build) found new. cat is the reloaded
// catalog (nil at start-up): its known connections are compared with the
// running ones. It changes none of the gateway's state (in cluster mode
// it gives cat's known connections their running limits, which the
// cluster's pools keep); an error says what cannot be started.
func (g *Gateway) planTargets(conns []*catalog.Connection, targets []*catalog.Target, cat *catalog.Catalog, f *config.File) (*targetPlan, error) {
	reg, qs := g.reg, g.qs
	p := &targetPlan{models: map[int][]string{}, allModels: map[int][]string{}, firstSlot: len(qs.slotOf), slotOf: map[string]int{}, caps: map[int]int{}}
	modelsOf := func(id int) []string {
		if m, ok := p.allModels[id]; ok {
			return m
		}
		if id < len(reg.models) {
			return reg.models[id]
		}
		return nil
	}
	for _, c := range conns {
		addr, spec, m, err := g.connPlan(c)
		if err != nil {
			return nil, err
		}
		p.conns, p.addrs, p.mapping, p.connSpecs = append(p.conns, c), append(p.addrs, addr), append(p.mapping, m), append(p.connSpecs, spec)
	}
	restarting := map[int]int{} // connection id → index in p.restart
	if cat != nil {
		p.defs = cat.Connections
		inCat := map[int]bool{}
		for _, c := range cat.Connections {
			inCat[c.ID] = true
			if c.ID >= len(reg.conns) {
				continue // new
			}
			old := reg.conns[c.ID]
			if g.cs != nil {
				c.Limits = old.Limits // cluster pools keep their start-up limits (needsRestart reports a change)
			}
			addr, spec, _, err := g.connPlan(c)
			if err != nil {
				return nil, err
			}
			spec.Mapping = reg.mapping[c.ID] // rate_limit_headers apply at the next start
			newClient := addr != reg.addrs[c.ID] || c.MaxConns != old.MaxConns
			limits := !reflect.DeepEqual(c.Limits, old.Limits)
			if newClient || limits || c.APIKey() != old.APIKey() || !reflect.DeepEqual(c.Provider.Quota.QuotaAPI, old.Provider.Quota.QuotaAPI) || !reg.running[c.ID] {
				restarting[c.ID] = len(p.restart)
				p.restart = append(p.restart, connRestart{conn: c, spec: spec, addr: addr, newClient: newClient})
			}
			if limits {
				for key, slot := range qs.slotOf {
					if model, ok := strings.CutPrefix(key, c.Name+"\x00"); ok {
						p.limits = append(p.limits, slotLimits{slot, c.Limits.For(model)})
					}
				}
			}
		}
		for id, run := range reg.running {
			if run && !inCat[id] {
				p.removed = append(p.removed, id)
			}
		}
		caps := targetCaps(f)
		for _, t := range cat.Targets {
			if t.ID < len(reg.caps) && caps[t.Name] != reg.caps[t.ID] {
				p.caps[t.ID] = caps[t.Name]
			}
		}
	}
	for _, t := range targets {
		up := upstreamName(t)
		cid := t.Conn.ID
		models := modelsOf(cid)
		mi := -1
		for i, m := range models {
			if m == up {
				mi = i
			}
		}
		if mi < 0 {
			mi = len(models)
			models = append(models[:len(models):len(models)], up)
			p.allModels[cid] = models
			if cid >= len(reg.conns) {
				p.connSpecs[cid-len(reg.conns)].Models = models
			} else if _, ok := restarting[cid]; !ok {
				p.models[cid] = append(p.models[cid], up)
			}
		}
		key := t.Conn.Name + "\x00" + up
		slot, ok := qs.slotOf[key]
		if !ok {
			if slot, ok = p.slotOf[key]; !ok {
				slot = p.firstSlot + len(p.slots)
				p.slotOf[key] = slot
				p.slots = append(p.slots, ledgeractor.SlotSpec{Connection: t.Conn.Name, Model: up, Configured: t.Conn.Limits.For(up)})
			}
		}
		var mapping *quota.Mapping
		if cid >= len(reg.conns) {
			mapping = p.mapping[cid-len(reg.conns)]
		} else {
			mapping = reg.mapping[cid]
		}
		p.targets = append(p.targets, t)
		p.info = append(p.info, targetInfo{conn: cid, model: mi, slot: slot, mapping: mapping, upstream: up})
	}
	p.ups = upstreamSpecs(p.targets, f)
	for i := range p.restart {
		r := &p.restart[i]
		r.spec.Models = modelsOf(r.conn.ID)
	}
	return p, nil
}

// connPlan resolves a connection's endpoint and builds its quota spec.
func (g *Gateway) connPlan(c *catalog.Connection) (upstreamAddr, quotaactor.ConnSpec, *quota.Mapping, error) {
	p := c.Provider
	addr, isTLS, err := g.resolveAddr(p)
	if err != nil {
		return upstreamAddr{}, quotaactor.ConnSpec{}, nil, fmt.Errorf("provider %s: %w", p.ID, err)
	}
	m, err := config.HeaderMapping(p.Quota)
	if err != nil {
		return upstreamAddr{}, quotaactor.ConnSpec{}, nil, fmt.Errorf("providers.%s: %w", p.ID, err)
	}
	if errs := g.checkLimits(c); len(errs) > 0 {
		return upstreamAddr{}, quotaactor.ConnSpec{}, nil, errors.New(strings.Join(errs, "; "))
	}
	spec := quotaactor.ConnSpec{Provider: p.ID, Name: c.Name, Mapping: m}
	l := c.Limits.Windows()
	for _, d := range []struct {
		dim   messages.QuotaDimension
		limit int64
		unit  string
	}{{messages.DimTokens, l[rolling.Tokens][rolling.Minute], "tokens/min"}, {messages.DimRequests, l[rolling.Requests][rolling.Minute], "requests/min"},
		{messages.DimDailyRequests, l[rolling.Requests][rolling.Day], "requests/day"}} {
		if d.limit > 0 {
			spec.Configured = append(spec.Configured, quota.Value{Dimension: d.dim, Flags: quota.HasLimit, Limit: float64(d.limit),
				Unit: d.unit, Source: quota.SourceConfigured, Confidence: quota.ConfidenceHigh})
		}
	}
	// Budgets exist when limits are configured or may arrive in headers.
	spec.Budgeted = c.Limits.Any() || m != nil
	if q := p.Quota.QuotaAPI; q != nil {
		spec.Poll = &quotaactor.PollSpec{Kind: q.Kind, BaseURL: q.PollBaseURL(p.BaseURL), Interval: q.PollInterval(), Timeout: q.PollTimeout(), APIKey: c.APIKey()}
	}
	return upstreamAddr{addr, isTLS}, spec, m, nil
}

// checkLimits explains a connection's token windows that a request
// without max_tokens could never fit (config.CheckMinCost): it needs the
// environment's default output reservation, which the file's own
// validation does not know.
func (g *Gateway) checkLimits(c *catalog.Connection) []string {
	path := "providers." + c.Provider.ID + ".connections." + strings.TrimPrefix(c.Name, c.Provider.ID+"/") + ".limits"
	errs := config.CheckMinCost(c.Limits.Windows(), g.qs.defOut, path)
	for _, m := range slices.Sorted(maps.Keys(c.Limits.Models)) {
		errs = append(errs, config.CheckMinCost(c.Limits.For(m), g.qs.defOut, fmt.Sprintf("%s.models[%q]", path, m))...)
	}
	return errs
}

// newClient builds a connection's upstream client.
func (g *Gateway) newClient(c *catalog.Connection, a upstreamAddr) *upstream.Client {
	u := g.opts.Env.Upstream
	maxConns := int(u.MaxConns)
	if c.MaxConns > 0 {
		maxConns = c.MaxConns
	}
	o := upstream.Options{
		Addr: a.addr, TLS: a.tls, MaxConns: maxConns,
		ConnectTimeout: u.ConnectTimeout.Duration(), TTFBTimeout: u.TTFBTimeout.Duration(), TotalTimeout: u.TotalTimeout.Duration(),
		MaxResponseBytes: int(u.MaxResponseBytes),
	}
	if name := c.Provider.Service; name != "" {
		o.Verify = func() error { return g.verifyService(name) } // sidecars.go
	}
	return upstream.New(o)
}

// applyPlan records a reload's plan in the gateway's tables, then
// registers it with every actor, each call waited for (the tables first:
// an actor may report on a new id, a poll for instance, as soon as it
// holds it). The caller publishes the config naming the new
// ids after it returned nil. On an error the registry is marked broken.
func (g *Gateway) applyPlan(p *targetPlan) error {
	g.recordPlan(p)
	if err := g.registerPlan(p); err != nil {
		g.reg.broken = fmt.Errorf("a reload failed while registering new targets (%v); restart the gateway to load the config", err)
		return g.reg.broken
	}
	return nil
}

func (g *Gateway) registerPlan(p *targetPlan) error {
	reg, qs := g.reg, g.qs
	for i, c := range p.conns {
		id, err := qs.quota.Add(p.connSpecs[i])
		if err != nil {
			return err
		}
		if id != c.ID {
			return fmt.Errorf("quota actor numbered connection %s %d, the gateway %d", c.Name, id, c.ID)
		}
	}
	for _, r := range p.restart {
		if r.newClient {
			old := reg.clients.At(r.conn.ID).Swap(g.newClient(r.conn, r.addr))
			reg.replaced = append(reg.replaced, old)
		}
		if err := qs.quota.Set(r.conn.ID, r.spec); err != nil {
			return err
		}
	}
	for id, models := range p.models {
		if err := qs.quota.AddModels(id, models); err != nil {
			return err
		}
	}
	for _, l := range p.limits {
		if err := qs.ledger.SetConfigured(l.slot, l.limits); err != nil {
			return err
		}
	}
	for id, c := range p.caps {
		g.adm.Lanes().SetCap(id, c)
	}
	if len(p.slots) > 0 {
		first, err := qs.ledger.AddSlots(p.slots)
		if err != nil {
			return err
		}
		if first != p.firstSlot {
			return fmt.Errorf("ledger numbered budgets from %d, the gateway from %d", first, p.firstSlot)
		}
		if g.cs != nil {
			g.cs.addSlots(p.slots)
		}
	}
	if len(p.targets) == 0 {
		return nil
	}
	names := make([]string, len(p.targets))
	for i, t := range p.targets {
		names[i] = t.Name
	}
	first, err := g.targets.Add(names)
	if err != nil {
		return err
	}
	if first != p.targets[0].ID {
		return fmt.Errorf("targets actor numbered targets from %d, the gateway from %d", first, p.targets[0].ID)
	}
	if first, err = g.adm.Lanes().AddUpstreams(p.ups); err != nil {
		return err
	}
	if first != p.targets[0].ID {
		return fmt.Errorf("admission numbered upstreams from %d, the gateway's targets from %d", first, p.targets[0].ID)
	}
	for i, u := range p.ups {
		g.adm.RegisterUpstream(g.metrics.set, first+i, u.Name)
	}
	return nil
}

// recordPlan fills the gateway's own tables with a plan, before the
// actors get it (at start-up: before they are spawned with it): clients,
// names, routing info, metric series and the ids.
func (g *Gateway) recordPlan(p *targetPlan) {
	reg, qs := g.reg, g.qs
	for i, c := range p.conns {
		reg.clients.Grow(1)
		reg.clients.At(c.ID).Store(g.newClient(c, p.addrs[i]))
		reg.connNames.Append(c.Name)
		reg.conns = append(reg.conns, c)
		reg.addrs = append(reg.addrs, p.addrs[i])
		reg.mapping = append(reg.mapping, p.mapping[i])
		reg.running = append(reg.running, true)
		reg.models = append(reg.models, nil)
		qs.connMetrics(g, c)
	}
	for _, r := range p.restart {
		reg.addrs[r.conn.ID] = r.addr
		reg.running[r.conn.ID] = true
	}
	for _, c := range p.defs {
		reg.conns[c.ID] = c
	}
	for id, m := range p.allModels {
		reg.models[id] = m
	}
	for k, v := range p.slotOf {
		qs.slotOf[k] = v
	}
	for id, c := range p.caps {
		reg.caps[id] = c
	}
	for i, t := range p.targets {
		reg.caps = append(reg.caps, p.ups[i].Cap)
		qs.info.Append(p.info[i])
		reg.targetNames.Append(t.Name)
		g.metrics.addTarget(t.Name)
		qs.targetMetrics(g, t)
	}
	reg.ids.Add(p.conns, p.targets)
}

// retireRemoved runs once a reload's config is in force: the removed
// connections' quota telemetry stops (a poll in flight is cancelled;
// requests in flight on them finish, their client stays), and the lanes
// snapshot shows only the targets the config routes to.
func (g *Gateway) retireRemoved(p *targetPlan, cat *catalog.Catalog) {
	for _, id := range p.removed {
		g.qs.quota.Remove(id)
		g.reg.running[id] = false
	}
	live := make([]bool, g.reg.targetNames.Len())
	for _, t := range cat.Targets {
		live[t.ID] = true
	}
	for id, l := range live {
		g.adm.Lanes().SetRetired(id, !l)
	}
}

// upstreamSpecs are the admission upstreams of targets, one per target
// (upstream index = target id), with the cap the file sets.
func upstreamSpecs(targets []*catalog.Target, f *config.File) []lanes.UpstreamSpec {
	caps := targetCaps(f)
	out := make([]lanes.UpstreamSpec, len(targets))
	for i, t := range targets {
		out[i] = lanes.UpstreamSpec{Name: t.Name, Cap: caps[t.Name]}
	}
	return out
}

// errReloadClosed refuses a reload of a closed gateway.
var errReloadClosed = errors.New("the gateway is closed")
