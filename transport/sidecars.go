package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/upstream"
)

// sidecars is what the gateway adds around the native pipeline: the
// supervised services, the engine registry and the relay route.
type sidecars struct {
	specs   []services.Spec
	mgr     *services.Manager
	engines *engines.Registry
	relay   *relayRoute
}

// planServices resolves the services section (choosing free ports now, so
// provider addresses are known before any process runs) and, unless the
// embedder resolves service names itself, points service:// providers at
// the supervised services.
func (g *Gateway) planServices() error {
	ports := map[string]int{}
	if p := int(g.opts.Env.Relay.BifrostPort); p > 0 {
		ports["bifrost"] = p
	}
	specs, err := services.FromConfig(g.opts.File.Services, services.BuildOptions{
		DataDir: g.opts.Env.ResolvedDataDir(), Getenv: g.opts.Getenv, Ports: ports})
	if err != nil {
		return err
	}
	g.side = &sidecars{specs: specs}
	if g.opts.ServiceAddr == nil && len(specs) > 0 {
		g.opts.ServiceAddr = func(name string) (string, error) {
			for i := range specs {
				if specs[i].Name == name {
					return specs[i].Addr(), nil
				}
			}
			return "", fmt.Errorf("service %q is not declared in services", name)
		}
	}
	return nil
}

// autoStartWait bounds how long AttachServices waits for auto-start
// services.
const autoStartWait = 60 * time.Second

// ServicesPlan builds the engines registry and returns the supervised
// services (planned by Prepare, ports chosen) and the options their
// manager is started with.
func (a *Assembly) ServicesPlan() ([]services.Spec, services.Options) {
	g := a.g
	s := g.side
	s.engines = engines.Build(g.opts.File, g.opts.Env.Relay.BifrostURL())
	return s.specs, services.Options{
		DataDir: g.opts.Env.ResolvedDataDir(), Clock: g.clk, Logger: g.log.With("component", "services"), Redact: g.redact.String}
}

// AttachServices hands the front end the started services manager,
// builds the relay, registers health sections and metrics, then starts
// the auto-start services and waits for them (at most autoStartWait), so
// that the first request finds them up.
func (a *Assembly) AttachServices(mgr *services.Manager) error {
	g := a.g
	s := g.side
	s.mgr = mgr
	var err error
	if s.relay, err = g.newRelayRoute(); err != nil {
		return err
	}
	g.health = append(g.health, healthSection{name: "services", fn: g.servicesHealth, brief: briefServices},
		healthSection{name: "engines", fn: g.enginesHealth, brief: briefEngines},
		healthSection{name: "relay", fn: g.relayHealth, brief: briefRelay})
	g.sidecarMetrics(g.metrics.set)
	ctx, cancel := context.WithTimeout(context.Background(), autoStartWait)
	defer cancel()
	for _, st := range mgr.StartAuto(ctx) {
		msg := ""
		if st.LastError != nil {
			msg = *st.LastError
		}
		g.log.Warn("auto-start service did not come up", "service", st.Tool, "state", string(st.State), "error", msg)
	}
	return nil
}

// closeSidecars stops every supervised child and the relay's clients.
func (g *Gateway) closeSidecars() {
	s := g.side
	if s == nil {
		return
	}
	if s.mgr != nil {
		s.mgr.Close(context.Background())
	}
	if s.relay != nil {
		s.relay.close()
	}
}

// Services returns the supervised services (nil when none are declared).
func (g *Gateway) Services() *services.Manager {
	if g.side == nil {
		return nil
	}
	return g.side.mgr
}

// serviceHandle returns the supervised service named name, or nil when
// the gateway supervises none of that name (an embedder that resolves
// service names itself, Options.ServiceAddr).
func (g *Gateway) serviceHandle(name string) *services.Handle {
	if g.side == nil {
		return nil
	}
	h, _ := g.side.mgr.Get(name)
	return h
}

