// Package sidecars is the supervised services' part of the composition
// root: it builds the engines registry and the services manager's
// options, starts the manager on the services the pipeline planned
// (transport.Prepare chooses their ports, so that providers' addresses
// are known before any process runs), hands both to the pipeline (the
// planner passes over a service that is down, connections verify the
// service's own child, the relay finds Bifrost), adds the services and
// engines health sections, and waits for the auto-start services. Its
// Services is what the services and engines APIs serve (ops.Services).
//
// It does not import transport (whose internal tests compose a gateway
// with the root's packages).
package sidecars

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// Source is what the root starts the services from (*transport.Assembly).
type Source interface {
	Clock() clock.Clock
	Logger() *slog.Logger
	Env() config.Env
	// File is the config file the gateway started on (its services and
	// engines sections).
	File() *config.File
	// Redact removes secrets from a service's log lines, as from every
	// other log line (internal/sanitize).
	Redact(s string) string
	// ServiceSpecs are the services the pipeline planned, ports chosen.
	ServiceSpecs() []services.Spec
	// AttachServices hands the pipeline the started manager and the
	// engines registry (it builds the relay on them) and its port on the
	// services.
	AttachServices(*services.Manager, *engines.Registry, port.Services) error
}

// autoStartWait bounds how long Start waits for auto-start services.
const autoStartWait = 60 * time.Second

// Services are the supervised services and the engines registry, as the
// operator APIs and health show them.
type Services struct {
	mgr *services.Manager
	reg *engines.Registry
}

// Start starts the services' supervisors, hands them to the pipeline,
// adds the services and engines health sections to op, then starts the
// auto-start services and waits for them (at most autoStartWait), so that
// the first request finds them up. On an error the pipeline's Close
// stops what was started.
func Start(system *actor.ActorSystem, src Source, op port.Operator) (*Services, error) {
	env := src.Env()
	reg := engines.Build(src.File(), env.Relay.BifrostURL())
	mgr, err := services.Start(system, src.ServiceSpecs(), services.Options{
		DataDir: env.ResolvedDataDir(), Clock: src.Clock(), Logger: src.Logger().With("component", "services"), Redact: src.Redact})
	if err != nil {
		return nil, err
	}
	s := &Services{mgr: mgr, reg: reg}
	if err := src.AttachServices(mgr, reg, s); err != nil {
		return nil, err
	}
	op.AddHealthSection("services", s.health, briefServices)
	op.AddHealthSection("engines", s.enginesHealth, briefEngines)
	ctx, cancel := context.WithTimeout(context.Background(), autoStartWait)
	defer cancel()
	log := src.Logger()
	for _, st := range mgr.StartAuto(ctx) {
		msg := ""
		if st.LastError != nil {
			msg = *st.LastError
		}
		log.Warn("auto-start service did not come up", "service", st.Tool, "state", string(st.State), "error", msg)
	}
	return s, nil
}

// The pipeline's port on the services (port.Services).

// Down reports that the supervised service name is not serving as the
// gateway's own child (false when none of that name is supervised).
func (s *Services) Down(name string) bool {
	h, ok := s.mgr.Get(name)
	return ok && !h.Serving()
}

// Verify checks that the process behind a new connection to service name
// is its own child (services.Handle.VerifyServer).
func (s *Services) Verify(name string) error {
	if h, ok := s.mgr.Get(name); ok {
		return h.VerifyServer()
	}
	return nil
}

// State is the supervised service's state and whether it is on its way
// back (starting, or a restart scheduled).
func (s *Services) State(name string) (state string, recovering, ok bool) {
	h, ok := s.mgr.Get(name)
	if !ok {
		return "", false, false
	}
	st := h.Status()
	return string(st.State), st.State == services.Starting || st.NextRestartAt != nil, true
}

// The services and engines APIs (ops.Services).

// All are the supervised services.
func (s *Services) All() []*services.Handle { return s.mgr.All() }

// Get is the supervised service named tool.
func (s *Services) Get(tool string) (*services.Handle, bool) { return s.mgr.Get(tool) }

// Engines lists the engines with the capability ("" for all) with the
// live state of their services.
func (s *Services) Engines(capability string) any { return s.views(engines.Capability(capability)) }

func (s *Services) health() (any, string) {
	status := "ok"
	list := []services.Status{}
	for _, h := range s.mgr.All() {
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
	return map[string]any{"services": out, "detail": ops.DetailHint}
}

// briefEngines keeps each engine's id and state.
func briefEngines(body any) any {
	full, _ := body.(map[string]any)
	list, _ := full["engines"].([]engineView)
	out := make([]map[string]string, 0, len(list))
	for _, e := range list {
		out = append(out, map[string]string{"id": e.ID, "state": e.State})
	}
	return map[string]any{"engines": out, "detail": ops.DetailHint}
}

// engineView is an engine with the live state of its service.
type engineView struct {
	*engines.Engine
	State  string `json:"state"`
	Health string `json:"health,omitempty"`
}

func (s *Services) views(filter engines.Capability) []engineView {
	list := s.reg.All()
	if filter != "" {
		list = s.reg.WithCapability(filter)
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
			if h, ok := s.mgr.Get(e.Service); ok {
				st := h.Status()
				v.State, v.Health = string(st.State), string(st.Health)
			}
		}
		out = append(out, v)
	}
	return out
}

func (s *Services) enginesHealth() (any, string) {
	return map[string]any{"engines": s.views("")}, "ok"
}

// Services is the pipeline's port on the services and what the services
// and engines APIs serve.
var (
	_ port.Services = (*Services)(nil)
	_ ops.Services  = (*Services)(nil)
)
