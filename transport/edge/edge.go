// Package edge is the gateway's HTTP edge: the fasthttp server and its
// serve loop, the route table (routes.go) and the dispatch it drives,
// request ids, per-request deadlines (the caller's stated timeout, the
// body's arrival deadline, the stream's write deadline), client hang-up
// detection and the in-flight registry that shutdown cancels, the
// browser policy and the management guards, panic recovery and the
// rendering of the edge's own errors.
//
// It imports no actor package and not transport: what it needs of the
// gateway behind it, it declares here (Pipeline, HandlerFunc), and
// transport supplies it, the same ports approach as transport/ops. The
// edge does not know what a request costs or where it goes; the handlers
// do.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
)

// Pipeline is what the edge needs of the gateway behind it.
type Pipeline interface {
	// Finished records a request whose handler did not record its end
	// itself (HandlerFunc), and every request the edge answered alone.
	Finished(r Route, status int, took time.Duration)
	// Panicked logs and counts a panic recovered while serving route r
	// (where: "handler", "expect", ...).
	Panicked(r Route, rid, where string, p any)
	// ExpectBody decides an Expect: 100-continue upload to a route that
	// admits bodies, before the body is sent: the status for fasthttp
	// (100 to continue), and false for routes it does not decide.
	ExpectBody(ctx *fasthttp.RequestCtx) (status int, decided bool)
}

// Request is what the edge knows of a request when it hands it to a
// handler.
type Request struct {
	Route Route
	// RID is the request id (the caller's, if safe, else a new one),
	// already set as X-Request-Id.
	RID []byte
	// Host is the net/http request context when the gateway runs behind
	// HTTPHandler, nil on fasthttp.
	Host  context.Context
	Start time.Time
}

// HandlerFunc serves one request. It reports whether it recorded the
// request's end itself (a stream ends after the handler returns); else
// the edge calls Pipeline.Finished when it returns.
type HandlerFunc func(ctx *fasthttp.RequestCtx, req Request) (recorded bool)

// Config is what New needs.
type Config struct {
	// Env is the gateway's environment: the server, HTTP, ingest cap and
	// management key settings are read from it.
	Env      *config.Env
	Log      *slog.Logger
	Clock    clock.Clock
	Pipeline Pipeline
	// Handlers has one function per Handler but HandleRoot, which the edge
	// serves itself.
	Handlers [NumHandlers]HandlerFunc
}

// Edge is one gateway's HTTP edge.
type Edge struct {
	env      *config.Env
	log      *slog.Logger
	clk      clock.Clock
	pipe     Pipeline
	handlers [NumHandlers]HandlerFunc
	browser  browserPolicy // Host, Origin and CORS rules (browser.go)
	guesses  *keyGuesses   // management-key guesses per address (keyguess.go)
	rids     requestIDs
	inflight *Registry
	hangups  *hangupWatcher

	server   *fasthttp.Server
	draining atomic.Bool
	// oversize marks requests whose declared length is over the hard cap
	// between headerReceived and their answer (deadlines.go).
	oversize sync.Map
	lnMu     sync.Mutex
	lns      []net.Listener // listeners passed to Serve, closed by Shutdown
	shutdown bool
}

// New builds the edge and starts its hang-up watcher (stopped by Close).
func New(c Config) (*Edge, error) {
	for h := Handler(0); h < NumHandlers; h++ {
		if h != HandleRoot && c.Handlers[h] == nil {
			return nil, fmt.Errorf("building the HTTP edge: handler %d has no function; the gateway must supply every handler of the route table", h)
		}
	}
	if c.Env == nil || c.Pipeline == nil || c.Log == nil || c.Clock == nil {
		return nil, errors.New("building the HTTP edge: Env, Log, Clock and Pipeline are required")
	}
	e := &Edge{env: c.Env, log: c.Log, clk: c.Clock, pipe: c.Pipeline, handlers: c.Handlers}
	e.handlers[HandleRoot] = e.root
	e.browser = newBrowserPolicy(c.Env)
	e.guesses = newKeyGuesses(func(addr string) {
		e.log.Warn("too many wrong management keys from one address; its key attempts are refused (429 too_many_key_attempts) until its guesses refill",
			"address", addr, "burst", keyGuessBurst, "refillSeconds", int(keyGuessEvery/time.Second))
	})
	e.rids.init()
	e.inflight = newRegistry()
	e.hangups = newHangupWatcher(e.inflight, e.log)
	e.server = &fasthttp.Server{}
	e.ServerConfig(e.server)
	return e, nil
}

// Inflight is the registry of cancellable work in flight: the hang-up
// watcher cancels a vanished caller's, Shutdown what is left at its
// deadline.
func (e *Edge) Inflight() *Registry { return e.inflight }

// Watchable reports whether a hang-up of conn can be seen.
func (e *Edge) Watchable(conn net.Conn) bool { return e.hangups.watchable(conn) }

// Draining reports that Shutdown began: handlers refuse new work.
func (e *Edge) Draining() bool { return e.draining.Load() }

