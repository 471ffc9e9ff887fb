// Package catalog is the resolved, immutable routing table built from the
// configuration file: which models exist, which targets serve each model on
// each API surface, and which connection (credential and endpoint) each
// target uses. It is built at start-up and again by each config reload
// (a new, immutable value: see Onto) and read without locks.
package catalog

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/rendezvous"
	"github.com/omniroute/gateway/internal/routing"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// Surface is an API dialect the gateway serves; its values are
// internal/dialect's IDs, and its names and paths come from that table.
type Surface uint8

// The surfaces.
const (
	Chat       = Surface(dialect.Chat)
	Messages   = Surface(dialect.Messages)
	Responses  = Surface(dialect.Responses)
	Embeddings = Surface(dialect.Embeddings)
)

// numSurfaces sizes the per-surface arrays (index 0 unused).
const numSurfaces = len(dialect.All) + 1

// Surfaces lists every surface in a stable order (the dialect table's).
var Surfaces = func() (out [len(dialect.All)]Surface) {
	for i, id := range dialect.All {
		out[i] = Surface(id)
	}
	return out
}()

// String returns the config name of the surface.
func (s Surface) String() string { return dialect.ID(s).String() }

// Path is the path suffix appended to a provider's base URL.
func (s Surface) Path() string {
	if !dialect.ID(s).Valid() {
		return ""
	}
	return dialect.Of(dialect.ID(s)).Path
}

// Route is the gateway's own path for the surface.
func (s Surface) Route() string { return "/v1" + s.Path() }

// Translated reports whether calls on s may be translated to another
// surface (internal/translate has its converters).
func (s Surface) Translated() bool {
	return dialect.ID(s).Valid() && dialect.Of(dialect.ID(s)).Translated
}

// SurfaceSet is a bit set of surfaces.
type SurfaceSet uint8

// Has reports whether s is in the set.
func (ss SurfaceSet) Has(s Surface) bool { return ss&(1<<s) != 0 }

func (ss SurfaceSet) add(s Surface) SurfaceSet { return ss | 1<<s }

// translatable reports whether the set holds a surface calls can be
// translated to.
func (ss SurfaceSet) translatable() bool {
	for _, s := range Surfaces {
		if ss.Has(s) && s.Translated() {
			return true
		}
	}
	return false
}

// Names lists the set's surfaces.
func (ss SurfaceSet) Names() []string {
	var out []string
	for _, s := range Surfaces {
		if ss.Has(s) {
			out = append(out, s.String())
		}
	}
	return out
}

func parseSurface(name string) Surface {
	id, _ := dialect.ByName(name)
	return Surface(id)
}

// Provider is a resolved provider.
type Provider struct {
	ID string
	// BaseURL is the configured base URL. For service:// providers the
	// transport substitutes the service's loopback address.
	BaseURL string
	// Service is the service name of a service:// base URL, else "".
	Service string
	// BasePath is the URL path prefix, e.g. "/v1".
	BasePath string
	APIs     SurfaceSet
	// Auth is bearer, x-api-key, x-goog-api-key or none.
	Auth    string
	Headers [][2]string
	// Quota is the provider's rate-limit header mapping and usage-API
	// settings as configured.
	Quota config.Provider
	// Beta is the anthropic-beta policy; nil passes every value.
	Beta *config.BetaPolicy
}

// FilterBeta appends to dst the values of a caller's anthropic-beta header
// (comma-separated) that the provider's policy lets through, comma-joined;
// it returns v itself when the policy passes everything.
func (p *Provider) FilterBeta(dst, v []byte) []byte {
	b := p.Beta
	if b == nil || b.Mode == "" || b.Mode == config.BetaPass {
		return v
	}
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		item = bytes.TrimSpace(item)
		if len(item) == 0 {
			continue
		}
		listed := false
		for _, l := range b.List {
			if l == string(item) {
				listed = true
				break
			}
		}
		if listed != (b.Mode == config.BetaAllow) {
			continue
		}
		if len(dst) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, item...)
	}
	return dst
}

