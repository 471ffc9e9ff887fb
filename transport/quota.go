package transport

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/plan"
	"github.com/omniroute/gateway/transport/upstream"
)

// targetInfo is what routing needs about a target beyond the catalog.
type targetInfo struct {
	conn     int            // connection index (catalog.Connection.ID)
	model    int            // index of the upstream model in the connection's quota spec
	slot     int            // ledger slot: one per (connection, upstream model)
	mapping  *quota.Mapping // rate-limit header mapping; nil reads none
	upstream string         // the upstream model name as the provider meters it
}

// quotaSys composes the quota telemetry actors, the token ledger and the
// routing settings.
type quotaSys struct {
	ledger *ledgeractor.Handle
	slots  []ledgeractor.SlotSpec // the ledger's start-up budgets, by slot (cluster pools)
	quota  *quotaactor.Handle
	info   *growable.List[targetInfo] // by target id
	// slotOf is the ledger slot of each "connection\x00model" (writer
	// only: start-up, then reloads under their mutex).
	slotOf    map[string]int
	aware     bool
	maxWait   time.Duration
	defOut    int64
	threshold float64
	m         quotaMetrics
}

// numSkips is how many skip reasons the routing skip counters count
// (transport/plan's, by index).
const numSkips = plan.NumSkips

type quotaMetrics struct {
	skips   *growable.List[[numSkips]*metrics.Counter] // by target
	pollOK  *growable.List[*metrics.Counter]           // by connection
	pollErr *growable.List[*metrics.Counter]
}

// upstreamName is the model name a target sends upstream (the catalog
// model's name when the target keeps the caller's name).
func upstreamName(t *catalog.Target) string { return attempt.UpstreamName(t) }

// PlanRouting plans the start-up catalog's connections and targets as a
// reload plans the ones it adds (targetset.go), and registers their
// metrics, so that the routing actors can be spawned on the plan: the
// ledger's slots, the quota actors' connections and the targets actor's
// target names.
func (a *Assembly) PlanRouting() (slots []ledgeractor.SlotSpec, conns []quotaactor.ConnSpec, targetNames []string, err error) {
	g := a.g
	cat, env := g.cat, g.opts.Env.Quota
	qs := &quotaSys{info: &growable.List[targetInfo]{}, aware: bool(env.QuotaAwareRouting),
		maxWait: env.RoutingMaxWait.Duration(), defOut: int64(env.DefaultOutputTokens), threshold: float64(env.ApproachingThreshold),
		slotOf: map[string]int{}}
	qs.m.skips, qs.m.pollOK, qs.m.pollErr = &growable.List[[numSkips]*metrics.Counter]{}, &growable.List[*metrics.Counter]{}, &growable.List[*metrics.Counter]{}
	g.qs = qs
	p, err := g.planTargets(cat.Connections, cat.Targets, nil, g.opts.File)
	if err != nil {
		return nil, nil, nil, err
	}
	g.recordPlan(p)
	qs.ledgerMetrics(g)
	qs.slots = p.slots
	names := make([]string, len(cat.Targets))
	for i, t := range cat.Targets {
		names[i] = t.Name
	}
	return p.slots, p.connSpecs, names, nil
}

// QuotaOptions are the quota actors' options: their estimates come from
// ledger, and their polls are counted in the gateway's metrics. In
// cluster mode pollers wait for the quota sharing's ownership decision
// (started by the root, transport/gateway/clusterlayer), so a
// node never polls a connection another member owns, not even before it
// has joined.
func (a *Assembly) QuotaOptions(ledger *ledgeractor.Handle) quotaactor.Options {
	g, qs := a.g, a.g.qs
	return quotaactor.Options{Threshold: qs.threshold, SharedPolls: g.opts.Env.Cluster.ClusterMode.On(),
		Estimates: func(conn int) []quota.Value { return ledger.Snapshot().Estimates(*g.reg.connNames.At(conn)) },
		OnPoll: func(conn int, ok bool) {
			if ok {
				(*qs.m.pollOK.At(conn)).Inc()
			} else {
				(*qs.m.pollErr.At(conn)).Inc()
			}
		}}
}

// TargetsOptions are the targets actor's options: breaker and cooldown
// settings from the environment. The attempts' rate-limit headers reach
// the quota and ledger actors, and cooldowns the cluster's peers, as
// messages to the actors the composition root sets up (the observations
// link, which reads QuotaRoute; the targets' cooldowns actor), never
// through code of theirs run on the targets actor.
func (a *Assembly) TargetsOptions() targets.Options {
	env := a.g.opts.Env.Quota
	return targets.Options{
		FailureThreshold: int(env.BreakerFailures),
		BackoffBase:      env.CooldownBase.Duration(), BackoffMax: env.CooldownMax.Duration(),
		HardCooldown: env.QuotaCooldown.Duration(),
	}
}

// QuotaRoute says where target's observed rate-limit headers go: its
// connection and upstream model (the quota actors) and its ledger slot.
// The composition root's observations link reads it for every
// messages.QuotaObserved; the table grows only before a target's id is
// published, so the read needs no lock.
func (a *Assembly) QuotaRoute(target int) (conn int, upstream string, slot int) {
	in := a.g.qs.info.At(target)
	return in.conn, in.upstream, in.slot
}

// AttachLink hands the front end the stop of an actor the composition
// root spawned between the routing actors (the observations link from
// the targets actor to the quota and ledger actors): Close runs it after
// the targets actor, its sender, stopped and before the actors it sends
// to stop.
func (a *Assembly) AttachLink(stop func()) { a.g.stops.links = append(a.g.stops.links, stop) }

