package transport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/fusion"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
)

// Config reload (SIGHUP in cmd/omniroute, POST /api/config/reload).
//
// Everything a request routes by that the config file decides (the
// catalog with its models, aliases, patterns and default model; the
// config-file tenants' resolver; prices; fusion panels; round-robin
// cursors) lives in one immutable routingConfig, published through an
// atomic pointer. A request loads it once, when it starts (call.rc), and
// keeps it to its end, so a request or stream in flight finishes on the
// config it began with while new requests see the new one.
//
// The per-target state the actors own (circuits and cooldowns, quota,
// token budgets, admission limits and lanes, metrics) is indexed by
// target and connection ids that never change; a reloaded catalog is
// renumbered onto them (catalog.Onto), so a target that survives keeps
// its state, a removed one keeps its (unused) state until it comes back,
// and a new one gets the next id and is registered with every actor
// before the config naming it is published (targetset.go, and the
// root's transport/gateway/routing through port.Routing). The
// config-file tenants go to the keys actor in one message
// (keys.Handle.SetConfig), which keeps the run-time keys and republishes
// the snapshot the limiter follows.

// ConfigReloadPath is the management route that re-reads the config file.
const ConfigReloadPath = ops.ReloadPath

// routingConfig is one loaded config file, resolved. Immutable once
// published, except the round-robin cursors, which are atomics.
type routingConfig struct {
	file    *config.File
	cat     *catalog.Catalog
	tenants *tenant.Resolver
	// price is each target's price, by target ID (start-up numbering).
	price limits.Prices
	// models is the model table with the file's model_info; info is what
	// it says of each target's model, by target ID (transport/attempt).
	models *modelinfo.Table
	info   []*modelinfo.Info
	fusion []*fusion.Model // by model index
	rr     []atomic.Uint64 // round-robin cursor by model index
	config []keys.ConfigTenant
	// version counts the configs loaded (1: the one the gateway started
	// with); hash is the SHA-256 of the file's canonical JSON (the decoded
	// file encoded again, so formatting and key order do not count).
	version  uint64
	hash     string
	loadedAt time.Time
}

// ConfigInfo describes the config in force (the operator APIs show it).
type ConfigInfo = ops.ConfigInfo

// ConfigInfo returns the version, hash and load time of the config in force.
func (g *Gateway) ConfigInfo() ConfigInfo {
	rc := g.rc.Load()
	src := g.opts.Env.Server.ConfigPath
	if src == "" {
		src = "options"
	}
	return ConfigInfo{Version: rc.version, Hash: rc.hash, LoadedAt: rc.loadedAt.UTC(), Source: src,
		Models: len(rc.cat.Models), Targets: len(rc.cat.Targets)}
}

// reloadState serialises reloads and holds their metrics.
type reloadState struct {
	mu      sync.Mutex
	results map[string]*metrics.Counter // by ReloadResult.Result
}

// The results of a reload, the values of the metric's result label.
const (
	reloadOK           = ops.ReloadOK
	reloadInvalid      = ops.ReloadInvalid
	reloadNeedsRestart = ops.ReloadNeedsRestart
	reloadUnreadable   = ops.ReloadUnreadable
)

// ReloadResult is the answer of a reload (ops.ReloadResult).
type ReloadResult = ops.ReloadResult