// Connection is one credential of a provider with its own connection pool.
type Connection struct {
	ID       int    // the gateway's id: Connections index of the first catalog, then see Onto
	Name     string // "provider/connection"
	Provider *Provider
	MaxConns int
	apiKey   string
	// Limits are the configured per-minute budgets (zero: none).
	Limits config.Limits
}

// APIKey returns the credential. It is unexported as a field so that no
// encoder or snapshot can pick it up by accident.
func (c *Connection) APIKey() string { return c.apiKey }

// Target is one way to serve a model: a connection plus the upstream name.
// Targets are unique: two models naming the same connection and upstream
// model share one Target, so they share its state (cooldowns, circuit,
// quota, token budget, metrics), as the provider meters them as one.
type Target struct {
	ID            int    // the gateway's id: Targets index of the first catalog, then see Onto
	Name          string // "provider/connection/upstream-model"
	Conn          *Connection
	UpstreamModel string // "" = keep the caller's name
	// Info is the target's own model_info (nil: none): what the model
	// table says about its upstream model is overridden by it.
	Info *config.ModelInfo
	// Hash is the rendezvous hash of Name: a conversation's target is
	// the one its key scores highest with (session affinity).
	Hash uint64
}

// Upstream is the model name the target sends upstream and the provider
// meters it by (the catalog model's name when the target keeps the
// caller's name).
func (t *Target) Upstream() string {
	if t.UpstreamModel != "" {
		return t.UpstreamModel
	}
	return strings.TrimPrefix(t.Name, t.Conn.Name+"/")
}

// Model is a callable model name.
type Model struct {
	Index       int // position in Catalog.Models
	Name        string
	Strategy    string
	Description string
	// Strict refuses a request its targets would need changed.
	Strict  bool
	Targets []*Target
	// Weights are the round-robin weights of Targets (≥ 1), by position.
	Weights   []int
	Surfaces  SurfaceSet
	bySurface [numSurfaces][]*Target
	weightsBy [numSurfaces][]int
	schedBy   [numSurfaces][]uint16
}

// ScheduleFor returns the smooth weighted rotation of TargetsFor(s) that a
// round-robin model follows (see routing.SmoothSchedule).
func (m *Model) ScheduleFor(s Surface) []uint16 {
	if int(s) >= len(m.schedBy) {
		return nil
	}
	return m.schedBy[s]
}

// WeightsFor returns the round-robin weights of TargetsFor(s), by position.
func (m *Model) WeightsFor(s Surface) []int {
	if int(s) >= len(m.weightsBy) {
		return nil
	}
	return m.weightsBy[s]
}

// TargetsFor returns the targets that serve surface s, in configured order:
// those whose provider speaks s, or, when none does, every target (the
// gateway translates). A model with native targets for s never fails over
// to a translated one.
func (m *Model) TargetsFor(s Surface) []*Target {
	if int(s) >= len(m.bySurface) {
		return nil
	}
	return m.bySurface[s]
}

// Catalog is the routing table.
type Catalog struct {
	Models      []*Model // sorted by name
	Connections []*Connection
	Targets     []*Target
	Providers   []*Provider
	byName      map[string]*Model
	aliases     map[string]*Model
	// routes are the provider/model names (providerRoutes).
	routes map[string]*Model
	// Aliases are the configured aliases, sorted by name, for listings.
	Aliases  []Alias
	patterns []pattern
	// Default serves names nothing else matches; nil: none.
	Default *Model
}

// Alias is another name of a model.
type Alias struct {
	Name  string
	Model *Model
}

type pattern struct {
	glob  string
	model *Model
}

