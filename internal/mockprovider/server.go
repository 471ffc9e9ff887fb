package mockprovider

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/sanitize"
)

// Options configures a Server.
type Options struct {
	// Default is the behaviour for models without their own entry, and what
	// POST /_mock/reset returns to.
	Default Behavior
	// Logf receives operational messages (admin changes, serve errors); nil
	// keeps the server silent.
	Logf func(format string, args ...any)
	// RequestLog keeps a record of every model request (reqlog.go); off
	// when its Max is 0.
	RequestLog RequestLogOptions
}

// Server is the mock provider. Create it with New, run it with Start or
// Serve, stop it with Close.
type Server struct {
	logf    func(string, ...any)
	initial Behavior
	initErr error
	srv     *fasthttp.Server

	closing   chan struct{} // closed by Close: ends every wait at once
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	lns     []net.Listener
	addr    string
	closed  bool
	serving sync.WaitGroup

	connsMu sync.Mutex
	conns   map[net.Conn]fasthttp.ConnState

	table atomic.Pointer[behaviorTable]
	seq   atomic.Uint64

	modelsMu sync.RWMutex
	models   map[string]*modelEntry
	totals   counters
	bodies   bodyLog

	bufs sync.Pool // *[]byte scratch for rendering bodies

	quotaAPIs quotaAPIState // provider usage APIs (quotaapi.go)

	sched    scheduler  // behaviour updates planned for later (schedule.go)
	requests requestLog // per-request records (reqlog.go)
}

// New returns a server that is not yet listening. An invalid default
// behaviour is reported by Start or Serve.
func New(opts Options) *Server {
	s := &Server{
		logf:    opts.Logf,
		initial: opts.Default,
		initErr: opts.Default.Validate(),
		closing: make(chan struct{}),
		conns:   map[net.Conn]fasthttp.ConnState{},
		models:  map[string]*modelEntry{},
	}
	s.requests.init(opts.RequestLog)
	if s.initErr != nil {
		s.initErr = fmt.Errorf("mockprovider: default %w", s.initErr)
	}
	s.table.Store(&behaviorTable{def: compile(opts.Default), models: map[string]*compiled{}})
	s.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "omniroute-mockprovider",
		NoDefaultServerHeader: true,
		// The Date header needs a process-wide refresher goroutine that never
		// exits, which would make every user of the mock fail goleak.
		NoDefaultDate:      true,
		IdleTimeout:        2 * time.Minute,
		ReadBufferSize:     16 << 10,
		MaxRequestBodySize: 64 << 20,
		// fasthttp's worker-pool cleaner sleeps this long between passes and
		// only notices a stop after waking; keep it short so Close leaves no
		// goroutine behind for long.
		MaxIdleWorkerDuration: 50 * time.Millisecond,
		Logger:                fasthttpLogger{s},
		// No request bytes in error logs: they carry the provider key.
		SecureErrorLogMessage: true,
		ConnState:             s.connState,
	}
	return s
}

type fasthttpLogger struct{ s *Server }

func (l fasthttpLogger) Printf(format string, args ...any) { l.s.log("fasthttp: "+format, args...) }

// log writes one line, redacted: the mock's output is a supervised
// service's log, which the gateway serves over its logs API.
func (s *Server) log(format string, args ...any) {
	if s.logf != nil {
		s.logf("%s", sanitize.Secrets(fmt.Sprintf(format, args...)))
	}
}

// connState tracks open connections and their state. Close uses it instead
// of fasthttp's Shutdown, which polls every 100 ms and so would add a tenth
// of a second to every test that stops a mock.
func (s *Server) connState(c net.Conn, st fasthttp.ConnState) {
	closeNow := false
	s.connsMu.Lock()
	switch st {
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = st
		closeNow = st == fasthttp.StateIdle && s.isClosing()
	}
	s.connsMu.Unlock()
	if closeNow { // a response finished after Close began: no next request
		_ = c.Close()
	}
}

func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// closeConns closes the tracked connections (only those not in the middle
// of a request unless all is set) and reports how many remain open.
func (s *Server) closeConns(all bool) int {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	for c, st := range s.conns {
		if all || st != fasthttp.StateActive {
			_ = c.Close()
		}
	}
	return len(s.conns)
}

// Handler returns the request handler, for embedding the mock in another
// fasthttp server. Close still ends its waits; conn tracking is the host's.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Addr returns the address of the first listener ("127.0.0.1:PORT"), or ""
// before Start or Serve.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start listens on addr ("127.0.0.1:0" when empty) and serves in the
// background until Close. It returns the bound address.
func (s *Server) Start(addr string) (string, error) {
	if s.initErr != nil {
		return "", s.initErr
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("mockprovider: listen on %s: %w", addr, err)
	}
	if err := s.register(ln); err != nil {
		_ = ln.Close()
		return "", err
	}
	go func() {
		if err := s.serve(ln); err != nil {
			s.log("mockprovider: serve %s: %v", ln.Addr(), err)
		}
	}()
	return ln.Addr().String(), nil
}

// Serve serves on ln until Close and returns nil after a Close.
func (s *Server) Serve(ln net.Listener) error {
	if s.initErr != nil {
		return s.initErr
	}
	if err := s.register(ln); err != nil {
		return err
	}
	return s.serve(ln)
}

func (s *Server) register(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("mockprovider: server is closed")
	}
	s.lns = append(s.lns, ln)
	if s.addr == "" {
		s.addr = ln.Addr().String()
	}
	s.serving.Add(1)
	return nil
}

func (s *Server) serve(ln net.Listener) error {
	defer s.serving.Done()
	err := s.srv.Serve(ln)
	select {
	case <-s.closing:
		return nil // the listener was closed on purpose
	default:
	}
	if err != nil {
		return fmt.Errorf("mockprovider: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Close stops accepting, ends every waiting or hung request (they get a 503
// or their stream is cut), lets responses being written finish, closes every
// connection and waits for the serving goroutines. Connections still busy
// after 5 s are cut. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		lns := append([]net.Listener(nil), s.lns...)
		s.mu.Unlock()
		close(s.closing)
		s.sched.stop()
		for _, ln := range lns {
			_ = ln.Close() // makes fasthttp's Serve return
		}
		deadline := time.Now().Add(5 * time.Second)
		for s.closeConns(false) > 0 {
			if time.Now().After(deadline) {
				s.closeErr = fmt.Errorf("mockprovider: close: %d connections still busy after 5s; cut them", s.closeConns(true))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		s.serving.Wait()
	})
	return s.closeErr
}

func (s *Server) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		*b = (*b)[:0]
		s.bufs.Put(b)
	}
}