// buildRouting resolves f, whose catalog is cat (numbered: built first,
// or renumbered by Onto), into a routing config for a gateway that will
// number nTargets targets. Every problem is returned, each a message
// starting with what it is about.
func (g *Gateway) buildRouting(f *config.File, cat *catalog.Catalog, nTargets int) (rc *routingConfig, problems []string) {
	o := g.opts
	o.File = f
	res, err := limits.Resolver(f, &o.Env, o.Getenv)
	if err != nil {
		return nil, errorList(err)
	}
	rc = &routingConfig{file: f, cat: cat, tenants: res, rr: make([]atomic.Uint64, len(cat.Models))}
	rc.price = limits.BuildPrices(modelinfo.Prices(f.Prices), cat, nTargets)
	rc.models = modelinfo.New(f.ModelInfo)
	rc.info = attempt.BuildInfo(rc.models, cat, nTargets)
	if rc.fusion, err = fusion.Build(f, cat); err != nil {
		problems = append(problems, errorList(err)...)
	}
	digest := func(i int, t config.Tenant) ([32]byte, error) { return limits.KeyDigest(o.Getenv, i, t) }
	if rc.config, err = limits.ConfigTenants(f.Tenants, digest, cat, int64(o.Env.Quota.DefaultOutputTokens)); err != nil {
		problems = append(problems, errorList(err)...)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	rc.hash = fileHash(f)
	return rc, nil
}

// errorList splits a validation error into its problems.
func errorList(err error) []string {
	var es config.Errors
	if errors.As(err, &es) {
		return append([]string(nil), es...)
	}
	return []string{err.Error()}
}

// fileHash is a short content hash of f: SHA-256 of its canonical JSON,
// the first 12 hex digits.
func fileHash(f *config.File) string {
	b, err := json.Marshal(f)
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// needsRestart lists the settings of next that differ from cur but are
// read only at start: services, engines, the relay, provider rate-limit
// header mappings, and in cluster mode connection limits (the cluster's
// shared budget pools keep theirs), of providers and connections that
// exist in both (new ones start with the new file's settings). A changed
// endpoint, API key, usage API, max_conns, limits or max_concurrent is
// applied at run time (transport/gateway/routing's plan).
func needsRestart(cur, next *config.File, cluster bool) []string {
	out := []string{}
	same := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	if !same(cur.Services, next.Services) {
		out = append(out, "services")
	}
	if !same(cur.Engines, next.Engines) {
		out = append(out, "engines")
	}
	if !same(cur.Relay, next.Relay) {
		out = append(out, "relay")
	}
	for _, pid := range slices.Sorted(maps.Keys(next.Providers)) {
		np, ok := cur.Providers[pid]
		if !ok {
			continue
		}
		p := next.Providers[pid]
		if np.RateLimitHeaders != p.RateLimitHeaders || !same(np.CustomRateLimitHeaders, p.CustomRateLimitHeaders) {
			out = append(out, "providers."+pid+".rate_limit_headers")
		}
		if !cluster {
			continue
		}
		for _, cid := range slices.Sorted(maps.Keys(p.Connections)) {
			if oc, ok := np.Connections[cid]; ok && !reflect.DeepEqual(oc.Limits, p.Connections[cid].Limits) {
				out = append(out, "providers."+pid+".connections."+cid+".limits")
			}
		}
	}
	return out
}

// initRouting publishes the start-up routing config.
func (g *Gateway) initRouting() error {
	rc, probs := g.buildRouting(g.opts.File, g.cat, len(g.cat.Targets))
	if len(probs) > 0 {
		return config.Errors(probs)
	}
	rc.version, rc.loadedAt = 1, g.clk.Now()
	g.rc.Store(rc)
	return nil
}

// reloadMetrics registers the reload counters and the config gauges.
func (g *Gateway) reloadMetrics() {
	g.reload.results = map[string]*metrics.Counter{}
	for _, r := range ops.ReloadResults {
		g.reload.results[r] = g.metrics.set.NewCounter(fmt.Sprintf(metric.ConfigReloadsTotal+`{result=%q}`, r))
	}
	g.metrics.set.NewGauge(metric.ConfigLoadedTimestampSeconds, func() float64 {
		return float64(g.rc.Load().loadedAt.UnixMilli()) / 1000
	})
	g.metrics.set.NewGauge(metric.ConfigVersion, func() float64 { return float64(g.rc.Load().version) })
}

// ReloadConfig re-reads the config file (OMNIROUTE_CONFIG) and, when it
// is valid and needs nothing only a restart can do, puts it in force for
// every request that starts from now on. Otherwise the running config
// stays and the result lists why. Reloads are serialised.
func (g *Gateway) ReloadConfig() ReloadResult {
	path := g.opts.Env.Server.ConfigPath
	if path == "" {
		return g.reloadDone(ReloadResult{Result: reloadUnreadable, Errors: []string{"the gateway was started without a config file (OMNIROUTE_CONFIG is unset): there is nothing to re-read; set OMNIROUTE_CONFIG and restart"}})
	}
	f, err := config.ReadFile(path)
	if err != nil {
		res := reloadInvalid
		var pe *fs.PathError // the file cannot be opened or read
		if errors.As(err, &pe) {
			res = reloadUnreadable
		}
		return g.reloadDone(ReloadResult{Result: res, Errors: errorList(err)})
	}
	return g.ReloadFile(f)
}

// ReloadFile is ReloadConfig with a file already decoded (embedders
// that keep their config elsewhere).
//
// The file is validated whole first (catalog, endpoints, tenants, fusion
// panels); then what it adds is registered with every actor (port.Routing),
// its secrets join the redactor, the keys actor takes its tenants, and
// only then is the new config published. Connections it removes stop
// their quota telemetry after that.
func (g *Gateway) ReloadFile(f *config.File) ReloadResult {
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	if g.closed.Load() {
		return g.reloadDone(ReloadResult{Result: reloadUnreadable, Errors: []string{errReloadClosed.Error()}})
	}
	if g.reg.broken != nil {
		return g.reloadDone(ReloadResult{Result: reloadNeedsRestart, Errors: []string{g.reg.broken.Error()}})
	}
	cur := g.rc.Load()
	cat, err := catalog.Build(f, g.opts.Getenv)
	if err != nil {
		return g.reloadDone(ReloadResult{Result: reloadInvalid, Errors: errorList(err)})
	}
	newConns, newTargets := cat.Onto(g.reg.ids)
	plan, err := g.routing.Plan(newConns, newTargets, cat, f)
	if err != nil {
		return g.reloadDone(ReloadResult{Result: reloadInvalid, Errors: errorList(err)})
	}
	rc, probs := g.buildRouting(f, cat, g.reg.targetNames.Len()+len(newTargets))
	if len(probs) > 0 {
		return g.reloadDone(ReloadResult{Result: reloadInvalid, Errors: probs})
	}
	if err := g.applyPlan(plan); err != nil {
		return g.reloadDone(ReloadResult{Result: reloadNeedsRestart, Errors: []string{err.Error()}})
	}
	g.redact.Add(g.secrets(f, cat)...)
	if err := g.ten.SetConfig(rc.config); err != nil {
		return g.reloadDone(ReloadResult{Result: reloadInvalid, Errors: []string{err.Error()}})
	}
	rc.version, rc.loadedAt = cur.version+1, g.clk.Now()
	g.rc.Store(rc)
	g.routing.Retire(plan, cat)
	r := ReloadResult{Applied: true, Result: reloadOK, Changed: rc.hash != cur.hash, NeedsRestart: needsRestart(cur.file, f, g.cs != nil)}
	g.log.Info("config reloaded", "version", rc.version, "hash", rc.hash, "changed", r.Changed,
		"models", len(rc.cat.Models), "targets", len(rc.cat.Targets), "newConnections", len(plan.Conns), "newTargets", len(plan.Targets),
		"restartedConnections", plan.Restarted, "removedConnections", plan.Removed, "needsRestart", r.NeedsRestart)
	return g.reloadDone(r)
}

func (g *Gateway) reloadDone(r ReloadResult) ReloadResult {
	g.reload.results[r.Result].Inc()
	r.Config = g.ConfigInfo()
	if r.NeedsRestart == nil {
		r.NeedsRestart = []string{}
	}
	if !r.Applied {
		g.log.Warn("config reload refused; the running config stays", "result", r.Result, "errors", r.Errors)
	}
	return r
}