// bySurfaces indexes m's targets (and their weights) by the surface
// they serve.
func (m *Model) bySurfaces() {
	for i, rt := range m.Targets {
		for _, s := range Surfaces {
			if rt.Conn.Provider.APIs.Has(s) {
				m.bySurface[s] = append(m.bySurface[s], rt)
				m.weightsBy[s] = append(m.weightsBy[s], m.Weights[i])
				m.Surfaces = m.Surfaces.add(s)
			}
		}
	}
	for _, s := range Surfaces {
		if len(m.bySurface[s]) == 0 && s.Translated() {
			// No target speaks s: a call on s is translated to what
			// each target speaks (docs/translation.md), on the targets
			// that speak a translated surface. A surface without
			// converters (embeddings) keeps no targets: its calls are
			// refused.
			for i, rt := range m.Targets {
				if rt.Conn.Provider.APIs.translatable() {
					m.bySurface[s] = append(m.bySurface[s], rt)
					m.weightsBy[s] = append(m.weightsBy[s], m.Weights[i])
				}
			}
		}
		m.schedBy[s] = routing.SmoothSchedule(m.weightsBy[s])
	}
}

// providerRoutes makes the provider/model names Resolve knows: for a
// configured provider P, P/M names the targets on P of model M (in M's
// order, with its strategy and weights), and P/U the targets on P whose
// upstream model is U (in configured order, priority). A name that is a
// model or an alias keeps its meaning; a P/U that is also a P/M is the
// P/M.
func (c *Catalog) providerRoutes() {
	c.routes = map[string]*Model{}
	taken := func(name string) bool {
		return c.byName[name] != nil || c.aliases[name] != nil || c.routes[name] != nil
	}
	for _, m := range c.Models {
		if m.Strategy == config.StrategyFusion {
			continue
		}
		for _, p := range c.Providers {
			name := p.ID + "/" + m.Name
			if taken(name) {
				continue
			}
			r := &Model{Index: m.Index, Name: name, Strategy: m.Strategy, Strict: m.Strict,
				Description: "the targets of model " + m.Name + " on provider " + p.ID}
			for i, t := range m.Targets {
				if t.Conn.Provider == p {
					r.Targets, r.Weights = append(r.Targets, t), append(r.Weights, m.Weights[i])
				}
			}
			if len(r.Targets) > 0 {
				r.bySurfaces()
				c.routes[name] = r
			}
		}
	}
	for _, t := range c.Targets {
		up := strings.TrimPrefix(t.Name, t.Conn.Name+"/")
		name := t.Conn.Provider.ID + "/" + up
		r := c.routes[name]
		if r == nil {
			if taken(name) {
				continue
			}
			r = &Model{Index: -1, Name: name, Strategy: config.StrategyPriority,
				Description: "the targets of upstream model " + up + " on provider " + t.Conn.Provider.ID}
			c.routes[name] = r
		} else if r.Index >= 0 {
			continue // a P/M route
		}
		r.Targets, r.Weights = append(r.Targets, t), append(r.Weights, 1)
	}
	for _, r := range c.routes {
		if r.Index < 0 {
			r.bySurfaces()
		}
	}
}

// Model looks a model up by name; the []byte form lets callers avoid a
// string allocation (the compiler optimises the map index conversion).
func (c *Catalog) Model(name []byte) *Model { return c.byName[string(name)] }

// Resolve finds the model a request's name asks for: a model of that
// name, else an alias, else the first matching pattern, else the default
// model; nil when none applies. Patterns use allowed_models' glob: * is
// any run of characters ('/' included), ? one character. The exact lookup comes first and costs
// what Model costs, so configured names stay on the fast path.
func (c *Catalog) Resolve(name []byte) *Model {
	if m := c.byName[string(name)]; m != nil {
		return m
	}
	if m := c.aliases[string(name)]; m != nil {
		return m
	}
	if m := c.routes[string(name)]; m != nil {
		return m
	}
	for _, p := range c.patterns {
		if tenantpolicy.Match(p.glob, name) {
			return p.model
		}
	}
	return c.Default
}

