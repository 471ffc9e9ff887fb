// Package transport is the gateway's fasthttp front end: it routes paths,
// identifies the caller, reads bodies under admission, scans the JSON for
// what routing needs, dispatches to upstream targets with failover before
// the first byte, relays SSE with one flush per event, and renders errors in
// the caller's API dialect. The operator APIs (services, engines, keys,
// requests, usage, quota, dashboard, reload) are package transport/ops,
// on this edge: routed and guarded here, served there on the ports
// ops_ports.go supplies.
//
// It spawns no actor: the composition root (actors/gateway) spawns them
// with the options an Assembly derives and attaches their handles, which
// the request path then reads. Embedders call actors/gateway's New, not
// this package.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/lockfile"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/transport/ops"
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
	// SQLite database <data dir>/omniroute.db (docs/tenants.md). The
	// gateway closes only a database it opened. In cluster mode the API
	// keys live in etcd instead (the ones Store holds are copied there at
	// start, docs/cluster.md "API keys"); the request log stays here.
	Store Store
	// RequestLogOutput receives the request log's lines when
	// OMNIROUTE_REQUEST_LOG is stdout or both; nil means os.Stdout.
	RequestLogOutput io.Writer
	// TracerProvider receives request traces (tracing.go); nil turns
	// tracing off at no cost on the request path. cmd/omniroute sets it
	// when an OTLP endpoint is configured (internal/tracing).
	TracerProvider trace.TracerProvider
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
	cat      *catalog.Catalog
	rc       atomic.Pointer[routingConfig] // the config in force (reload.go)
	reload   reloadState
	reg      *targetRegistry // every connection and target by id (targetset.go)
	targets  *targets.Handle
	metrics  *gwMetrics
	inflight *registry
	hangups  *hangupWatcher
	rids     requestIDs
	started  time.Time
	health   []healthSection

	server   *fasthttp.Server
	draining atomic.Bool
	active   atomic.Int64
	closed   atomic.Bool
	lnMu     sync.Mutex
	lns      []net.Listener // listeners passed to Serve, closed by Shutdown
	shutdown bool
	side     *sidecars // services, engines, relay (sidecars.go)

	ingest      *ingest.Handle
	pressure    *pressureactor.Handle
	selfLoopKey []byte
	lingering   atomic.Int64 // connections closing after a refused upload

	qs *quotaSys // quota telemetry, ledger and routing settings

	// redact removes secrets from every log line and every passed-through
	// upstream error (redact.go).
	redact *sanitize.Redactor
	// guesses bounds management-key guesses per address (keyguess.go).
	guesses *keyGuesses

	adm admissionState

	ten *tenantSys // keys, tenant limits, request log (tenants.go)

	browser browserPolicy // Host, Origin and CORS rules (browser.go)
	// oversize marks requests whose declared length is over the hard cap
	// between headerReceived and their answer (deadlines.go).
	oversize sync.Map
	dirLock  *lockfile.Lock  // the data directory, held until Close
	hist     *history.Handle // the dashboard's one-second history (history.go)
	ops      *ops.API        // the operator APIs (package ops, ops_ports.go)
	tracer   trace.Tracer    // nil: tracing off
	cs       *clusterSys     // cluster mode; nil for a single node (cluster.go)
}

// Assembly is a Gateway being composed. Prepare starts one; the
// composition root (actors/gateway) spawns each actor with the options
// the Assembly derives from the catalog and the environment, and hands
// the spawned handle back with the matching Attach method, in the order
// the methods' comments give (an actor's options may read the handles
// attached before it). Transport itself spawns nothing: it only serves
// HTTP on the handles it is given.
type Assembly struct {
	g      *Gateway
	budget budget.Budget // the ingest budget, resolved by PressureOptions
}

