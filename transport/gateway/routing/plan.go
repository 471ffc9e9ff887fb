package routing

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/port"
)

// actorsPlan is the routing actors' part of a plan (port.RoutingPlan's
// Actors), worked out (and validated) before anything is registered.
type actorsPlan struct {
	connSpecs []quotaactor.ConnSpec // the new connections' quota telemetry, in id order
	addrs     []endpoint
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
	slotOf    map[string]int       // the new budgets' slots
	ups       []lanes.UpstreamSpec // the new targets' admission upstreams
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
	conn *catalog.Connection
	spec quotaactor.ConnSpec
	addr endpoint
}

type slotLimits struct {
	slot   int
	limits rolling.Limits
}

// Plan works out the registration of conns and targets, which
// catalog.Onto (or the first Build) found new (port.Routing). cat is the
// reloaded catalog (nil at start-up): its known connections are compared
// with the running ones. It changes none of the layer's state (in
// cluster mode it gives cat's known connections their running limits,
// which the cluster's pools keep); an error says what cannot be started.
func (l *Layer) Plan(conns []*catalog.Connection, targets []*catalog.Target, cat *catalog.Catalog, f *config.File) (*port.RoutingPlan, error) {
	p := &port.RoutingPlan{}
	ap := &actorsPlan{models: map[int][]string{}, allModels: map[int][]string{}, firstSlot: len(l.slotOf), slotOf: map[string]int{}, caps: map[int]int{}}
	p.Actors = ap
	modelsOf := func(id int) []string {
		if m, ok := ap.allModels[id]; ok {
			return m
		}
		if id < len(l.models) {
			return l.models[id]
		}
		return nil
	}
	for _, c := range conns {
		addr, spec, m, err := l.connPlan(c)
		if err != nil {
			return nil, err
		}
		p.Conns = append(p.Conns, port.Endpoint{Conn: c, Addr: addr.addr, TLS: addr.tls})
		ap.addrs, ap.mapping, ap.connSpecs = append(ap.addrs, addr), append(ap.mapping, m), append(ap.connSpecs, spec)
	}
	restarting := map[int]int{} // connection id → index in ap.restart
	if cat != nil {
		ap.defs = cat.Connections
		inCat := map[int]bool{}
		for _, c := range cat.Connections {
			inCat[c.ID] = true
			if c.ID >= len(l.conns) {
				continue // new
			}
			old := l.conns[c.ID]
			if l.shared != nil {
				c.Limits = old.Limits // cluster pools keep their start-up limits (needsRestart reports a change)
			}
			addr, spec, _, err := l.connPlan(c)
			if err != nil {
				return nil, err
			}
			spec.Mapping = l.mapping[c.ID] // rate_limit_headers apply at the next start
			newClient := addr != l.addrs[c.ID] || c.MaxConns != old.MaxConns
			limits := !reflect.DeepEqual(c.Limits, old.Limits)
			if newClient || limits || c.APIKey() != old.APIKey() || !reflect.DeepEqual(c.Provider.Quota.QuotaAPI, old.Provider.Quota.QuotaAPI) || !l.running[c.ID] {
				restarting[c.ID] = len(ap.restart)
				ap.restart = append(ap.restart, connRestart{conn: c, spec: spec, addr: addr})
				if newClient {
					p.Clients = append(p.Clients, port.Endpoint{Conn: c, Addr: addr.addr, TLS: addr.tls})
				}
			}
			if limits {
				for key, slot := range l.slotOf {
					if model, ok := strings.CutPrefix(key, c.Name+"\x00"); ok {
						ap.limits = append(ap.limits, slotLimits{slot, c.Limits.For(model)})
					}
				}
			}
		}
		for id, run := range l.running {
			if run && !inCat[id] {
				ap.removed = append(ap.removed, id)
			}
		}
		caps := admit.Caps(f)
		for _, t := range cat.Targets {
			if t.ID < len(l.caps) && caps[t.Name] != l.caps[t.ID] {
				ap.caps[t.ID] = caps[t.Name]
			}
		}
	}
	for _, t := range targets {
		up := t.Upstream()
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
			ap.allModels[cid] = models
			if cid >= len(l.conns) {
				ap.connSpecs[cid-len(l.conns)].Models = models
			} else if _, ok := restarting[cid]; !ok {
				ap.models[cid] = append(ap.models[cid], up)
			}
		}
		key := t.Conn.Name + "\x00" + up
		slot, ok := l.slotOf[key]
		if !ok {
			if slot, ok = ap.slotOf[key]; !ok {
				slot = ap.firstSlot + len(ap.slots)
				ap.slotOf[key] = slot
				ap.slots = append(ap.slots, ledgeractor.SlotSpec{Connection: t.Conn.Name, Model: up, Configured: t.Conn.Limits.For(up)})
			}
		}
		var mapping *quota.Mapping
		if cid >= len(l.conns) {
			mapping = ap.mapping[cid-len(l.conns)]
		} else {
			mapping = l.mapping[cid]
		}
		p.Targets = append(p.Targets, t)
		p.Routes = append(p.Routes, port.TargetRoute{Conn: cid, Model: mi, Slot: slot, Mapping: mapping, Upstream: up})
	}
	ap.ups = admit.Upstreams(p.Targets, f)
	for i := range ap.restart {
		r := &ap.restart[i]
		r.spec.Models = modelsOf(r.conn.ID)
	}
	p.Restarted, p.Removed = len(ap.restart), len(ap.removed)
	return p, nil
}