// Build resolves f. getenv looks up credential variables; a variable that
// is referenced but unset is an error naming it.
func Build(f *config.File, getenv func(string) (string, bool)) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Model{}}
	var errs []string
	providers := map[string]*Provider{}
	conns := map[string]*Connection{}
	for _, pid := range slices.Sorted(maps.Keys(f.Providers)) {
		p := f.Providers[pid]
		rp := &Provider{ID: pid, BaseURL: strings.TrimRight(p.BaseURL, "/"), Auth: p.Auth}
		u, err := url.Parse(rp.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("providers.%s.base_url: %w", pid, err)
		}
		rp.BasePath = strings.TrimRight(u.Path, "/")
		if u.Scheme == "service" {
			rp.Service = u.Host
		}
		for _, a := range p.APIs {
			rp.APIs = rp.APIs.add(parseSurface(a))
		}
		if rp.Auth == "" { // a one-API provider's default is its dialect's
			rp.Auth = dialect.AuthBearer
			for _, s := range Surfaces {
				if rp.APIs == SurfaceSet(0).add(s) {
					rp.Auth = dialect.Of(dialect.ID(s)).Auth
				}
			}
		}
		for _, h := range slices.Sorted(maps.Keys(p.Headers)) {
			rp.Headers = append(rp.Headers, [2]string{h, p.Headers[h]})
		}
		rp.Beta = p.AnthropicBeta
		rp.Quota = config.Provider{RateLimitHeaders: p.RateLimitHeaders, CustomRateLimitHeaders: p.CustomRateLimitHeaders, QuotaAPI: p.QuotaAPI}
		providers[pid] = rp
		c.Providers = append(c.Providers, rp)
		for _, cid := range slices.Sorted(maps.Keys(p.Connections)) {
			pc := p.Connections[cid]
			conn := &Connection{ID: len(c.Connections), Name: pid + "/" + cid, Provider: rp, MaxConns: pc.MaxConns}
			if pc.Limits != nil {
				conn.Limits = *pc.Limits
			}
			if pc.APIKeyEnv != "" {
				v, ok := getenv(pc.APIKeyEnv)
				if !ok || v == "" {
					errs = append(errs, fmt.Sprintf("providers.%s.connections.%s.api_key_env: environment variable %s is not set; export it with the provider's API key", pid, cid, pc.APIKeyEnv))
				}
				conn.apiKey = v
			}
			conns[conn.Name] = conn
			c.Connections = append(c.Connections, conn)
		}
	}
	targets := map[string]*Target{}
	for _, name := range slices.Sorted(maps.Keys(f.Models)) {
		m := f.Models[name]
		rm := &Model{Name: name, Strategy: m.Strategy, Description: m.Description, Strict: m.Strict}
		if rm.Strategy == "" {
			rm.Strategy = config.StrategyPriority
		}
		for _, t := range m.Targets {
			pid, cid, err := f.ResolveConnection(t.Connection)
			if err != nil {
				errs = append(errs, fmt.Sprintf("models.%s: %v", name, err))
				continue
			}
			conn := conns[pid+"/"+cid]
			upstream := t.Model
			shown := upstream
			if shown == "" {
				shown = name
			}
			w := t.Weight
			if w == 0 {
				w = 1
			}
			key := conn.Name + "/" + shown
			rt := targets[key]
			if rt == nil {
				rt = &Target{ID: len(c.Targets), Name: key, Conn: conn, UpstreamModel: upstream, Info: t.ModelInfo, Hash: rendezvous.HashString(key)}
				targets[key] = rt
				c.Targets = append(c.Targets, rt)
			} else if t.ModelInfo != nil && !reflect.DeepEqual(rt.Info, t.ModelInfo) {
				if rt.Info != nil {
					errs = append(errs, fmt.Sprintf("models.%s.targets: target %s has another model_info in another model; a target (connection and upstream model) is one model, say it once", name, key))
				}
				rt.Info = t.ModelInfo
			}
			rm.Targets = append(rm.Targets, rt)
			rm.Weights = append(rm.Weights, w)
		}
		rm.bySurfaces()
		rm.Index = len(c.Models)
		c.byName[name] = rm
		c.Models = append(c.Models, rm)
	}
	c.aliases = map[string]*Model{}
	for _, a := range slices.Sorted(maps.Keys(f.Aliases)) {
		if m := c.byName[f.Aliases[a]]; m != nil && c.byName[a] == nil {
			c.aliases[a] = m
			c.Aliases = append(c.Aliases, Alias{Name: a, Model: m})
		} else {
			errs = append(errs, fmt.Sprintf("aliases.%s: %q is not a configured model", a, f.Aliases[a]))
		}
	}
	for i, p := range f.ModelPatterns {
		if m := c.byName[p.Model]; m != nil {
			c.patterns = append(c.patterns, pattern{glob: p.Match, model: m})
		} else {
			errs = append(errs, fmt.Sprintf("model_patterns[%d].model: %q is not a configured model", i, p.Model))
		}
	}
	c.providerRoutes()
	if f.DefaultModel != "" {
		if c.Default = c.byName[f.DefaultModel]; c.Default == nil {
			errs = append(errs, fmt.Sprintf("default_model: %q is not a configured model", f.DefaultModel))
		}
	}
	if len(errs) > 0 {
		return nil, config.Errors(errs)
	}
	return c, nil
}

