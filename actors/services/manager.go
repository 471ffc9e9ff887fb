// Package services supervises sidecar processes: one actor per service
// owns its process, health checks, restart policy and persisted choices,
// and publishes an immutable Status that readers load without asking the
// actor.
//
// A start probes the port first: anything already on it is a port
// conflict, never adopted (a process that took a crashed child's port and
// copied its health answer would otherwise receive every prompt). Each
// spawn gets a fresh nonce (config.ServiceNonceEnv); a health answer must
// echo it when it carries one and, on Linux, come from a socket of the
// child's process group (provesOwn). A spawned child runs in its own process group with its
// output in a byte-bounded ring; it is healthy after its health check
// passes (within three health intervals, or it is killed and counts as a
// crash). A stop sends SIGTERM to the whole group, waits the grace period,
// then SIGKILLs the group, so grandchildren never survive. A crash is
// restarted with capped exponential backoff and jitter, reset after a
// stable run; too many crashes in a window stop the restarts (GaveUp)
// until an explicit start. Every delay is a timer of the injected clock,
// so tests drive them with a fake one.
package services

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/ringbuf"
	"github.com/omniroute/gateway/internal/sanitize"
)

// Options configures a Manager.
type Options struct {
	// DataDir holds the state file (required).
	DataDir string
	// Clock gives the time and every timer (health interval, start
	// deadline, backoff, stop grace); nil = the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger // nil = discard
	// Rand returns a float in [0,1) for backoff jitter (nil = math/rand).
	Rand func() float64
	// Redact cleans each line of a child's output before it is kept and
	// served by the logs API (nil = sanitize.Secrets).
	Redact func(string) string
}

// Manager owns the supervisors of every configured service.
type Manager struct {
	root    *actor.RootContext
	clk     clock.Clock
	log     *slog.Logger
	rand    func() float64
	redact  func(string) string
	store   *stateStore
	spawner *spawner
	hc      *http.Client
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // probes, output readers, waiters
	handles []*Handle
	byName  map[string]*Handle
	closed  atomic.Bool
}

// Handle is one service as the gateway sees it: a published status, the
// log ring, and commands.
type Handle struct {
	m    *Manager
	pid  *actor.PID
	spec Spec
	snap atomic.Pointer[Status]
	logs *ringbuf.Buffer
	// gen is the supervisor's attempt generation, kept across its
	// restarts so a fresh supervisor ignores its predecessor's late
	// events; resume tells it the service was wanted running.
	gen    atomic.Uint64
	resume atomic.Bool
	// owned caches VerifyServer's last proof (serving.go).
	owned atomic.Pointer[ownedListeners]
}

// strategy restarts a service's supervisor after a panic. The failed one
// kills its child's process group first (a fresh supervisor could not
// know it) and answers pending commands; the fresh one rebuilds from the
// spec, the state file and the last status, and starts the service again
// when it was wanted running (as after a crash, with the same backoff on
// a conflict).
var strategy = supervise.Restart("service-supervisor")

// newSupervisor builds a supervisor for h: at start-up and after every
// restart of the actor.
func newSupervisor(m *Manager, h *Handle) *supervisor {
	sp := &h.spec
	s := &supervisor{m: m, h: h, spec: sp, state: Stopped, health: Unknown, installed: true, autoStart: sp.AutoStart, gen: h.gen.Load()}
	saved := m.store.get(sp.Name)
	if saved.AutoStart != nil {
		s.autoStart = *saved.AutoStart
	}
	switch {
	case saved.Installed != nil:
		s.installed = *saved.Installed
	default:
		if _, err := h.spec.resolveCommand(); err != nil {
			s.installed = false
			s.lastError = err.Error() + "; install the program, then POST /api/services/" + sp.Name + "/install"
		}
	}
	if !s.installed {
		s.state = NotInstalled
	}
	if last := h.snap.Load(); last != nil {
		s.crashes.restarts, s.crashes.lastExit = last.Restarts, last.LastExit
	}
	return s
}

// Start creates one supervisor actor per spec on system. It does not start
// any process: call StartAuto for the services marked auto-start.
func Start(system *actor.ActorSystem, specs []Spec, o Options) (*Manager, error) {
	o.Clock = clock.Or(o.Clock)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Redact == nil {
		o.Redact = sanitize.Secrets
	}
	store, err := loadState(o.DataDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{root: system.Root, clk: o.Clock, log: o.Logger, rand: o.Rand, redact: o.Redact, store: store,
		hc:  &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}},
		ctx: ctx, cancel: cancel, byName: map[string]*Handle{}}
	if len(specs) > 0 {
		m.spawner = newSpawner()
	}
	for i := range specs {
		sp := specs[i]
		h := &Handle{m: m, spec: sp, logs: ringbuf.New(sp.LogBufferBytes)}
		newSupervisor(m, h).publish()
		pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newSupervisor(m, h) }, actor.WithGuardian(strategy)),
			fmt.Sprintf("service-%s-%p", sp.Name, h))
		if err != nil {
			m.Close(context.Background())
			return nil, fmt.Errorf("spawning the supervisor of %s: %w", sp.Name, err)
		}
		h.pid = pid
		m.handles = append(m.handles, h)
		m.byName[sp.Name] = h
	}
	return m, nil
}

