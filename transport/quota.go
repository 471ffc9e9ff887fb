package transport

import (
	"fmt"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/planner"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
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
	ledger    *ledgeractor.Handle
	slots     []ledgeractor.SlotSpec // the ledger's budgets, by slot
	quota     *quotaactor.Handle
	info      []targetInfo // by target id
	aware     bool
	maxWait   time.Duration
	defOut    int64
	threshold float64
	m         quotaMetrics
}

// Routing skip reasons, for metrics (internal/planner's, by index).
const (
	skipCooling   = planner.SkipCooling
	skipCircuit   = planner.SkipCircuit
	skipExhausted = planner.SkipExhausted
	skipBudget    = planner.SkipBudget
	numSkips      = planner.NumSkips
)

var skipNames = [numSkips]string{"cooling", "circuit_open", "quota_exhausted", "token_budget"}

type quotaMetrics struct {
	skips   [][numSkips]*metrics.Counter // by target
	pollOK  []*metrics.Counter           // by connection
	pollErr []*metrics.Counter
}

// upstreamName is the model name a target sends upstream (the catalog
// model's name when the target keeps the caller's name).
func upstreamName(t *catalog.Target) string {
	if t.UpstreamModel != "" {
		return t.UpstreamModel
	}
	return strings.TrimPrefix(t.Name, t.Conn.Name+"/")
}

// spawnRouting starts the ledger, the quota actors and the targets actor
// (whose attempt reports carry the header observations the other two
// need).
func (g *Gateway) spawnRouting(system *actor.ActorSystem, names []string) error {
	cat, env := g.cat, g.opts.Env.Quota
	qs := &quotaSys{info: make([]targetInfo, len(cat.Targets)), aware: bool(env.QuotaAwareRouting),
		maxWait: env.RoutingMaxWait.Duration(), defOut: int64(env.DefaultOutputTokens), threshold: float64(env.ApproachingThreshold)}
	g.qs = qs
	specs := make([]quotaactor.ConnSpec, len(cat.Connections))
	var slots []ledgeractor.SlotSpec
	slotOf := map[string]int{}
	for _, c := range cat.Connections {
		p := c.Provider
		m, err := config.HeaderMapping(p.Quota)
		if err != nil {
			return fmt.Errorf("providers.%s: %w", p.ID, err)
		}
		spec := quotaactor.ConnSpec{Provider: p.ID, Name: c.Name, Mapping: m}
		if l := c.Limits; l.TokensPerMinute > 0 || l.RequestsPerMinute > 0 {
			for _, d := range []struct {
				dim   messages.QuotaDimension
				limit int64
				unit  string
			}{{messages.DimTokens, l.TokensPerMinute, "tokens"}, {messages.DimRequests, l.RequestsPerMinute, "requests"}} {
				if d.limit > 0 {
					spec.Configured = append(spec.Configured, quota.Value{Dimension: d.dim, Flags: quota.HasLimit, Limit: float64(d.limit),
						Unit: d.unit + "/min", Source: quota.SourceConfigured, Confidence: quota.ConfidenceHigh})
				}
			}
		}
		// Budgets exist when limits are configured or may arrive in headers.
		spec.Budgeted = c.Limits.TokensPerMinute > 0 || c.Limits.RequestsPerMinute > 0 || m != nil
		if q := p.Quota.QuotaAPI; q != nil {
			spec.Poll = &quotaactor.PollSpec{Kind: q.Kind, BaseURL: q.PollBaseURL(p.BaseURL), Interval: q.PollInterval(), Timeout: q.PollTimeout(), APIKey: c.APIKey()}
		}
		specs[c.ID] = spec
	}
	for _, t := range cat.Targets {
		up := upstreamName(t)
		spec := &specs[t.Conn.ID]
		mi := -1
		for i, m := range spec.Models {
			if m == up {
				mi = i
			}
		}
		if mi < 0 {
			mi = len(spec.Models)
			spec.Models = append(spec.Models, up)
		}
		key := t.Conn.Name + "\x00" + up
		slot, ok := slotOf[key]
		if !ok {
			slot = len(slots)
			slotOf[key] = slot
			slots = append(slots, ledgeractor.SlotSpec{Connection: t.Conn.Name, Model: up,
				TokensPerMinute: t.Conn.Limits.TokensPerMinute, RequestsPerMinute: t.Conn.Limits.RequestsPerMinute})
		}
		qs.info[t.ID] = targetInfo{conn: t.Conn.ID, model: mi, slot: slot, mapping: spec.Mapping, upstream: up}
	}
	qs.createMetrics(g)
	var err error
	qs.slots = slots
	if qs.ledger, err = ledgeractor.Spawn(system, slots, g.clk); err != nil {
		return err
	}
	ledgerH := qs.ledger
	qs.quota, err = quotaactor.Spawn(system, specs, g.clk, quotaactor.Options{Threshold: qs.threshold,
		Estimates: func(conn int) []quota.Value { return ledgerH.Snapshot().Estimates(cat.Connections[conn].Name) },
		OnPoll: func(conn int, ok bool) {
			if ok {
				qs.m.pollOK[conn].Inc()
			} else {
				qs.m.pollErr[conn].Inc()
			}
		}})
	if err != nil {
		qs.ledger.Stop()
		return err
	}
	g.targets, err = targets.SpawnWith(system, names, g.clk, targets.Options{
		FailureThreshold: int(env.BreakerFailures),
		BackoffBase:      env.CooldownBase.Duration(), BackoffMax: env.CooldownMax.Duration(),
		HardCooldown: env.QuotaCooldown.Duration(),
		OnObservation: func(target int, obs *messages.QuotaObservation) {
			in := &qs.info[target]
			qs.quota.Observe(in.conn, in.upstream, obs)
			qs.ledger.ObserveLimits(in.slot, obs)
		},
		OnCooldown: g.onCooldown, // cluster mode tells the peers
	})
	if err != nil {
		qs.quota.Stop()
		qs.ledger.Stop()
		return err
	}
	return nil
}

