package transport

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/plan"
	"github.com/omniroute/gateway/transport/port"
	"github.com/omniroute/gateway/transport/upstream"
)

// targetInfo is what routing needs about a target beyond the catalog
// (port.TargetRoute: its connection, quota model index, ledger slot,
// header mapping and upstream model), by target id.
type targetInfo = port.TargetRoute

// quotaSys holds the routing settings and the per-target tables the
// request path reads; the routing actors' side (their options, the
// registration of what a reload adds, their metrics and the quota health
// section) is the composition root's (transport/gateway/routing), which
// the pipeline reaches through port.Routing (Gateway.routing).
type quotaSys struct {
	info      *growable.List[targetInfo] // by target id
	aware     bool
	maxWait   time.Duration
	defOut    int64
	threshold float64
	skips     *growable.List[[numSkips]*metrics.Counter] // by target
}

// numSkips is how many skip reasons the routing skip counters count
// (transport/plan's, by index).
const numSkips = plan.NumSkips

// RecordRouting fills the gateway's tables with the start-up catalog's
// plan (port.Routing.Plan), before the routing actors are spawned on it
// (transport/gateway/routing.Start): the routing settings, the upstream
// clients, the names, the routes and the metric series.
func (a *Assembly) RecordRouting(p *port.RoutingPlan) {
	g := a.g
	env := g.opts.Env.Quota
	g.qs = &quotaSys{info: &growable.List[targetInfo]{}, aware: bool(env.QuotaAwareRouting),
		maxWait: env.RoutingMaxWait.Duration(), defOut: int64(env.DefaultOutputTokens), threshold: float64(env.ApproachingThreshold),
		skips: &growable.List[[numSkips]*metrics.Counter]{}}
	g.recordPlan(p)
}

// Metrics is the gateway's metric set, which the root's layers register
// their series in.
func (a *Assembly) Metrics() *metrics.Set { return a.g.metrics.set }

// ResolveAddr resolves a provider's endpoint: its base URL's host and
// port, or a service:// name through Options.ServiceAddr.
func (a *Assembly) ResolveAddr(p *catalog.Provider) (string, bool, error) { return a.g.resolveAddr(p) }

// QuotaRoute says where target's observed rate-limit headers go: its
// connection and upstream model (the quota actors) and its ledger slot.
// The composition root's observations link reads it for every
// messages.QuotaObserved; the table grows only before a target's id is
// published, so the read needs no lock.
func (a *Assembly) QuotaRoute(target int) (conn int, upstream string, slot int) {
	in := a.g.qs.info.At(target)
	return in.Conn, in.Upstream, in.Slot
}

// AttachLink hands the front end the stop of an actor the composition
// root spawned between the routing actors (the observations link from
// the targets actor to the quota and ledger actors): Close runs it after
// the targets actor, its sender, stopped and before the actors it sends
// to stop.
func (a *Assembly) AttachLink(stop func()) { a.g.stops.links = append(a.g.stops.links, stop) }

// AttachRouting hands the front end the routing port (reloads register
// through it; it serves the quota health section and the connections'
// windows) and the spawned targets actor; the plan stage reads the
// routing actors' handles (planning.go).
func (a *Assembly) AttachRouting(r port.Routing, t *targets.Handle) {
	a.g.routing, a.g.targets = r, t
	a.g.attachPlan()
}

// stopRouting stops the quota actors and the ledger (the routing port's).
func (g *Gateway) stopRouting() {
	if g.routing != nil {
		g.routing.Stop()
	}
}

// targetMetrics registers the routing skip counters of the next target
// id (the request path counts them, planning.go); the circuit and
// cooldown gauges are the root's (transport/gateway/routing).
func (qs *quotaSys) targetMetrics(g *Gateway, t *catalog.Target) {
	var skips [numSkips]*metrics.Counter
	for r := 0; r < numSkips; r++ {
		skips[r] = g.metrics.set.NewCounter(fmt.Sprintf(metric.RoutingSkipsTotal+`{target=%q,reason=%q}`, t.Name, plan.SkipNames[r]))
	}
	qs.skips.Append(skips)
}

// observe parses the response's rate-limit headers through the target's
// explicit mapping (and the retry hint of any error) into the attempt's
// observation. Nothing is allocated unless there is something to report.
func (c *call) observe(t *catalog.Target, x *upstream.Exchange, status int) {
	in := c.g.qs.info.At(t.ID)
	if in.Mapping == nil && status < 300 {
		return
	}
	var b quota.Builder
	b.Reset(in.Mapping, c.g.clk.Now())
	for k, v := range x.Resp.Header.All() {
		b.Header(k, v)
	}
	var o messages.QuotaObservation
	if b.Finish(&o) {
		p := new(messages.QuotaObservation)
		*p = o
		c.plan.Obs = p
	}
}