func (m *Manager) goProbe(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Get returns the service named name.
func (m *Manager) Get(name string) (*Handle, bool) {
	if m == nil {
		return nil, false
	}
	h, ok := m.byName[name]
	return h, ok
}

// All returns every service, sorted by name.
func (m *Manager) All() []*Handle {
	if m == nil {
		return nil
	}
	return append([]*Handle(nil), m.handles...)
}

// Addr resolves a service name to its loopback address. The port is fixed
// for the gateway's life, so this works before the service runs.
func (m *Manager) Addr(name string) (string, error) {
	h, ok := m.Get(name)
	if !ok {
		return "", fmt.Errorf("service %q is not declared in services", name)
	}
	return h.spec.Addr(), nil
}

// StartAuto starts every installed service whose auto-start is on and
// waits until each attempt concludes (running or error) or ctx ends. It
// returns the services that did not come up.
func (m *Manager) StartAuto(ctx context.Context) []Status {
	var mu sync.Mutex
	var failed []Status
	var wg sync.WaitGroup
	for _, h := range m.All() {
		st := h.Status()
		if !st.AutoStart || !st.Installed {
			continue
		}
		wg.Add(1)
		go func(h *Handle) {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, h.spec.StartWait())
			defer cancel()
			st, err := h.Start(c)
			if err != nil || st.State != Running {
				mu.Lock()
				failed = append(failed, st)
				mu.Unlock()
			}
		}(h)
	}
	wg.Wait()
	return failed
}

// Close stops every service (SIGTERM to each group, SIGKILL after its
// grace) and waits for them, then stops the actors. ctx bounds the wait;
// groups still alive when it ends are SIGKILLed. Close is idempotent.
func (m *Manager) Close(ctx context.Context) {
	if m == nil || !m.closed.CompareAndSwap(false, true) {
		return
	}
	var wg sync.WaitGroup
	for _, h := range m.handles {
		wg.Add(1)
		go func(h *Handle) {
			defer wg.Done()
			ch := make(chan result, 1)
			m.root.Send(h.pid, stopCmd{reply: ch, closing: true})
			c, cancel := context.WithTimeout(ctx, h.spec.StopWait())
			defer cancel()
			select {
			case <-ch:
			case <-c.Done():
				if st := h.Status(); st.PID != nil {
					killGroup(*st.PID)
				}
				m.log.Warn("service did not stop in time; killed its process group", "service", h.spec.Name)
				select {
				case <-ch:
				case <-time.After(killWait + time.Second):
				}
			}
		}(h)
	}
	wg.Wait()
	// Probes, output readers and exit waiters end first (their context is
	// cancelled, every child is gone): what they still report then reaches
	// a live supervisor instead of dead letters.
	m.cancel()
	m.wg.Wait()
	for _, h := range m.handles {
		_ = m.root.PoisonFuture(h.pid).Wait()
	}
	if m.spawner != nil {
		m.spawner.close()
	}
	m.hc.CloseIdleConnections()
}

// Name returns the service name.
func (h *Handle) Name() string { return h.spec.Name }

// Spec returns the resolved specification.
func (h *Handle) Spec() Spec { return h.spec }

// Addr returns the service's loopback host:port.
func (h *Handle) Addr() string { return h.spec.Addr() }

// Status returns the latest published status (no message to the actor).
func (h *Handle) Status() Status { return *h.snap.Load() }

// Logs returns the service's log ring.
func (h *Handle) Logs() *ringbuf.Buffer { return h.logs }

// ErrTimeout: the command was accepted but did not conclude in time; the
// returned status is the current one and the action continues.
var ErrTimeout = errors.New("the service did not finish the action in time; it continues in the background")

func (h *Handle) ask(ctx context.Context, msg any, ch chan result) (Status, error) {
	if h.m.closed.Load() {
		return h.Status(), ErrClosed
	}
	h.m.root.Send(h.pid, msg)
	select {
	case r := <-ch:
		return r.status, r.err
	case <-ctx.Done():
		return h.Status(), ErrTimeout
	}
}

// Start starts the service and waits until it is running (healthy) or
// the attempt failed. An explicit start clears a give-up.
func (h *Handle) Start(ctx context.Context) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, startCmd{reply: ch, explicit: true}, ch)
}

// Stop stops the service and waits until its process group is gone. It is
// idempotent.
func (h *Handle) Stop(ctx context.Context) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, stopCmd{reply: ch}, ch)
}

// Restart stops then starts the service.
func (h *Handle) Restart(ctx context.Context) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, restartCmd{reply: ch}, ch)
}

// SetAutoStart persists whether the service starts with the gateway.
func (h *Handle) SetAutoStart(ctx context.Context, enabled bool) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, autoStartCmd{enabled: enabled, reply: ch}, ch)
}

// Install marks the service installed once its program is found.
func (h *Handle) Install(ctx context.Context) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, installCmd{install: true, reply: ch}, ch)
}

// Uninstall marks a stopped service not installed (its files are left
// alone: the gateway never installed them).
func (h *Handle) Uninstall(ctx context.Context) (Status, error) {
	ch := make(chan result, 1)
	return h.ask(ctx, installCmd{install: false, reply: ch}, ch)
}

// StartWait and StopWait bound Start and Stop for callers choosing a ctx.
func (h *Handle) StartWait() time.Duration { return h.spec.StartWait() + h.spec.StopWait() }

// StopWait bounds Stop.
func (h *Handle) StopWait() time.Duration { return h.spec.StopWait() }
