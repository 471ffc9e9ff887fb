// Package transport is the gateway's request pipeline behind the HTTP
// edge (package transport/edge, which owns the server, the route table,
// deadlines, hang-ups, the guards, panics and the edge's errors): it
// identifies the caller, reads bodies under admission, scans the JSON for
// what routing needs, dispatches to upstream targets with failover before
// the first byte, relays SSE with one flush per event, and renders its
// errors in the caller's API dialect. It supplies the edge's handlers and
// ports (edge_ports.go). The operator APIs (services, engines, keys,
// requests, usage, quota, dashboard, reload; package transport/ops) and
// the health report are the root's operator layer
// (transport/gateway/opslayer), on the same edge, which the pipeline
// reaches through the port it declares (Operator, operator.go) and which
// reads the pipeline through a narrow view (port.Pipeline).
//
// It spawns no actor: the composition root (transport/gateway) spawns them
// with the options an Assembly derives and attaches their handles, which
// the request path then reads; the tenant layer it reaches only through
// the port it declares (Tenants, tenants.go), which the root implements.
// Embedders call transport/gateway's New, not this package.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/intake"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/plan"
	"github.com/omniroute/gateway/transport/port"
	"github.com/omniroute/gateway/transport/trace"
)

// Options configures a Gateway.
type Options struct {
	Env  config.Env
	File *config.File
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// Clock is injected for tests; nil means the wall clock.
	Clock clock.Clock
	// ServiceAddr resolves the host:port of a service named in a
	// service:// base URL. Required when the file uses one.
	ServiceAddr func(name string) (string, error)
	// Getenv looks up credential variables; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// Version is reported by health.
	Version string
	// PressureSample replaces the resource-pressure sampler (nil reads the
	// process's real memory figures); tests and embedders with their own
	// signals use it.
	PressureSample func() pressure.Sample
	// Store keeps API keys, the request log and usage; nil opens the
	// SQLite database <data dir>/omniroute.db (docs/tenants.md; the
	// composition root opens it, transport/gateway/datadir). The
	// gateway closes only a database it opened. In cluster mode the API
	// keys live in etcd instead (the ones Store holds are copied there at
	// start, docs/cluster.md "API keys"); the request log stays here.
	Store Store
	// RequestLogOutput receives the request log's lines when
	// OMNIROUTE_REQUEST_LOG is stdout or both; nil means os.Stdout.
	RequestLogOutput io.Writer
	// TracerProvider receives request traces (transport/trace); nil turns
	// tracing off at no cost on the request path. cmd/omniroute sets it
	// when an OTLP endpoint is configured (internal/tracing).
	TracerProvider oteltrace.TracerProvider
}

// Gateway is one running gateway's HTTP front end, on the actors the
// composition root attached (Assembly).
type Gateway struct {
	opts   Options
	log    *slog.Logger
	clk    clock.Clock
	system *actor.ActorSystem
	// cat is the start-up catalog, which numbered the first connections
	// and targets (reg holds every id since). What requests route by is
	// rc's catalog.
	cat     *catalog.Catalog
	rc      atomic.Pointer[routingConfig] // the config in force (reload.go)
	reload  reloadState
	reg     *targetRegistry // every connection and target by id (targetset.go)
	targets *targets.Handle
	metrics *gwMetrics
	started time.Time

	// edge is the HTTP edge (server, routes, guards, hang-ups); inflight
	// is its registry of cancellable work, which the pipeline registers
	// its upstream exchanges and admission waits in.
	edge     *edge.Edge
	inflight *edge.Registry
	active   atomic.Int64
	closed   atomic.Bool
	side     *sidecars // services, engines, relay (sidecars.go)

	intake intake.Stage // the ingest stage: the ingest and pressure handles (transport/intake)

	qs      *quotaSys    // routing settings and the per-target tables requests read (quota.go)
	routing port.Routing // the routing actors' registration, the root's (quota.go)

	// redact removes secrets from every log line and every passed-through
	// upstream error (redact.go).
	redact *sanitize.Redactor

	adm admit.Stage // the admit stage: the lanes handle, its snapshot (transport/admit)

	att attempt.Stage // the attempt stage: its clock and redactor (transport/attempt)

	plan plan.Stage // the plan stage: the routing actors' handles and settings (transport/plan)

	ten Tenants      // the tenant layer's port (tenants.go); nil until attached
	lim limits.Stage // the tenant-limits stage: that port, narrowed (transport/limits)

	stops  rootStops   // what the composition root handed over to stop
	op     Operator    // the operator layer's port (operator.go); nil until attached
	tracer trace.Stage // the request spans' tracer (transport/trace); none: tracing off
	cs     *clusterSys // cluster mode; nil for a single node (cluster.go)
}