// serviceDown reports whether target t is served by a supervised service
// that is not running as the gateway's own child: the planner passes it
// over (route.go), so no prompt goes to whatever holds its port.
func (g *Gateway) serviceDown(t *catalog.Target) bool {
	name := t.Conn.Provider.Service
	if name == "" {
		return false
	}
	h := g.serviceHandle(name)
	return h != nil && !h.Serving()
}

// verifyService is a service:// connection's check of every new
// connection (upstream.Options.Verify): the process that accepted it is
// the service's own child (services.Handle.VerifyServer).
func (g *Gateway) verifyService(name string) error {
	if h := g.serviceHandle(name); h != nil {
		return h.VerifyServer()
	}
	return nil
}

// errServiceDown answers a request whose every target is served by a
// supervised service that is not running as the gateway's own child.
func (g *Gateway) errServiceDown(model, name string) *apierror.Error {
	st := "not running"
	retry := 0
	if h := g.serviceHandle(name); h != nil {
		s := h.Status()
		st = string(s.State)
		if s.State == services.Starting || s.NextRestartAt != nil {
			retry = 1 // on its way back
		}
	}
	return apierror.New(apierror.CodeServiceUnavailable, model, name, st, name).Retry(retry)
}

// Engines returns the router-backend registry.
func (g *Gateway) Engines() *engines.Registry { return g.side.engines }

func (g *Gateway) servicesHealth() (any, string) {
	status := "ok"
	list := []services.Status{}
	for _, h := range g.side.mgr.All() {
		st := h.Status()
		if st.AutoStart && st.Installed && !st.Usable() {
			status = "degraded"
		}
		list = append(list, st)
	}
	return map[string]any{"services": list}, status
}

// briefServices is the services section for callers the management
// routes refuse: each service's state and health, no pid, port or error.
func briefServices(body any) any {
	full, _ := body.(map[string]any)
	list, _ := full["services"].([]services.Status)
	out := make([]map[string]string, 0, len(list))
	for _, st := range list {
		out = append(out, map[string]string{"tool": st.Tool, "state": string(st.State), "health": string(st.Health)})
	}
	return map[string]any{"services": out, "detail": detailHint}
}

// briefEngines keeps each engine's id and state.
func briefEngines(body any) any {
	full, _ := body.(map[string]any)
	list, _ := full["engines"].([]engineView)
	out := make([]map[string]string, 0, len(list))
	for _, e := range list {
		out = append(out, map[string]string{"id": e.ID, "state": e.State})
	}
	return map[string]any{"engines": out, "detail": detailHint}
}

// briefRelay keeps the backend choice, not the endpoint or why it is
// unavailable.
func briefRelay(body any) any {
	full, _ := body.(map[string]any)
	return map[string]any{"backend": full["backend"], "configuredBackend": full["configuredBackend"], "detail": detailHint}
}

const detailHint = "pids, ports, endpoints and errors are shown to callers allowed on the management routes (loopback, or the management key)"

// engineView is an engine with the live state of its service.
type engineView struct {
	*engines.Engine
	State  string `json:"state"`
	Health string `json:"health,omitempty"`
}

func (g *Gateway) engineViews(filter engines.Capability) []engineView {
	list := g.side.engines.All()
	if filter != "" {
		list = g.side.engines.WithCapability(filter)
	}
	out := make([]engineView, 0, len(list))
	for _, e := range list {
		v := engineView{Engine: e}
		switch e.Lifecycle {
		case engines.InProcess:
			v.State = "running"
		case engines.Disabled:
			v.State = "disabled"
		case engines.External:
			v.State = "external"
		case engines.Supervised:
			if h, ok := g.side.mgr.Get(e.Service); ok {
				st := h.Status()
				v.State, v.Health = string(st.State), string(st.Health)
			}
		}
		out = append(out, v)
	}
	return out
}

func (g *Gateway) enginesHealth() (any, string) {
	return map[string]any{"engines": g.engineViews("")}, "ok"
}