// MarkDraining sets the flag Shutdown sets first, without closing the
// listeners (tests read what a draining gateway answers).
func (e *Edge) MarkDraining() { e.draining.Store(true) }

// Handler serves one request; mount it on a fasthttp.Server. For the
// admission guarantees (decide before the body is sent) that server needs
// StreamRequestBody and ExpectHandler set as ServerConfig does.
func (e *Edge) Handler(ctx *fasthttp.RequestCtx) { e.serve(ctx, nil) }

// ServerConfig applies the settings the edge relies on to s.
func (e *Edge) ServerConfig(s *fasthttp.Server) {
	srv := e.env.Server
	s.Handler = e.Handler
	s.Name = "omniroute"
	s.StreamRequestBody = true
	s.MaxRequestBodySize = int(e.env.Ingest.HardMaxBodyBytes) + 1
	s.ReadTimeout = srv.HeaderTimeout.Duration()
	s.HeaderReceived = e.headerReceived // the body's own deadline (deadlines.go)
	s.WriteTimeout = e.env.HTTP.WriteTimeout.Duration()
	s.IdleTimeout = srv.KeepAliveIdle.Duration()
	s.Concurrency = int(srv.MaxConnections)
	s.CloseOnShutdown = true
	s.NoDefaultServerHeader = true
	s.NoDefaultDate = false
	s.DisablePreParseMultipartForm = true
	s.ReduceMemoryUsage = false
	s.ExpectHandler = e.expect
	s.Logger = fasthttpLogger{e.log}
	// fasthttp would log the first and last 200 bytes of a malformed
	// request (its Authorization header and prompt included).
	s.SecureErrorLogMessage = true
	s.ErrorHandler = e.serverError
}

// Serve accepts connections on ln until Shutdown.
//
// Serve and Shutdown may race (a caller starts Serve in a goroutine and
// shuts down at once): the listener is remembered and closed by Shutdown,
// so Serve always returns.
func (e *Edge) Serve(ln net.Listener) error {
	e.lnMu.Lock()
	if e.shutdown {
		e.lnMu.Unlock()
		ln.Close()
		return errors.New("transport: Serve called after Shutdown")
	}
	e.lns = append(e.lns, ln)
	e.lnMu.Unlock()
	return e.server.Serve(ln)
}

// Shutdown stops accepting connections and lets in-flight requests and
// streams finish until ctx is done, then cancels what is left in the
// registry. It does not stop the gateway behind the edge.
func (e *Edge) Shutdown(ctx context.Context) error {
	e.draining.Store(true)
	e.lnMu.Lock()
	e.shutdown = true
	for _, ln := range e.lns {
		ln.Close()
	}
	e.lnMu.Unlock()
	// Closing the listeners above makes fasthttp report their second
	// close; only a deadline means requests are still in flight.
	werr := e.server.ShutdownWithContext(ctx)
	if werr == nil || ctx.Err() == nil {
		return nil
	}
	n := e.inflight.CancelAll()
	e.log.Warn("shutdown timeout reached; cancelled in-flight requests", "cancelled", n)
	err := fmt.Errorf("shutdown did not finish in time; cancelled %d in-flight upstream requests", n)
	force, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ferr := e.server.ShutdownWithContext(force); ferr != nil {
		err = fmt.Errorf("%w; connections still open after cancelling: %v", err, ferr)
	}
	return err
}

// Close cancels what is in flight and stops the hang-up watcher.
func (e *Edge) Close() {
	e.inflight.CancelAll()
	e.hangups.Close()
}

// serve routes one request. host is the net/http request context when the
// gateway runs behind HTTPHandler, nil on fasthttp.
func (e *Edge) serve(ctx *fasthttp.RequestCtx, host context.Context) {
	start := time.Now()
	// The id's buffer is pooled, not on the stack: the handlers are called
	// through function values, whose arguments escape.
	ridBuf := ridPool.Get().(*[ridCap]byte)
	defer ridPool.Put(ridBuf) // last: the guards below use rid
	rid := e.RequestID(ridBuf[:0], &ctx.Request.Header)
	ctx.Response.Header.SetBytesV("X-Request-Id", rid)

	e.forgetOversize(ctx)
	path := ctx.Path()
	ep := Find(path)
	r := Other
	if ep >= 0 {
		r = Endpoints[ep].Route
	}
	if ctx.IsHead() {
		// HEAD is GET without the body: every GET route answers it, and
		// fasthttp (or net/http) drops the body of a HEAD answer. The
		// method is put back for that once the handler is done (this
		// defer runs after the panic guard's).
		ctx.Request.Header.SetMethod(fasthttp.MethodGet)
		defer ctx.Request.Header.SetMethod(fasthttp.MethodHead)
	}
	switch routes[r].Dialect {
	case DialectAnthropic:
		SetAnthropicRequestID(&ctx.Response.Header, apierror.Anthropic, rid)
	case DialectCaller:
		SetAnthropicRequestID(&ctx.Response.Header, OtherFormat(path, &ctx.Request.Header), rid)
	}
	// fasthttp does not recover a handler's panic: the process would die.
	// The guard answers 500 internal_error instead (panic.go).
	defer func() {
		if p := recover(); p != nil {
			e.handlerPanic(ctx, r, rid, start, p)
		}
	}()
	probePanic("handler")
	guard := Public
	if ep >= 0 {
		guard = Endpoints[ep].Guard
	}
	if !e.guardBrowser(ctx, r, guard, rid) {
		e.pipe.Finished(r, ctx.Response.StatusCode(), time.Since(start))
		return
	}
	if ep < 0 {
		WriteError(ctx, OtherFormat(path, &ctx.Request.Header), string(rid), ErrNotFound(string(path)))
		e.pipe.Finished(r, ctx.Response.StatusCode(), time.Since(start))
		return
	}
	row := &Endpoints[ep]
	if !row.OwnMethods && !row.Methods.Has(ctx.Method()) {
		e.methodNotAllowed(ctx, r, row.Methods, path, rid)
		e.pipe.Finished(r, ctx.Response.StatusCode(), time.Since(start))
		return
	}
	if !e.handlers[row.Handler](ctx, Request{Route: r, RID: rid, Host: host, Start: start}) {
		e.pipe.Finished(r, ctx.Response.StatusCode(), time.Since(start))
	}
}

