// Package targets owns what the gateway has observed about each upstream
// target (connection + model): attempts, successes, failures by class,
// consecutive failures and time to first byte. The transport reports every
// attempt with one fire-and-forget message; readers (health, routing) see
// an immutable snapshot the actor publishes, never the actor's state.
package targets

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/messages"
)

// Stats is one target's published view.
type Stats struct {
	Target              string            `json:"target"`
	Attempts            uint64            `json:"attempts"`
	Successes           uint64            `json:"successes"`
	Failures            map[string]uint64 `json:"failures,omitempty"`
	ConsecutiveFailures int               `json:"consecutiveFailures"`
	LastFailureClass    string            `json:"lastFailureClass,omitempty"`
	LastFailureAt       *time.Time        `json:"lastFailureAt,omitempty"`
	TTFBEWMAMillis      float64           `json:"ttfbEwmaMs"`
}

// Snapshot is the immutable published state.
type Snapshot struct {
	At      time.Time `json:"at"`
	Targets []Stats   `json:"targets"`
}

// Handle is what the transport holds: a way to report and to read.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	snap atomic.Pointer[Snapshot]
}

// Report sends an attempt outcome (fire-and-forget).
func (h *Handle) Report(m *messages.AttemptFinished) { h.root.Send(h.pid, m) }

// Snapshot returns the latest published view.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// Stop stops the actor and waits for it.
func (h *Handle) Stop() { _ = h.root.PoisonFuture(h.pid).Wait() }

// PublishInterval is how often successes alone are republished; failures
// publish at once.
const PublishInterval = time.Second

type tick struct{}

type state struct {
	attempts, successes uint64
	failures            [messages.NumFailureClasses]uint64
	consecutive         int
	lastClass           messages.FailureClass
	lastFailureAt       time.Time
	ttfbEWMA            float64 // milliseconds
}

type targetsActor struct {
	h      *Handle
	clk    clock.Clock
	names  []string
	st     []state
	dirty  bool
	cancel scheduler.CancelFunc
}

// Spawn starts the actor for the named targets (index = target id).
func Spawn(system *actor.ActorSystem, names []string, clk clock.Clock) (*Handle, error) {
	h := &Handle{root: system.Root}
	a := &targetsActor{h: h, clk: clk, names: names, st: make([]state, len(names))}
	a.publish()
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), fmt.Sprintf("targets-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning targets actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

func (a *targetsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.cancel = scheduler.NewTimerScheduler(ctx).SendRepeatedly(PublishInterval, PublishInterval, ctx.Self(), tick{})
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	case *messages.AttemptFinished:
		a.observe(m)
	case tick:
		if a.dirty {
			a.publish()
		}
	}
}

func (a *targetsActor) observe(m *messages.AttemptFinished) {
	if m.Target < 0 || m.Target >= len(a.st) {
		return
	}
	s := &a.st[m.Target]
	if !m.MidStream {
		s.attempts++
	}
	if m.Class == messages.Canceled {
		a.dirty = true
		return
	}
	if m.Class == messages.OK {
		s.successes++
		s.consecutive = 0
		ms := float64(m.TTFB) / float64(time.Millisecond)
		if s.ttfbEWMA == 0 {
			s.ttfbEWMA = ms
		} else {
			s.ttfbEWMA = 0.2*ms + 0.8*s.ttfbEWMA
		}
		a.dirty = true
		return
	}
	s.failures[m.Class]++
	if m.Class.ProviderSide() {
		s.consecutive++
	}
	s.lastClass = m.Class
	s.lastFailureAt = m.At
	a.publish()
}

func (a *targetsActor) publish() {
	snap := &Snapshot{At: a.clk.Now(), Targets: make([]Stats, len(a.st))}
	for i := range a.st {
		s := &a.st[i]
		out := Stats{Target: a.names[i], Attempts: s.attempts, Successes: s.successes, ConsecutiveFailures: s.consecutive, TTFBEWMAMillis: s.ttfbEWMA}
		for c, n := range s.failures {
			if n > 0 {
				if out.Failures == nil {
					out.Failures = map[string]uint64{}
				}
				out.Failures[messages.FailureClass(c).String()] = n
			}
		}
		if !s.lastFailureAt.IsZero() {
			t := s.lastFailureAt
			out.LastFailureAt = &t
			out.LastFailureClass = s.lastClass.String()
		}
		snap.Targets[i] = out
	}
	a.h.snap.Store(snap)
	a.dirty = false
}
