package transport

import (
	"context"
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
	"github.com/omniroute/gateway/transport/relayroute"
)

// sidecars is what the gateway adds around the native pipeline: the
// supervised services (planned here in Prepare, started by the root's
// transport/gateway/sidecars), the engine registry and the relay route.
type sidecars struct {
	specs   []services.Spec
	mgr     *services.Manager
	engines *engines.Registry
	checks  port.Services // the planner's and the connections' checks
	relay   *relayroute.Route
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

// ServiceSpecs are the supervised services Prepare planned, ports
// chosen (the root's transport/gateway/sidecars starts their manager).
func (a *Assembly) ServiceSpecs() []services.Spec { return a.g.side.specs }

// AttachServices hands the pipeline the started services manager and the
// engines registry (the root's transport/gateway/sidecars built them),
// which the relay is built on, and its port on the services (checks);
// it registers the relay's health section and the services' and the
// relay's metrics.
func (a *Assembly) AttachServices(mgr *services.Manager, reg *engines.Registry, checks port.Services) error {
	g := a.g
	s := g.side
	s.mgr, s.engines, s.checks = mgr, reg, checks
	var err error
	if s.relay, err = relayroute.New(relayroute.Options{Env: g.opts.Env.Relay, Upstream: g.opts.Env.Upstream,
		File: g.opts.File.Relay, Getenv: g.opts.Getenv, Engine: s.engines.RelayBackend(), Services: mgr,
		Clock: g.clk, Log: g.log, Metrics: g.metrics.set}); err != nil {
		return err
	}
	g.op.AddHealthSection("relay", s.relay.Health, briefRelay)
	g.sidecarMetrics(g.metrics.set)
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
		s.relay.Close()
	}
}

// Services returns the supervised services (nil when none are declared).
func (g *Gateway) Services() *services.Manager {
	if g.side == nil {
		return nil
	}
	return g.side.mgr
}

// serviceDown reports whether target t is served by a supervised service
// that is not running as the gateway's own child: the planner passes it
// over (transport/plan), so no prompt goes to whatever holds its port.
func (g *Gateway) serviceDown(t *catalog.Target) bool {
	name := t.Conn.Provider.Service
	if name == "" || g.side == nil || g.side.checks == nil {
		return false
	}
	return g.side.checks.Down(name)
}

// verifyService is a service:// connection's check of every new
// connection (upstream.Options.Verify): the process that accepted it is
// the service's own child (services.Handle.VerifyServer).
func (g *Gateway) verifyService(name string) error {
	if g.side == nil || g.side.checks == nil {
		return nil
	}
	return g.side.checks.Verify(name)
}

// errServiceDown answers a request whose every target is served by a
// supervised service that is not running as the gateway's own child.
func (g *Gateway) errServiceDown(model, name string) *apierror.Error {
	st := "not running"
	retry := 0
	if g.side != nil && g.side.checks != nil {
		if state, recovering, ok := g.side.checks.State(name); ok {
			st = state
			if recovering {
				retry = 1 // on its way back
			}
		}
	}
	return apierror.New(apierror.CodeServiceUnavailable, model, name, st, name).Retry(retry)
}

// Engines returns the router-backend registry.
func (g *Gateway) Engines() *engines.Registry { return g.side.engines }

// briefRelay keeps the backend choice, not the endpoint or why it is
// unavailable.
func briefRelay(body any) any { return relayroute.Brief(body, ops.DetailHint) }

// sidecarMetrics registers pull gauges that read the published service
// snapshots (the relay registers its own, relayroute.New).
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
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
