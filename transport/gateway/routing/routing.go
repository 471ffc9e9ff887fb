// Package routing is the routing actors' part of the composition root:
// it plans the start-up catalog's connections and targets, spawns the
// ledger, the quota actors and the targets actor on that plan with their
// options, registers what a reload adds with each of them (and with the
// admission lanes), retires what it removes, and registers their metrics
// and the quota section of the health report. It hands the request
// pipeline the port it declares (port.Routing) and the spawned handles
// (Source.AttachRouting).
//
// The set of targets and connections grows and shrinks at run time.
// Every connection and target the gateway has ever routed to has an id
// (catalog.IDs): the first catalog's indexes, then the next free ids for
// the new ones a reload brings (catalog.Onto). The per-id state lives in
// append-only tables (internal/growable) that requests index without a
// lock: the upstream clients, the routing info and the metric handles of
// the pipeline, the success accumulators and probes of the targets
// actor, the budgets of the ledger, the gates of the admission lanes and
// the quota aggregators. A reload fills the pipeline's tables from the
// plan, then registers it here with each actor, waiting for every
// actor's acknowledgement (Layer.Register), and only then publishes the
// routing config that names the new ids, so no request can see a target
// half registered. A removed connection's quota telemetry (its usage-API
// poller included) stops once the new config is in force
// (Layer.Retire); a removed target keeps its id and state, unused, and
// leaves the health, quota and dashboard views and the lanes snapshot,
// until a reload brings it back.
package routing

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// Source is what the routing layer is built from: the gateway being
// composed (transport's Assembly), which also takes the port.
type Source interface {
	Clock() clock.Clock
	Env() config.Env
	// File is the config file the gateway started on.
	File() *config.File
	// Pipeline is what the layer reads of the pipeline: the catalog in
	// force and each target's route (the health section, the windows).
	Pipeline() port.Pipeline
	// Metrics is the gateway's metric set, which the layer's series join.
	Metrics() *metrics.Set
	// ResolveAddr resolves a provider's endpoint (a service:// name
	// through the service runner).
	ResolveAddr(p *catalog.Provider) (addr string, isTLS bool, err error)
	// RecordRouting fills the pipeline's tables with a plan (clients,
	// names, routes, metric series) before any actor holds it.
	RecordRouting(p *port.RoutingPlan)
	// AttachRouting hands the pipeline the port (which also gives the
	// plan stage the ledger and quota actors) and the targets actor.
	AttachRouting(r port.Routing, t *targets.Handle)
}

// Layer is the routing actors behind the pipeline's port: their handles,
// and what the gateway has numbered of connections and budgets, which
// only the writer reads (start-up, then reloads, which the pipeline
// serialises).
type Layer struct {
	clk  clock.Clock
	pipe port.Pipeline
	set  *metrics.Set
	// resolve is Source.ResolveAddr; defOut the default output
	// reservation (OMNIROUTE_DEFAULT_OUTPUT_TOKENS); cluster says whether
	// cluster mode is on; aware is OMNIROUTE_QUOTA_AWARE_ROUTING.
	resolve func(*catalog.Provider) (string, bool, error)
	defOut  int64
	cluster bool
	aware   bool

	ledger  *ledgeractor.Handle
	slots   []ledgeractor.SlotSpec // the ledger's start-up budgets, by slot (cluster pools)
	quota   *quotaactor.Handle
	targets *targets.Handle
	lanes   *lanes.Handle // AttachLanes: spawned after the routing actors
	shared  port.Cluster  // AttachCluster (cluster mode): reloaded budgets are shared

	// connNames are the connections' names by id, which the quota
	// actors' estimates read (from their goroutine: a growable table).
	connNames *growable.List[string]
	// conns are the connection definitions in force by id, with their
	// resolved endpoints and header mappings.
	conns   []*catalog.Connection
	addrs   []endpoint
	mapping []*quota.Mapping
	// running tells which connections' quota telemetry runs (false once
	// removed); models are each connection's upstream models as its quota
	// aggregator indexes them.
	running []bool
	models  [][]string
	// caps are the targets' max_concurrent in force, by target id.
	caps []int
	// slotOf is the ledger slot of each "connection\x00model".
	slotOf map[string]int
	// pollOK and pollErr count each connection's usage-API polls.
	pollOK, pollErr *growable.List[*metrics.Counter]
}

// endpoint is a connection's resolved endpoint.
type endpoint struct {
	addr string
	tls  bool
}