func (qs *quotaSys) stop() {
	if qs == nil {
		return
	}
	qs.quota.Stop()
	qs.ledger.Stop()
}

// createMetrics registers the quota series on the gateway's set: counters
// are created up front, gauges read the published snapshots on scrape.
func (qs *quotaSys) createMetrics(g *Gateway) {
	set, cat := g.metrics.set, g.cat
	qs.m.skips = make([][numSkips]*metrics.Counter, len(cat.Targets))
	for i, t := range cat.Targets {
		for r := 0; r < numSkips; r++ {
			qs.m.skips[i][r] = set.NewCounter(fmt.Sprintf(`omniroute_routing_skips_total{target=%q,reason=%q}`, t.Name, skipNames[r]))
		}
		for _, st := range []string{"closed", "open", "half_open"} {
			id, st := t.ID, st
			set.NewGauge(fmt.Sprintf(`omniroute_circuit_state{target=%q,state=%q}`, t.Name, st), func() float64 {
				if s := g.targets.Snapshot(); s != nil && id < len(s.Targets) {
					if targets.CircuitState(s.Targets[id].Open, s.Targets[id].CoolUntil, g.clk.Now()) == st {
						return 1
					}
				}
				return 0
			})
		}
		id := t.ID
		set.NewGauge(fmt.Sprintf(`omniroute_target_cooldown_seconds{target=%q}`, t.Name), func() float64 {
			if s := g.targets.Snapshot(); s != nil && id < len(s.Targets) {
				if d := s.Targets[id].CoolUntil.Sub(g.clk.Now()); d > 0 {
					return d.Seconds()
				}
			}
			return 0
		})
	}
	for _, c := range cat.Connections {
		qs.m.pollOK = append(qs.m.pollOK, set.NewCounter(fmt.Sprintf(`omniroute_quota_polls_total{connection=%q,outcome="ok"}`, c.Name)))
		qs.m.pollErr = append(qs.m.pollErr, set.NewCounter(fmt.Sprintf(`omniroute_quota_polls_total{connection=%q,outcome="error"}`, c.Name)))
		for _, st := range quota.Statuses {
			id, st := c.ID, st
			set.NewGauge(fmt.Sprintf(`omniroute_quota_models{connection=%q,state=%q}`, c.Name, st.String()), func() float64 {
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
	set.NewGauge(`omniroute_ledger_reserved_tokens`, func() float64 {
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
		in := &qs.info[t.ID]
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
	status := "ok"
	if usable < len(live) {
		status = "degraded"
	}
	return out, status
}