func (g *Gateway) relayHealth() (any, string) {
	r := g.side.relay
	base, why := g.bifrostEndpoint()
	backend, _ := r.backend(base)
	out := map[string]any{
		"configuredBackend": string(r.env.Backend()),
		"backend":           string(backend),
		"tokens":            r.tokens.Len(),
		"bifrost": map[string]any{
			"enabled":             bool(r.env.BifrostEnabled),
			"streaming":           bool(r.env.BifrostStreaming),
			"endpoint":            base,
			"unavailableReason":   why,
			"cooldownRemainingMs": r.cool.Remaining(base, g.clk.Now()).Milliseconds(),
			"timeoutMs":           int64(r.env.BifrostTimeout),
		},
	}
	return out, "ok"
}

// sidecarMetrics registers pull gauges that read the published service
// snapshots, and the relay's counters.
func (g *Gateway) sidecarMetrics(set *metrics.Set) {
	for _, h := range g.side.mgr.All() {
		h := h
		name := h.Name()
		for _, st := range services.AllStates {
			st := st
			set.NewGauge(fmt.Sprintf(metric.ServiceState+`{service=%q,state=%q}`, name, st), func() float64 { return b2f(h.Status().State == st) })
		}
		for _, he := range services.AllHealth {
			he := he
			set.NewGauge(fmt.Sprintf(metric.ServiceHealth+`{service=%q,health=%q}`, name, he), func() float64 { return b2f(h.Status().Health == he) })
		}
		set.NewGauge(fmt.Sprintf(metric.ServiceRestartsTotal+`{service=%q}`, name), func() float64 { return float64(h.Status().Restarts) })
		set.NewGauge(fmt.Sprintf(metric.ServiceCrashes+`{service=%q}`, name), func() float64 { return float64(h.Status().Crashes) })
		set.NewGauge(fmt.Sprintf(metric.ServiceGaveUp+`{service=%q}`, name), func() float64 { return b2f(h.Status().GaveUp) })
		set.NewGauge(fmt.Sprintf(metric.ServiceLogBytes+`{service=%q}`, name), func() float64 { return float64(h.Logs().Bytes()) })
	}
	r := g.side.relay
	r.m.native = set.NewCounter(metric.RelayRequestsTotal + `{backend="native"}`)
	r.m.bifrost = set.NewCounter(metric.RelayRequestsTotal + `{backend="bifrost"}`)
	r.m.bifrostFailures = set.NewCounter(metric.RelayBifrostFailuresTotal)
	for _, reason := range relay.Fallbacks() {
		r.m.fallback[reason] = set.NewCounter(fmt.Sprintf(metric.RelayFallbacksTotal+`{reason=%q}`, reason))
	}
	for _, reason := range relay.Rejections() {
		r.m.rejected[reason] = set.NewCounter(fmt.Sprintf(metric.RelayRejectedTotal+`{reason=%q}`, reason))
	}
	set.NewGauge(metric.RelayBifrostCooldownSeconds, func() float64 {
		base, _ := g.bifrostEndpoint()
		return r.cool.Remaining(base, g.clk.Now()).Seconds()
	})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// client returns the pooled upstream client for a Bifrost host:port.
func (r *relayRoute) client(hostport string, tls bool, g *Gateway) *upstream.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[hostport]; ok {
		return c
	}
	u := g.opts.Env.Upstream
	timeout := r.env.BifrostTimeout.Duration()
	o := upstream.Options{Addr: hostport, TLS: tls, MaxConns: int(u.MaxConns),
		ConnectTimeout: min(u.ConnectTimeout.Duration(), timeout), TTFBTimeout: timeout,
		TotalTimeout: max(u.TotalTimeout.Duration(), timeout), MaxResponseBytes: int(u.MaxResponseBytes)}
	for _, h := range g.side.mgr.All() {
		if !tls && h.Addr() == hostport {
			o.Verify = h.VerifyServer // a supervised Bifrost: only its own child
		}
	}
	c := upstream.New(o)
	r.clients[hostport] = c
	return c
}

func (r *relayRoute) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		c.Close()
	}
}