// Start plans the start-up catalog's connections and targets as a reload
// plans the ones it adds (plan.go), has the pipeline record the plan,
// registers the layer's metrics, spawns the ledger, the quota actors and
// the targets actor on it and hands the pipeline the port and the
// handles. On an error it leaves nothing running.
func Start(system *actor.ActorSystem, src Source) (*Layer, error) {
	env := src.Env()
	l := &Layer{clk: src.Clock(), pipe: src.Pipeline(), set: src.Metrics(), resolve: src.ResolveAddr,
		defOut: int64(env.Quota.DefaultOutputTokens), cluster: env.Cluster.ClusterMode.On(), aware: bool(env.Quota.QuotaAwareRouting),
		slotOf: map[string]int{}, connNames: &growable.List[string]{}, pollOK: &growable.List[*metrics.Counter]{}, pollErr: &growable.List[*metrics.Counter]{}}
	cat := l.pipe.Catalog()
	p, err := l.Plan(cat.Connections, cat.Targets, nil, src.File())
	if err != nil {
		return nil, err
	}
	src.RecordRouting(p)
	l.record(p)
	l.ledgerMetrics()
	ap := p.Actors.(*actorsPlan)
	l.slots = ap.slots
	clk := src.Clock()
	if l.ledger, err = ledgeractor.Spawn(system, ap.slots, clk); err != nil {
		return nil, err
	}
	if l.quota, err = quotaactor.Spawn(system, ap.connSpecs, clk, l.quotaOptions(env)); err != nil {
		l.ledger.Stop()
		return nil, err
	}
	names := make([]string, len(cat.Targets))
	for i, t := range cat.Targets {
		names[i] = t.Name
	}
	if l.targets, err = targets.SpawnWith(system, names, clk, targetsOptions(env)); err != nil {
		l.Stop()
		return nil, err
	}
	src.AttachRouting(l, l.targets)
	return l, nil
}

// Ledger, Slots, Quota and Targets are the spawned actors and the
// ledger's start-up budgets, which the root's other layers join.
func (l *Layer) Ledger() *ledgeractor.Handle   { return l.ledger }
func (l *Layer) Slots() []ledgeractor.SlotSpec { return l.slots }
func (l *Layer) Quota() *quotaactor.Handle     { return l.quota }
func (l *Layer) Targets() *targets.Handle      { return l.targets }

// AttachCluster has the budgets a reload adds shared by the cluster
// (cluster mode only).
func (l *Layer) AttachCluster(c port.Cluster) { l.shared = c }

// AttachLanes hands the layer the admission lanes, spawned after it,
// which a reload registers new targets' upstreams with.
func (l *Layer) AttachLanes(h *lanes.Handle) { l.lanes = h }

// Stop stops the quota actors and the ledger.
func (l *Layer) Stop() {
	if l.quota != nil {
		l.quota.Stop()
	}
	if l.ledger != nil {
		l.ledger.Stop()
	}
}

// quotaOptions are the quota actors' options: their estimates come from
// the ledger, and their polls are counted in the gateway's metrics. In
// cluster mode pollers wait for the quota sharing's ownership decision
// (started by the root, transport/gateway/clusterlayer), so a node never
// polls a connection another member owns, not even before it has joined.
func (l *Layer) quotaOptions(env config.Env) quotaactor.Options {
	return quotaactor.Options{Threshold: float64(env.Quota.ApproachingThreshold), SharedPolls: l.cluster,
		Estimates: func(conn int) []quota.Value { return l.ledger.Snapshot().Estimates(l.pollConn(conn)) },
		OnPoll: func(conn int, ok bool) {
			if ok {
				(*l.pollOK.At(conn)).Inc()
			} else {
				(*l.pollErr.At(conn)).Inc()
			}
		}}
}

// pollConn is connection id's name. The quota actor asks only of the
// ids it holds, which record numbered first.
func (l *Layer) pollConn(id int) string { return *l.connNames.At(id) }

// targetsOptions are the targets actor's options: breaker and cooldown
// settings from the environment. The attempts' rate-limit headers reach
// the quota and ledger actors, and cooldowns the cluster's peers, as
// messages to the actors the composition root sets up (the observations
// link; the targets' cooldowns actor), never through code of theirs run
// on the targets actor.
func targetsOptions(env config.Env) targets.Options {
	q := env.Quota
	return targets.Options{
		FailureThreshold: int(q.BreakerFailures),
		BackoffBase:      q.CooldownBase.Duration(), BackoffMax: q.CooldownMax.Duration(),
		HardCooldown: q.QuotaCooldown.Duration(),
	}
}