// ridCap bounds a request id: a caller's (at most 128 bytes) or a new
// one.
const ridCap = 160

// ridPool holds request id buffers. A handler that keeps the id past its
// return copies it.
var ridPool = sync.Pool{New: func() any { return new([ridCap]byte) }}

// methodNotAllowed answers 405 naming the row's methods, in the route's
// dialect.
func (e *Edge) methodNotAllowed(ctx *fasthttp.RequestCtx, r Route, m Methods, path, rid []byte) {
	ctx.Response.Header.Set(fasthttp.HeaderAllow, m.String())
	err := ErrMethod(m.join(" or "))
	switch routes[r].Dialect {
	case DialectManagement:
		WriteManagementError(ctx, rid, err.Status, "", err.Code, err.Message)
	case DialectCaller:
		WriteError(ctx, OtherFormat(path, &ctx.Request.Header), string(rid), err)
	default:
		WriteError(ctx, r.Format(), string(rid), err)
	}
}

// expect decides an Expect: 100-continue upload before its body is sent:
// routes that admit bodies run their admission checks (which include the
// hard cap; Pipeline.ExpectBody), other routes only the hard cap, so a
// rejected body never crosses the network.
func (e *Edge) expect(ctx *fasthttp.RequestCtx) (status int) {
	defer func() {
		if p := recover(); p != nil {
			e.pipe.Panicked(Of(ctx.Path()), string(ctx.Request.Header.Peek("X-Request-Id")), "expect", p)
			ctx.SetConnectionClose()
			status = fasthttp.StatusInternalServerError
		}
	}()
	e.forgetOversize(ctx)
	if e.draining.Load() {
		return fasthttp.StatusServiceUnavailable
	}
	if status, ok := e.pipe.ExpectBody(ctx); ok {
		return status
	}
	if cl := ctx.Request.Header.ContentLength(); cl > int(e.env.Ingest.HardMaxBodyBytes) {
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// serverError renders fasthttp's own errors (malformed requests, header
// timeouts, a declared body over the hard cap) as JSON instead of plain
// text.
func (e *Edge) serverError(ctx *fasthttp.RequestCtx, err error) {
	ae := apierror.New(apierror.CodeBadRequest)
	var small *fasthttp.ErrSmallBuffer
	if _, over := e.oversize.LoadAndDelete(&ctx.Request.Header); over {
		ae = ErrBodyTooLarge(int64(e.env.Ingest.HardMaxBodyBytes))
	} else if errors.As(err, &small) {
		ae = apierror.New(apierror.CodeHeadersTooLarge)
	} else if IsTimeout(err) {
		ae = apierror.New(apierror.CodeRequestTimeout,
			"the request headers were not received within OMNIROUTE_HEADER_TIMEOUT_MS; resend the request")
	}
	ctx.SetConnectionClose()
	WriteError(ctx, apierror.OpenAI, "", ae)
}

// rootBody names the gateway and where its pages are, for GET /.
const rootBody = `{"name":"omniroute","description":"OmniRoute AI gateway: OpenAI and Anthropic APIs under /v1","dashboard":"` + DashboardPath + `","health":"` + HealthzPath + `"}`

// root answers GET / (and HEAD /, which clients such as Claude Code send
// at start to see that the base URL answers) with 200.
func (e *Edge) root(ctx *fasthttp.RequestCtx, _ Request) bool {
	ctx.SetContentType("application/json")
	ctx.SetBodyString(rootBody)
	return false
}

// fasthttpLogger routes fasthttp's own log lines into slog.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn(fmt.Sprintf(format, args...), "component", "fasthttp")
}