// rootStops is what the composition root handed the gateway to stop at
// Close.
type rootStops struct {
	// closers release what the root opened for this gateway (its data
	// directory: the lock and the database), after the actors that use
	// it stopped (OnClose).
	closers []func()
	// links stop the actors the root spawned between the routing actors
	// (AttachLink), right after the targets actor.
	links []func()
}

// Assembly is a Gateway being composed. Prepare starts one; the
// composition root (transport/gateway) spawns each actor with the options
// the Assembly derives from the catalog and the environment, and hands
// the spawned handle back with the matching Attach method, in the order
// the methods' comments give (an actor's options may read the handles
// attached before it). Transport itself spawns nothing: it only serves
// HTTP on the handles it is given.
type Assembly struct {
	g      *Gateway
	budget budget.Budget // the ingest budget, resolved by PressureOptions
}

// Check reports what o lacks before anything is opened for it.
func (o *Options) Check() error {
	if o.File == nil {
		return errors.New("building the gateway: Options.File is nil; pass config.DefaultFile() or a decoded file")
	}
	return nil
}

// Prepare starts composing a gateway on system: it resolves the catalog,
// plans the supervised services, creates the upstream clients and the
// metrics. It spawns no actor and opens no file: the composition root
// holds the data directory (its lock and Options.Store) and hands over
// its release with OnClose. Until StartFront, a failed composition is
// undone with Abort; after it, with the Gateway's Close.
func Prepare(system *actor.ActorSystem, o Options) (*Assembly, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Store == nil {
		return nil, errors.New("building the gateway: Options.Store is nil; the composition root opens the data directory's store (transport/gateway/datadir) before Prepare")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Getenv == nil {
		o.Getenv = os.LookupEnv
	}
	cat, err := catalog.Build(o.File, o.Getenv)
	if err != nil {
		return nil, err
	}
	g := &Gateway{opts: o, clk: o.Clock, system: system, cat: cat, started: o.Clock.Now(), reg: newTargetRegistry()}
	g.tracer.Init(o.TracerProvider)
	g.redact = g.buildRedactor()
	g.log = logging.Redacting(o.Logger, g.redact)
	g.att.Init(g.clk, g.redact)
	a := &Assembly{g: g}
	if err := g.planServices(); err != nil {
		a.Abort()
		return nil, err
	}
	if err = g.initRouting(); err != nil {
		a.Abort()
		return nil, err
	}
	g.metrics = newMetrics(cat)
	g.reloadMetrics()
	return a, nil
}

// Clock is the clock the gateway runs on (Options.Clock, else the wall
// clock): the actors get the same one.
func (a *Assembly) Clock() clock.Clock { return a.g.clk }

// Logger is the gateway's logger (Options.Logger behind the redactor),
// for the composition root's own lines.
func (a *Assembly) Logger() *slog.Logger { return a.g.log }

// OnClose has f run when the gateway closes (or its composition is
// aborted), after every actor and upstream pool stopped and before the
// cluster is left, the last registered first: the composition root
// releases there what it opened for the gateway.
func (a *Assembly) OnClose(f func()) { a.g.stops.closers = append(a.g.stops.closers, f) }

// stopLinks stops the links AttachLink gave, once.
func (g *Gateway) stopLinks() {
	for _, stop := range g.stops.links {
		stop()
	}
	g.stops.links = nil
}

// runClosers runs the OnClose functions once.
func (g *Gateway) runClosers() {
	for i := len(g.stops.closers) - 1; i >= 0; i-- {
		g.stops.closers[i]()
	}
	g.stops.closers = nil
}

// Abort undoes a composition that failed before StartFront: it stops the
// cluster node and the routing actors attached so far, then releases the
// metrics, the upstream clients and the data directory. A failed cluster
// join stops the actor system as it always did.
func (a *Assembly) Abort() {
	g := a.g
	g.stopCluster()
	g.stopRouting()
	if g.targets != nil {
		g.targets.Stop()
	}
	g.stopLinks()
	if g.metrics != nil {
		g.metrics.unregister()
	}
	g.closeClients()
	g.runClosers()
}

// StartFront builds the HTTP edge (the in-flight registry, the hang-up
// watcher, request ids, the fasthttp server; package edge), its operator
// rows the operator layer's handlers, and adds the pipeline's core health
// sections, once the routing actors, the cluster and the operator layer
// are attached. From here on a failed composition is undone with Close.
func (a *Assembly) StartFront() {
	g := a.g
	e, err := g.newEdge()
	if err != nil {
		panic(err) // the handler table is this package's and the operator layer's: a bug, not a setting
	}
	g.edge, g.inflight = e, e.Inflight()
	g.op.AddHealthSection("server", g.serverHealth, nil)
	g.op.AddHealthSection("targets", g.targetsHealth, nil)
	g.op.AddHealthSection("quota", g.routing.Health, nil)
}

// Close undoes a composition that failed after StartFront: the
// Gateway's Close, which stops everything attached.
func (a *Assembly) Close() { a.g.Close() }

// Gateway is the composed gateway, to serve once every actor is attached.
func (a *Assembly) Gateway() *Gateway { return a.g }

// closeClients closes every upstream client, replaced ones included.
func (g *Gateway) closeClients() {
	for i := 0; i < g.reg.clients.Len(); i++ {
		if c := g.reg.clients.At(i).Load(); c != nil {
			c.Close()
		}
	}
	for _, c := range g.reg.replaced {
		c.Close()
	}
}

func (g *Gateway) resolveAddr(p *catalog.Provider) (addr string, isTLS bool, err error) {
	if p.Service != "" {
		if g.opts.ServiceAddr == nil {
			return "", false, fmt.Errorf("base_url names service %q but no service runner is configured", p.Service)
		}
		addr, err = g.opts.ServiceAddr(p.Service)
		return addr, false, err
	}
	rest := p.BaseURL
	switch {
	case strings.HasPrefix(rest, "https://"):
		isTLS, rest = true, rest[len("https://"):]
	case strings.HasPrefix(rest, "http://"):
		rest = rest[len("http://"):]
	}
	host, _, _ := strings.Cut(rest, "/")
	if _, _, err := net.SplitHostPort(host); err != nil {
		if isTLS {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	return host, isTLS, nil
}

// Catalog returns the routing table in force (the last config loaded).
func (g *Gateway) Catalog() *catalog.Catalog { return g.rc.Load().cat }

// Targets returns the targets actor handle.
func (g *Gateway) Targets() *targets.Handle { return g.targets }

// Handler serves one request; mount it on a fasthttp.Server. For the
// admission guarantees (decide before the body is sent) that server needs
// StreamRequestBody and ExpectHandler set as ServerConfig does.
func (g *Gateway) Handler(ctx *fasthttp.RequestCtx) { g.edge.Handler(ctx) }

// HTTPHandler returns the gateway as a net/http handler, for hosts that
// serve with net/http (edge.HTTPHandler).
func (g *Gateway) HTTPHandler() http.Handler { return g.edge.HTTPHandler() }

// ServerConfig applies the settings the gateway relies on to s.
func (g *Gateway) ServerConfig(s *fasthttp.Server) { g.edge.ServerConfig(s) }

// Serve accepts connections on ln until Shutdown.
func (g *Gateway) Serve(ln net.Listener) error { return g.edge.Serve(ln) }

// Shutdown stops accepting connections, lets in-flight requests and streams
// finish until ctx is done, then cancels what is left (edge.Shutdown), and
// finally stops the gateway's actors and upstream pools.
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.edge.Shutdown(ctx)
	g.Close()
	return err
}

// Close releases the gateway's actors, watcher and pools without waiting
// for requests; a host that embeds the gateway calls it after stopping its
// own server.
func (g *Gateway) Close() {
	if !g.closed.CompareAndSwap(false, true) {
		return
	}
	// A reload registering targets finishes first: nothing it starts is
	// left running.
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	g.edge.Close()
	if g.op != nil {
		g.op.Stop() // the dashboard's history, before the actors its sampler reads
	}
	g.adm.Stop()
	g.targets.Stop()
	g.stopLinks()
	g.closeSidecars()
	g.intake.Stop()
	g.stopRouting()
	g.stopTenants()
	g.closeClients()
	g.metrics.unregister()
	g.runClosers()
	g.stopCluster() // last: it stops the actor system
}
