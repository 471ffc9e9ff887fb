// Package pressure is the resource-pressure actor: once a second it samples
// the process's memory figures (internal/pressure.System), runs them
// through the severity state machine (internal/pressure.Tracker), and
// publishes the state as an immutable snapshot that admission reads with
// one atomic load, never a message.
//
// Subscribers (the ingest actor, the lanes' pressure follower) are sent
// every sampled state as a message, so that critical pressure can abort
// uploads and halve the upstreams' limits without polling, each on its
// own goroutine: this actor only sends. Transitions are logged with the figures behind them:
// OmniRoute's 503 storms were hard to diagnose because its logs did not say
// which signal tripped.
package pressure

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"

	"github.com/omniroute/gateway/internal/clock"
	mem "github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/messages"
)

// DefaultInterval is the sampling period.
const DefaultInterval = time.Second

// Options configures the actor.
type Options struct {
	Config mem.Config
	// Sample reads one observation; nil reads the real system (with PSI
	// from PSISource).
	Sample    func() mem.Sample
	PSISource mem.PSISource
	Clock     clock.Clock
	// Interval between samples (DefaultInterval). Manual disables the
	// timer: samples are then taken only by Tick and Observe (tests, and
	// embedders that drive sampling themselves).
	Interval time.Duration
	Manual   bool
	Log      *slog.Logger
	// GoLimitFallback is the limit the Go runtime's memory is compared with
	// when GOMEMLIMIT is unset: a real limit the process is held to (the
	// cgroup's), never the ingest budget or the physical memory; 0 leaves
	// the Go ratio unset. It applies to the built-in sampler only.
	GoLimitFallback int64
}

// Handle publishes the state and accepts samples.
type Handle struct {
	root  *actor.RootContext
	pid   *actor.PID
	state atomic.Pointer[mem.State]
	subs  atomic.Pointer[[]*actor.PID]
	// stopped makes Stop idempotent (a second Poison would be a dead letter).
	stopped atomic.Bool
}

// State returns the latest state; never nil after Spawn.
func (h *Handle) State() *mem.State { return h.state.Load() }

// Subscribe makes the actor send pid every state it samples from now on,
// as a *messages.Published[*internal/pressure.State] (the same immutable
// value State returns). The composition root subscribes the ingest actor
// and the lanes' pressure follower.
func (h *Handle) Subscribe(pid *actor.PID) {
	for {
		old := h.subs.Load()
		next := append(append([]*actor.PID{}, *old...), pid)
		if h.subs.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Tick takes a sample now.
func (h *Handle) Tick() { h.root.Send(h.pid, tickMsg) }

// Observe feeds an externally taken sample, as if the actor had read it.
func (h *Handle) Observe(s mem.Sample) { h.root.Send(h.pid, &observe{s}) }

// Stop stops the actor and waits for it. It is idempotent.
func (h *Handle) Stop() {
	if h.stopped.CompareAndSwap(false, true) {
		_ = h.root.PoisonFuture(h.pid).Wait()
	}
}

type tick struct{}

var tickMsg = &tick{}

type observe struct{ s mem.Sample }

type pressureActor struct {
	h       *Handle
	opts    Options
	tracker *mem.Tracker
	ticks   repeat.Ticker
}

// Spawn validates the thresholds, takes a first sample (so the published
// state is real from the start) and starts the actor.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("resource pressure thresholds: %w", err)
	}
	o.Clock = clock.Or(o.Clock)
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Sample == nil {
		src := o.PSISource
		if src == "" {
			src = mem.PSIAuto
		}
		sys := &mem.System{PSI: src}
		fallback := o.GoLimitFallback
		o.Sample = func() mem.Sample {
			s := sys.Sample()
			if s.GoLimit <= 0 && fallback > 0 {
				s.GoLimit = fallback
			}
			return s
		}
	}
	h := &Handle{root: system.Root}
	none := []*actor.PID{}
	h.subs.Store(&none)
	first := &pressureActor{h: h, opts: o, tracker: mem.NewTracker(o.Config)}
	first.observe(o.Sample()) // published before anyone reads it
	// Every incarnation, the first included, resumes from the published
	// state: a restart keeps the severity and only starts its streaks over.
	produce := func() actor.Actor {
		return &pressureActor{h: h, opts: o, tracker: mem.ResumeTracker(o.Config, *h.state.Load())}
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(produce, actor.WithGuardian(strategy)), fmt.Sprintf("pressure-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning resource-pressure actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

// strategy restarts the pressure actor after a panic: admission reads the
// severity it publishes, so it must keep sampling. The fresh actor
// resumes the published state.
var strategy = supervise.Restart("pressure")

func (a *pressureActor) Receive(ctx actor.Context) {
	if !a.opts.Manual && a.ticks.Lifecycle(ctx, a.opts.Clock, a.opts.Interval, tickMsg) {
		return
	}
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *tick:
		a.observe(a.opts.Sample())
	case *observe:
		a.observe(m.s)
	}
}

func (a *pressureActor) observe(s mem.Sample) {
	prev := a.tracker.State()
	st := a.tracker.Observe(s, a.opts.Clock.Now())
	// Log before publishing, so whoever sees the new severity finds the
	// transition (and its figures) in the log already.
	if st.Severity != prev.Severity || st.Reason != prev.Reason {
		a.logTransition(prev, st)
	}
	a.h.state.Store(&st)
	for _, pid := range *a.h.subs.Load() {
		a.h.root.Send(pid, &messages.Published[*mem.State]{Snapshot: &st})
	}
}

func (a *pressureActor) logTransition(prev, st mem.State) {
	s := &st.Sample
	args := []any{"from", prev.Severity.String(), "to", st.Severity.String(), "reason", st.Reason,
		"goUsedBytes", s.GoUsed, "goLimitBytes", s.GoLimit, "goRatio", round(s.GoRatio()),
		"cgroupWorkingSetBytes", s.WorkingSet(), "cgroupMaxBytes", s.CgroupMax, "cgroupRatio", round(s.CgroupRatio()),
		"cgroupHighRatio", round(s.CgroupHighRatio()), "psiSome10", s.PSISome, "psiFull10", s.PSIFull, "psiSource", s.PSIFrom}
	if st.Severity == mem.Normal {
		a.opts.Log.Info("memory pressure recovered", args...)
		return
	}
	a.opts.Log.Warn("memory pressure", args...)
}

func round(x float64) float64 { return float64(int64(x*1000)) / 1000 }