// IDs is what a gateway has numbered so far: every connection and
// target name it has ever routed to, by id (ids are dense, from 0, and
// never reused). The catalog Build makes first numbers them itself;
// reloaded catalogs are renumbered onto it (Onto).
type IDs struct {
	Conns   map[string]int
	Targets map[string]int
}

// NewIDs returns the ids of c, the first catalog.
func NewIDs(c *Catalog) IDs {
	ids := IDs{Conns: make(map[string]int, len(c.Connections)), Targets: make(map[string]int, len(c.Targets))}
	for _, cn := range c.Connections {
		ids.Conns[cn.Name] = cn.ID
	}
	for _, t := range c.Targets {
		ids.Targets[t.Name] = t.ID
	}
	return ids
}

// Onto renumbers c, a catalog built from a reloaded file, onto ids: a
// connection or target whose name ids knows keeps its id, so the state
// the actors keep by id (circuits, quota, token budgets, admission
// limits, metrics) carries over to the ones that survive a reload; a new
// one takes the next free id, in c's order. IDs then index the gateway's
// id tables, not c's slices: c.Targets lists only the targets c routes
// to. Onto returns the new connections and targets (which the caller
// registers with the actors before it routes by c) and leaves ids as it
// was; Add records them once registered.
func (c *Catalog) Onto(ids IDs) (newConns []*Connection, newTargets []*Target) {
	newConns = renumber(c.Connections, ids.Conns, func(nc *Connection) (string, *int) { return nc.Name, &nc.ID })
	newTargets = renumber(c.Targets, ids.Targets, func(nt *Target) (string, *int) { return nt.Name, &nt.ID })
	return newConns, newTargets
}

// renumber gives each item the id known has for its name, or the next
// free one, and returns the items that took a new id.
func renumber[T any](items []T, known map[string]int, key func(T) (string, *int)) []T {
	var added []T
	next := len(known)
	for _, it := range items {
		name, id := key(it)
		if k, ok := known[name]; ok {
			*id = k
		} else {
			*id = next
			next++
			added = append(added, it)
		}
	}
	return added
}

// Add records the connections and targets Onto found new.
func (ids IDs) Add(conns []*Connection, targets []*Target) {
	for _, c := range conns {
		ids.Conns[c.Name] = c.ID
	}
	for _, t := range targets {
		ids.Targets[t.Name] = t.ID
	}
}