// connPlan resolves a connection's endpoint and builds its quota spec.
func (l *Layer) connPlan(c *catalog.Connection) (endpoint, quotaactor.ConnSpec, *quota.Mapping, error) {
	p := c.Provider
	addr, isTLS, err := l.resolve(p)
	if err != nil {
		return endpoint{}, quotaactor.ConnSpec{}, nil, fmt.Errorf("provider %s: %w", p.ID, err)
	}
	m, err := config.HeaderMapping(p.Quota)
	if err != nil {
		return endpoint{}, quotaactor.ConnSpec{}, nil, fmt.Errorf("providers.%s: %w", p.ID, err)
	}
	if errs := l.checkLimits(c); len(errs) > 0 {
		return endpoint{}, quotaactor.ConnSpec{}, nil, errors.New(strings.Join(errs, "; "))
	}
	spec := quotaactor.ConnSpec{Provider: p.ID, Name: c.Name, Mapping: m}
	w := c.Limits.Windows()
	for _, d := range []struct {
		dim   messages.QuotaDimension
		limit int64
		unit  string
	}{{messages.DimTokens, w[rolling.Tokens][rolling.Minute], "tokens/min"}, {messages.DimRequests, w[rolling.Requests][rolling.Minute], "requests/min"},
		{messages.DimDailyRequests, w[rolling.Requests][rolling.Day], "requests/day"}} {
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
	return endpoint{addr, isTLS}, spec, m, nil
}

// checkLimits explains a connection's token windows that a request
// without max_tokens could never fit (config.CheckMinCost): it needs the
// environment's default output reservation, which the file's own
// validation does not know.
func (l *Layer) checkLimits(c *catalog.Connection) []string {
	path := "providers." + c.Provider.ID + ".connections." + strings.TrimPrefix(c.Name, c.Provider.ID+"/") + ".limits"
	errs := config.CheckMinCost(c.Limits.Windows(), l.defOut, path)
	for _, m := range slices.Sorted(maps.Keys(c.Limits.Models)) {
		errs = append(errs, config.CheckMinCost(c.Limits.For(m), l.defOut, fmt.Sprintf("%s.models[%q]", path, m))...)
	}
	return errs
}

// record fills the layer's own tables with a plan, before the actors get
// it (at start-up: before they are spawned with it): the connections'
// definitions, endpoints, models and budgets, and the metric series.
func (l *Layer) record(p *port.RoutingPlan) {
	ap := p.Actors.(*actorsPlan)
	for i, e := range p.Conns {
		c := e.Conn
		l.connNames.Append(c.Name)
		l.conns = append(l.conns, c)
		l.addrs = append(l.addrs, ap.addrs[i])
		l.mapping = append(l.mapping, ap.mapping[i])
		l.running = append(l.running, true)
		l.models = append(l.models, nil)
		l.connMetrics(c)
	}
	for _, r := range ap.restart {
		l.addrs[r.conn.ID] = r.addr
		l.running[r.conn.ID] = true
	}
	for _, c := range ap.defs {
		l.conns[c.ID] = c
	}
	for id, m := range ap.allModels {
		l.models[id] = m
	}
	maps.Copy(l.slotOf, ap.slotOf)
	for id, c := range ap.caps {
		l.caps[id] = c
	}
	for i, t := range p.Targets {
		l.caps = append(l.caps, ap.ups[i].Cap)
		l.targetMetrics(t)
	}
}

// Register records a reload's plan in the layer's tables, then registers
// it with every actor, each call waited for (port.Routing; the tables
// first: an actor may report on a new id, a poll for instance, as soon as
// it holds it). The pipeline publishes the config naming the new ids
// after it returned nil.
func (l *Layer) Register(p *port.RoutingPlan) error {
	l.record(p)
	ap := p.Actors.(*actorsPlan)
	for i, e := range p.Conns {
		id, err := l.quota.Add(ap.connSpecs[i])
		if err != nil {
			return err
		}
		if id != e.Conn.ID {
			return fmt.Errorf("quota actor numbered connection %s %d, the gateway %d", e.Conn.Name, id, e.Conn.ID)
		}
	}
	for _, r := range ap.restart {
		if err := l.quota.Set(r.conn.ID, r.spec); err != nil {
			return err
		}
	}
	for id, models := range ap.models {
		if err := l.quota.AddModels(id, models); err != nil {
			return err
		}
	}
	for _, s := range ap.limits {
		if err := l.ledger.SetConfigured(s.slot, s.limits); err != nil {
			return err
		}
	}
	for id, c := range ap.caps {
		l.lanes.SetCap(id, c)
	}
	if len(ap.slots) > 0 {
		first, err := l.ledger.AddSlots(ap.slots)
		if err != nil {
			return err
		}
		if first != ap.firstSlot {
			return fmt.Errorf("ledger numbered budgets from %d, the gateway from %d", first, ap.firstSlot)
		}
		if l.shared != nil {
			l.shared.AddSlots(ap.slots)
		}
	}
	if len(p.Targets) == 0 {
		return nil
	}
	names := make([]string, len(p.Targets))
	for i, t := range p.Targets {
		names[i] = t.Name
	}
	first, err := l.targets.Add(names)
	if err != nil {
		return err
	}
	if first != p.Targets[0].ID {
		return fmt.Errorf("targets actor numbered targets from %d, the gateway from %d", first, p.Targets[0].ID)
	}
	if first, err = l.lanes.AddUpstreams(ap.ups); err != nil {
		return err
	}
	if first != p.Targets[0].ID {
		return fmt.Errorf("admission numbered upstreams from %d, the gateway's targets from %d", first, p.Targets[0].ID)
	}
	return nil
}

// Retire runs once a reload's config is in force (port.Routing): the
// removed connections' quota telemetry stops (a poll in flight is
// cancelled; requests in flight on them finish, their client stays), and
// the lanes snapshot shows only the targets the config routes to.
func (l *Layer) Retire(p *port.RoutingPlan, cat *catalog.Catalog) {
	for _, id := range p.Actors.(*actorsPlan).removed {
		l.quota.Remove(id)
		l.running[id] = false
	}
	live := make([]bool, len(l.caps))
	for _, t := range cat.Targets {
		live[t.ID] = true
	}
	for id, lv := range live {
		l.lanes.SetRetired(id, !lv)
	}
}
