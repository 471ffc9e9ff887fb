package transport

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/transport/port"
	"github.com/omniroute/gateway/transport/upstream"
)

// The set of targets and connections grows and shrinks at run time
// (the composition root's transport/gateway/routing tells how).
//
// Every connection and target the gateway has ever routed to has an id
// (catalog.IDs). The pipeline keeps the append-only tables requests
// index by id without a lock: the upstream clients, the target names, the
// routing info (quota.go) and the metric handles. A reload has the
// routing port plan what the new catalog adds (port.Routing.Plan), fills
// these tables from the plan, has the port register it with every actor,
// each acknowledgement waited for (Register), and only then publishes the
// routing config that names the new ids, so no request can see a target
// half registered. A removed connection's quota telemetry stops once the
// new config is in force (Retire); a removed target keeps its id and
// state, unused, until a reload brings it back.

// targetRegistry is what the gateway has numbered. The tables are read
// by requests; the rest is the writer's (start-up, then reloads under
// reloadState.mu).
type targetRegistry struct {
	targetNames *growable.List[string]                          // by target id
	clients     *growable.List[atomic.Pointer[upstream.Client]] // by connection id

	ids catalog.IDs
	// replaced are clients a changed endpoint replaced: requests in flight
	// may still use them, so Close closes them.
	replaced []*upstream.Client
	// broken is set when a reload failed half way through registering:
	// the tables may disagree with the ids, so reloads are refused.
	broken error
}

func newTargetRegistry() *targetRegistry {
	return &targetRegistry{targetNames: &growable.List[string]{},
		clients: &growable.List[atomic.Pointer[upstream.Client]]{},
		ids:     catalog.IDs{Conns: map[string]int{}, Targets: map[string]int{}}}
}

// client returns connection id's upstream client.
func (g *Gateway) client(id int) *upstream.Client { return g.reg.clients.At(id).Load() }

// targetName returns target id's name.
func (g *Gateway) targetName(id int) string { return *g.reg.targetNames.At(id) }

// newClient builds a connection's upstream client.
func (g *Gateway) newClient(e port.Endpoint) *upstream.Client {
	u := g.opts.Env.Upstream
	maxConns := int(u.MaxConns)
	if e.Conn.MaxConns > 0 {
		maxConns = e.Conn.MaxConns
	}
	o := upstream.Options{
		Addr: e.Addr, TLS: e.TLS, MaxConns: maxConns,
		ConnectTimeout: u.ConnectTimeout.Duration(), TTFBTimeout: u.TTFBTimeout.Duration(), TotalTimeout: u.TotalTimeout.Duration(),
		MaxResponseBytes: int(u.MaxResponseBytes),
	}
	if name := e.Conn.Provider.Service; name != "" {
		o.Verify = func() error { return g.verifyService(name) } // sidecars.go
	}
	return upstream.New(o)
}

// applyPlan records a reload's plan in the gateway's tables, then has
// the routing port register it with every actor, each call waited for
// (the tables first: an actor may report on a new id as soon as it holds
// it), and registers the new upstreams' admission series. The caller
// publishes the config naming the new ids after it returned nil. On an
// error the registry is marked broken.
func (g *Gateway) applyPlan(p *port.RoutingPlan) error {
	g.recordPlan(p)
	if err := g.routing.Register(p); err != nil {
		g.reg.broken = fmt.Errorf("a reload failed while registering new targets (%v); restart the gateway to load the config", err)
		return g.reg.broken
	}
	for _, t := range p.Targets {
		g.adm.RegisterUpstream(g.metrics.set, t.ID, t.Name)
	}
	return nil
}

// recordPlan fills the gateway's own tables with a plan, before the
// actors get it (at start-up: before they are spawned with it): clients
// (a known connection whose endpoint changed gets a new one), names,
// routing info, metric series and the ids.
func (g *Gateway) recordPlan(p *port.RoutingPlan) {
	reg, qs := g.reg, g.qs
	for _, e := range p.Conns {
		reg.clients.Grow(1)
		reg.clients.At(e.Conn.ID).Store(g.newClient(e))
	}
	for _, e := range p.Clients {
		old := reg.clients.At(e.Conn.ID).Swap(g.newClient(e))
		reg.replaced = append(reg.replaced, old)
	}
	conns := make([]*catalog.Connection, len(p.Conns))
	for i, e := range p.Conns {
		conns[i] = e.Conn
	}
	for i, t := range p.Targets {
		qs.info.Append(p.Routes[i])
		reg.targetNames.Append(t.Name)
		g.metrics.addTarget(t.Name)
		qs.targetMetrics(g, t)
	}
	reg.ids.Add(conns, p.Targets)
}

// errReloadClosed refuses a reload of a closed gateway.
var errReloadClosed = errors.New("the gateway is closed")