// targetMetrics registers the circuit and cooldown series of the next
// target id: gauges that read the published snapshot on scrape.
func (l *Layer) targetMetrics(t *catalog.Target) {
	for _, st := range []string{"closed", "open", "half_open"} {
		id, st := t.ID, st
		l.set.NewGauge(fmt.Sprintf(metric.CircuitState+`{target=%q,state=%q}`, t.Name, st), func() float64 {
			if s := l.targets.Snapshot(); s != nil && id < len(s.Targets) {
				if targets.CircuitState(s.Targets[id].Open, s.Targets[id].CoolUntil, l.clk.Now()) == st {
					return 1
				}
			}
			return 0
		})
	}
	id := t.ID
	l.set.NewGauge(fmt.Sprintf(metric.TargetCooldownSeconds+`{target=%q}`, t.Name), func() float64 {
		if s := l.targets.Snapshot(); s != nil && id < len(s.Targets) {
			if d := s.Targets[id].CoolUntil.Sub(l.clk.Now()); d > 0 {
				return d.Seconds()
			}
		}
		return 0
	})
}

// connMetrics registers the quota series of the next connection id.
func (l *Layer) connMetrics(c *catalog.Connection) {
	l.pollOK.Append(l.set.NewCounter(fmt.Sprintf(metric.QuotaPollsTotal+`{connection=%q,outcome="ok"}`, c.Name)))
	l.pollErr.Append(l.set.NewCounter(fmt.Sprintf(metric.QuotaPollsTotal+`{connection=%q,outcome="error"}`, c.Name)))
	for _, st := range quota.Statuses {
		id, st := c.ID, st
		l.set.NewGauge(fmt.Sprintf(metric.QuotaModels+`{connection=%q,state=%q}`, c.Name, st.String()), func() float64 {
			cs := l.quota.State(id)
			if cs == nil {
				return 0
			}
			n := 0
			for i := range cs.Models {
				if cs.Models[i].Status == st {
					n++
				}
			}
			return float64(n)
		})
	}
}

// ledgerMetrics registers the ledger's gauge.
func (l *Layer) ledgerMetrics() {
	l.set.NewGauge(metric.LedgerReservedTokens, func() float64 {
		var n uint64
		if s := l.ledger.Snapshot(); s != nil {
			for i := range s.Slots {
				if s.Slots[i].Tokens != nil {
					n += s.Slots[i].Tokens.Used
				}
			}
		}
		return float64(n)
	})
}

// Health is the "quota" section of /api/monitoring/health: how many
// connections are in each state, how many targets are cooling down or
// have an open circuit. It is degraded while any target is out; it is
// never down, because a cooling target recovers by itself.
func (l *Layer) Health() (any, string) {
	now := l.clk.Now()
	byStatus := map[string]int{}
	for i := 0; i < l.quota.Len(); i++ {
		if st := l.quota.State(i); st != nil {
			byStatus[st.Status.String()]++
		}
	}
	out := map[string]any{"quotaAwareRouting": l.aware, "connections": byStatus}
	cooling, open, halfOpen, exhausted, usable := 0, 0, 0, 0, 0
	snap := l.targets.Snapshot()
	live := l.pipe.Catalog().Targets // the targets the config in force routes to
	for _, t := range live {
		in := l.pipe.Target(t.ID)
		out := false
		if snap != nil && t.ID < len(snap.Targets) {
			s := &snap.Targets[t.ID]
			switch targets.CircuitState(s.Open, s.CoolUntil, now) {
			case "open":
				open++
				out = true
			case "half_open":
				halfOpen++
			default:
				if s.CoolUntil.After(now) {
					cooling++
					out = true
				}
			}
		}
		if l.quota.ModelStatus(in.Conn, in.Model, now) == quota.StatusExhausted {
			exhausted++
			out = true
		}
		if !out {
			usable++
		}
	}
	out["targets"] = map[string]int{"usable": usable, "cooling": cooling, "circuitOpen": open, "circuitHalfOpen": halfOpen, "quotaExhausted": exhausted}
	out["windows"] = l.ConnectionWindows() // each limited window's use, this node's count
	status := "ok"
	if usable < len(live) {
		status = "degraded"
	}
	return out, status
}

// ConnectionWindows are the ledger's limited windows of the connections
// the config in force routes to (the quota section, and the operator
// layer's Pipeline.ConnectionWindows).
func (l *Layer) ConnectionWindows() []ops.LimitWindow {
	out := []ops.LimitWindow{}
	s := l.ledger.Snapshot()
	if s == nil {
		return out
	}
	live := map[string]bool{}
	for _, c := range l.pipe.Catalog().Connections {
		live[c.Name] = true
	}
	for _, sv := range s.Slots {
		if !live[sv.Connection] {
			continue
		}
		for _, w := range sv.Windows {
			out = append(out, ops.LimitWindow{Kind: "connection", Budget: sv.Connection, Model: sv.Model, Dimension: w.Dimension, Period: w.Period,
				Limit: int64(w.Limit), Used: int64(w.Used), Remaining: int64(w.Remaining), ResetMs: w.ResetMs})
		}
	}
	return out
}
