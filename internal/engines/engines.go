// Package engines is the router-backend registry: every engine the gateway
// knows is declared once, on two independent axes — how it runs (its
// Lifecycle) and what the relay route may do with it (its Relay role) —
// with its capabilities, service id, default port, health path and
// telemetry support. Consumers look engines up by id, list them all, or
// filter by capability instead of special-casing ids.
//
// The native pipeline is built in as engine "native" (in-process, relay
// role native). The rest come from the config file's "engines" section;
// every supervised service without an engines entry becomes a supervised
// provider engine, and BIFROST_BASE_URL without a declared relay engine
// adds an external "bifrost" relay engine, so the registry always
// describes what the gateway will actually do.
package engines

import (
	"maps"
	"slices"

	"github.com/omniroute/gateway/internal/config"
)

// Lifecycle is axis A: how an engine runs.
type Lifecycle string

// The lifecycles: the file's words (config), so the cast from a validated
// config.EngineConfig is one list, not two.
const (
	InProcess  Lifecycle = config.LifecycleInProcess
	Supervised Lifecycle = config.LifecycleSupervised
	External   Lifecycle = config.LifecycleExternal
	Disabled   Lifecycle = config.LifecycleDisabled
)

// RelayRole is axis B: what the relay route does with an engine.
type RelayRole string

// The relay roles: the file's words (config) except native, which only the
// built-in pipeline has.
const (
	// RoleNative is the in-process pipeline the relay falls back to.
	RoleNative RelayRole = "native"
	// RoleRelay is a relay dispatch backend (Bifrost).
	RoleRelay RelayRole = config.RelayRoleRelay
	// RoleProvider engines are consumed as provider connections by the
	// native pipeline, never dispatched to by the relay.
	RoleProvider RelayRole = config.RelayRoleProvider
	// RoleNone engines take no part in routing.
	RoleNone RelayRole = config.RelayRoleNone
)

// Capability is something an engine can do.
type Capability string

// The capability vocabulary (config.EngineCapabilities).
const (
	Chat           Capability = "chat"
	Messages       Capability = "messages"
	Responses      Capability = "responses"
	Streaming      Capability = "streaming"
	Tools          Capability = "tools"
	Vision         Capability = "vision"
	OAuthBacked    Capability = "oauth-backed"
	DashboardEmbed Capability = "dashboard-embed"
	ModelSync      Capability = "model-sync"
	NativeHotPath  Capability = "native-hot-path"
)

// NativeID is the id of the built-in pipeline.
const NativeID = "native"

// Engine is one registry entry. It is immutable once built.
type Engine struct {
	ID           string       `json:"id"`
	Lifecycle    Lifecycle    `json:"lifecycle"`
	Relay        RelayRole    `json:"relayRole"`
	Capabilities []Capability `json:"capabilities"`
	// Service is the supervised service id ("" unless Supervised).
	Service     string `json:"service,omitempty"`
	BaseURL     string `json:"baseUrl,omitempty"`
	DefaultPort int    `json:"defaultPort,omitempty"`
	HealthPath  string `json:"healthPath,omitempty"`
	Telemetry   bool   `json:"telemetry"`
	// Source says where the entry came from: builtin, config, service
	// (implied by a services entry) or env (implied by BIFROST_BASE_URL).
	Source string `json:"source"`
}

// Has reports whether the engine declares c.
func (e *Engine) Has(c Capability) bool {
	for _, x := range e.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Registry is the immutable set of engines.
type Registry struct {
	all  []*Engine
	byID map[string]*Engine
}

// Native is the built-in pipeline's entry.
func Native() *Engine {
	return &Engine{ID: NativeID, Lifecycle: InProcess, Relay: RoleNative, Source: "builtin", Telemetry: true,
		Capabilities: []Capability{Chat, Messages, Responses, Streaming, Tools, Vision, NativeHotPath}}
}

// Build makes the registry from the file's engines and services and the
// Bifrost base URL from the environment ("" when unset).
func Build(f *config.File, bifrostBaseURL string) *Registry {
	r := &Registry{byID: map[string]*Engine{}}
	r.add(Native())
	relayDeclared := false
	for _, id := range slices.Sorted(maps.Keys(f.Engines)) {
		c := f.Engines[id]
		e := &Engine{ID: id, Lifecycle: Lifecycle(c.Lifecycle), Relay: RelayRole(c.Relay), BaseURL: c.BaseURL,
			DefaultPort: c.DefaultPort, HealthPath: c.HealthPath, Telemetry: c.Telemetry, Source: "config"}
		if e.Relay == "" {
			e.Relay = RoleNone
		}
		if e.Relay == RoleRelay {
			relayDeclared = true
		}
		if e.Lifecycle == Supervised {
			e.Service = c.Service
			if e.Service == "" {
				e.Service = id
			}
			if s, ok := f.Services[e.Service]; ok {
				if e.HealthPath == "" {
					e.HealthPath = s.HealthPath
				}
				if e.DefaultPort == 0 {
					e.DefaultPort = s.Port
				}
			}
		}
		for _, cap := range c.Capabilities {
			e.Capabilities = append(e.Capabilities, Capability(cap))
		}
		r.add(e)
	}
	claimed := map[string]bool{}
	for _, e := range r.all {
		if e.Service != "" {
			claimed[e.Service] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.Services)) {
		if claimed[id] || r.byID[id] != nil {
			continue
		}
		s := f.Services[id]
		role := RoleProvider
		if id == "bifrost" && !relayDeclared {
			role, relayDeclared = RoleRelay, true
		}
		r.add(&Engine{ID: id, Lifecycle: Supervised, Relay: role, Service: id, DefaultPort: s.Port,
			HealthPath: s.HealthPath, Source: "service", Capabilities: []Capability{}})
	}
	if bifrostBaseURL != "" && !relayDeclared && r.byID["bifrost"] == nil {
		r.add(&Engine{ID: "bifrost", Lifecycle: External, Relay: RoleRelay, BaseURL: bifrostBaseURL, Source: "env",
			HealthPath: "/v1/models", Capabilities: []Capability{Chat, Streaming, Tools, Vision}})
	}
	return r
}

func (r *Registry) add(e *Engine) {
	if e.Capabilities == nil {
		e.Capabilities = []Capability{}
	}
	r.all = append(r.all, e)
	r.byID[e.ID] = e
}

// Get returns the engine with id ("ts" is an alias of native).
func (r *Registry) Get(id string) (*Engine, bool) {
	if id == "ts" {
		id = NativeID
	}
	e, ok := r.byID[id]
	return e, ok
}

// All returns every engine, native first, then by id.
func (r *Registry) All() []*Engine { return append([]*Engine(nil), r.all...) }

// WithCapability returns the engines declaring c that are not disabled.
func (r *Registry) WithCapability(c Capability) []*Engine {
	var out []*Engine
	for _, e := range r.all {
		if e.Lifecycle != Disabled && e.Has(c) {
			out = append(out, e)
		}
	}
	return out
}

// RelayBackend returns the engine with relay role "relay", or nil. A
// disabled one is returned too: the relay reports it as disabled.
func (r *Registry) RelayBackend() *Engine {
	for _, e := range r.all {
		if e.Relay == RoleRelay {
			return e
		}
	}
	return nil
}