// Prepare starts composing a gateway on system: it resolves the catalog,
// takes the data directory's lock, plans the supervised services, creates
// the upstream clients and the metrics. It spawns no actor. Until
// StartFront, a failed composition is undone with Abort; after it, with
// the Gateway's Close.
func Prepare(system *actor.ActorSystem, o Options) (*Assembly, error) {
	if o.File == nil {
		return nil, errors.New("building the gateway: Options.File is nil; pass config.DefaultFile() or a decoded file")
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
	if o.TracerProvider != nil {
		g.tracer = o.TracerProvider.Tracer("github.com/omniroute/gateway/transport")
	}
	// In cluster mode tenant ids are HMACs under the cluster's install
	// secret; it is settled before anything derives one (and before the
	// redactor, which must know it).
	sharedSecret, err := g.shareInstallSecret()
	if err != nil {
		return nil, err
	}
	g.redact = g.buildRedactor()
	g.browser = newBrowserPolicy(&o.Env)
	g.log = logging.Redacting(o.Logger, g.redact)
	if sharedSecret != "" {
		g.log.Info("tenant ids use the cluster's install secret", "cluster", o.Env.Cluster.ClusterName, "source", sharedSecret)
	}
	g.guesses = newKeyGuesses(func(addr string) {
		g.log.Warn("too many wrong management keys from one address; its key attempts are refused (429 too_many_key_attempts) until its guesses refill",
			"address", addr, "burst", keyGuessBurst, "refillSeconds", int(keyGuessEvery/time.Second))
	})
	g.ops = g.newOps()
	// One gateway per data directory: two would overwrite each other's
	// service state (lockfile). Held until Close.
	if g.dirLock, err = lockfile.Acquire(o.Env.ResolvedDataDir()); err != nil {
		return nil, err
	}
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

// Abort undoes a composition that failed before StartFront: it stops the
// cluster node and the routing actors attached so far, then releases the
// metrics, the upstream clients and the data directory. A failed cluster
// join stops the actor system as it always did.
func (a *Assembly) Abort() {
	g := a.g
	g.stopCluster()
	if qs := g.qs; qs != nil {
		if qs.quota != nil {
			qs.quota.Stop()
		}
		if qs.ledger != nil {
			qs.ledger.Stop()
		}
	}
	if g.targets != nil {
		g.targets.Stop()
	}
	if g.metrics != nil {
		g.metrics.unregister()
	}
	g.closeClients()
	g.dirLock.Release()
}

// StartFront builds the HTTP front end's own state (the in-flight
// registry, the hang-up watcher, request ids, the fasthttp server and the
// core health sections) once the routing actors and the cluster are
// attached. From here on a failed composition is undone with Close.
func (a *Assembly) StartFront() {
	g := a.g
	g.inflight = newRegistry()
	g.hangups = newHangupWatcher(g.inflight, g.log)
	g.rids.init()
	g.server = &fasthttp.Server{}
	g.ServerConfig(g.server)
	g.health = []healthSection{
		{name: "server", fn: g.serverHealth},
		{name: "targets", fn: g.targetsHealth},
		{name: "quota", fn: g.quotaHealth},
	}
	if g.cs != nil {
		g.health = append(g.health, healthSection{name: "cluster", fn: g.clusterHealth, brief: briefCluster})
	}
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
func (g *Gateway) Handler(ctx *fasthttp.RequestCtx) { g.serve(ctx, nil) }

// ServerConfig applies the settings the gateway relies on to s.
func (g *Gateway) ServerConfig(s *fasthttp.Server) {
	e := g.opts.Env.Server
	s.Handler = g.Handler
	s.Name = "omniroute"
	s.StreamRequestBody = true
	s.MaxRequestBodySize = int(g.opts.Env.Ingest.HardMaxBodyBytes) + 1
	s.ReadTimeout = e.HeaderTimeout.Duration()
	s.HeaderReceived = g.headerReceived // the body's own deadline (deadlines.go)
	s.WriteTimeout = g.opts.Env.HTTP.WriteTimeout.Duration()
	s.IdleTimeout = e.KeepAliveIdle.Duration()
	s.Concurrency = int(e.MaxConnections)
	s.CloseOnShutdown = true
	s.NoDefaultServerHeader = true
	s.NoDefaultDate = false
	s.DisablePreParseMultipartForm = true
	s.ReduceMemoryUsage = false
	s.ExpectHandler = g.expect
	s.Logger = fasthttpLogger{g.log}
	// fasthttp would log the first and last 200 bytes of a malformed
	// request (its Authorization header and prompt included).
	s.SecureErrorLogMessage = true
	s.ErrorHandler = g.serverError
}

// Serve accepts connections on ln until Shutdown.
//
// Serve and Shutdown may race (a caller starts Serve in a goroutine and
// shuts down at once): the listener is remembered and closed by Shutdown,
// so Serve always returns.
func (g *Gateway) Serve(ln net.Listener) error {
	g.lnMu.Lock()
	if g.shutdown {
		g.lnMu.Unlock()
		ln.Close()
		return errors.New("transport: Serve called after Shutdown")
	}
	g.lns = append(g.lns, ln)
	g.lnMu.Unlock()
	return g.server.Serve(ln)
}

// Shutdown stops accepting connections, lets in-flight requests and streams
// finish until ctx is done, then cancels what is left, and finally stops
// the gateway's actors and upstream pools.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	g.lnMu.Lock()
	g.shutdown = true
	for _, ln := range g.lns {
		ln.Close()
	}
	g.lnMu.Unlock()
	var err error
	{
		// Closing the listeners above makes fasthttp report their second
		// close; only a deadline means requests are still in flight.
		if werr := g.server.ShutdownWithContext(ctx); werr != nil && ctx.Err() != nil {
			n := g.inflight.cancelAll()
			g.log.Warn("shutdown timeout reached; cancelled in-flight requests", "cancelled", n)
			err = fmt.Errorf("shutdown did not finish in time; cancelled %d in-flight upstream requests", n)
			force, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if ferr := g.server.ShutdownWithContext(force); ferr != nil {
				err = fmt.Errorf("%w; connections still open after cancelling: %v", err, ferr)
			}
			cancel()
		}
	}
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
	g.inflight.cancelAll()
	g.hangups.Close()
	g.stopDashboard() // before the actors its sampler reads
	if g.adm.lanes != nil {
		g.adm.lanes.Stop()
	}
	g.targets.Stop()
	g.closeSidecars()
	g.stopAdmission()
	g.qs.stop()
	g.stopTenants()
	g.closeClients()
	g.metrics.unregister()
	g.dirLock.Release()
	g.stopCluster() // last: it stops the actor system
}

// fasthttpLogger routes fasthttp's own log lines into slog.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn(fmt.Sprintf(format, args...), "component", "fasthttp")
}