// AttachRouting hands the front end the spawned ledger, quota and targets
// actors.
func (a *Assembly) AttachRouting(ledger *ledgeractor.Handle, q *quotaactor.Handle, t *targets.Handle) {
	a.g.qs.ledger, a.g.qs.quota, a.g.targets = ledger, q, t
	a.g.attachPlan() // the plan stage reads them (planning.go)
}

func (qs *quotaSys) stop() {
	if qs == nil {
		return
	}
	qs.quota.Stop()
	qs.ledger.Stop()
}

// targetMetrics registers the quota series of the next target id:
// counters are created up front, gauges read the published snapshots on
// scrape.
func (qs *quotaSys) targetMetrics(g *Gateway, t *catalog.Target) {
	set := g.metrics.set
	var skips [numSkips]*metrics.Counter
	for r := 0; r < numSkips; r++ {
		skips[r] = set.NewCounter(fmt.Sprintf(metric.RoutingSkipsTotal+`{target=%q,reason=%q}`, t.Name, plan.SkipNames[r]))
	}
	qs.m.skips.Append(skips)
	for _, st := range []string{"closed", "open", "half_open"} {
		id, st := t.ID, st
		set.NewGauge(fmt.Sprintf(metric.CircuitState+`{target=%q,state=%q}`, t.Name, st), func() float64 {
			if s := g.targets.Snapshot(); s != nil && id < len(s.Targets) {
				if targets.CircuitState(s.Targets[id].Open, s.Targets[id].CoolUntil, g.clk.Now()) == st {
					return 1
				}
			}
			return 0
		})
	}
	id := t.ID
	set.NewGauge(fmt.Sprintf(metric.TargetCooldownSeconds+`{target=%q}`, t.Name), func() float64 {
		if s := g.targets.Snapshot(); s != nil && id < len(s.Targets) {
			if d := s.Targets[id].CoolUntil.Sub(g.clk.Now()); d > 0 {
				return d.Seconds()
			}
		}
		return 0
	})
}

// connMetrics registers the quota series of the next connection id.
func (qs *quotaSys) connMetrics(g *Gateway, c *catalog.Connection) {
	set := g.metrics.set
	qs.m.pollOK.Append(set.NewCounter(fmt.Sprintf(metric.QuotaPollsTotal+`{connection=%q,outcome="ok"}`, c.Name)))
	qs.m.pollErr.Append(set.NewCounter(fmt.Sprintf(metric.QuotaPollsTotal+`{connection=%q,outcome="error"}`, c.Name)))
	for _, st := range quota.Statuses {
		id, st := c.ID, st
		set.NewGauge(fmt.Sprintf(metric.QuotaModels+`{connection=%q,state=%q}`, c.Name, st.String()), func() float64 {
			cs := qs.quota.State(id)
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
func (qs *quotaSys) ledgerMetrics(g *Gateway) {
	g.metrics.set.NewGauge(metric.LedgerReservedTokens, func() float64 {
		var n uint64
		if s := qs.ledger.Snapshot(); s != nil {
			for i := range s.Slots {
				if s.Slots[i].Tokens != nil {
					n += s.Slots[i].Tokens.Used
				}
			}
		}
		return float64(n)
	})
}

// quotaHealth is the "quota" section of /api/monitoring/health: how many
// connections are in each state, how many targets are cooling down or
// have an open circuit. It is degraded while any target is out; it is
// never down, because a cooling target recovers by itself.
func (g *Gateway) quotaHealth() (any, string) {
	qs := g.qs
	now := g.clk.Now()
	byStatus := map[string]int{}
	for i := 0; i < qs.quota.Len(); i++ {
		if st := qs.quota.State(i); st != nil {
			byStatus[st.Status.String()]++
		}
	}
	out := map[string]any{"quotaAwareRouting": qs.aware, "connections": byStatus}
	cooling, open, halfOpen, exhausted, usable := 0, 0, 0, 0, 0
	snap := g.targets.Snapshot()
	live := g.rc.Load().cat.Targets // the targets the config in force routes to
	for _, t := range live {
		in := qs.info.At(t.ID)
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
		if qs.quota.ModelStatus(in.conn, in.model, now) == quota.StatusExhausted {
			exhausted++
			out = true
		}
		if !out {
			usable++
		}
	}
	out["targets"] = map[string]int{"usable": usable, "cooling": cooling, "circuitOpen": open, "circuitHalfOpen": halfOpen, "quotaExhausted": exhausted}
	out["windows"] = g.connectionWindows() // each limited window's use, this node's count
	status := "ok"
	if usable < len(live) {
		status = "degraded"
	}
	return out, status
}

// connectionWindows are the ledger's limited windows of the connections
// the config in force routes to (the quota section, and the operator
// layer's Pipeline.ConnectionWindows).
func (g *Gateway) connectionWindows() []ops.LimitWindow {
	out := []ops.LimitWindow{}
	s := g.qs.ledger.Snapshot()
	if s == nil {
		return out
	}
	live := map[string]bool{}
	for _, c := range g.rc.Load().cat.Connections {
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

// observe parses the response's rate-limit headers through the target's
// explicit mapping (and the retry hint of any error) into the attempt's
// observation. Nothing is allocated unless there is something to report.
func (c *call) observe(t *catalog.Target, x *upstream.Exchange, status int) {
	in := c.g.qs.info.At(t.ID)
	if in.mapping == nil && status < 300 {
		return
	}
	var b quota.Builder
	b.Reset(in.mapping, c.g.clk.Now())
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
