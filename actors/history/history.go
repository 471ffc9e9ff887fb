// Package history is the dashboard's memory: an actor that once a second
// takes a sample of the gateway's figures (a caller-supplied function that
// reads published snapshots and atomics, never waits) and keeps the last
// few minutes in a ring. Readers get the ring as an immutable slice with
// one atomic load, so the dashboard's polling never sends a message and
// the request path never sees this actor at all.
package history

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/messages"
)

// Point is one sample. Counters are cumulative since start; readers take
// differences between points for rates.
type Point struct {
	At             time.Time `json:"-"`
	Limit          int64     `json:"limit"`
	ActiveCost     int64     `json:"activeCost"`
	QueuedCost     int64     `json:"queuedCost"`
	QueuedRequests int64     `json:"queuedRequests"`
	Inflight       int64     `json:"inflight"`
	InflightBytes  int64     `json:"inflightBytes"`
	Requests       uint64    `json:"-"`
	Errors         uint64    `json:"-"`
	// Buckets are the cumulative counts of the request-duration buckets
	// (the last is +Inf).
	Buckets []uint64 `json:"-"`
	// Targets are the cumulative attempts and successes of each target,
	// by target id.
	Targets []TargetCount `json:"-"`
}

// TargetCount is one target's cumulative attempts and successes.
type TargetCount struct{ Attempts, Successes uint64 }

// Options configures the actor.
type Options struct {
	// Sample reads the figures now; it must not block.
	Sample func(now time.Time) Point
	Clock  clock.Clock
	// Interval between samples (default one second); Size is how many are
	// kept (default 300: five minutes).
	Interval time.Duration
	Size     int
	// Manual disables the timer: samples are taken only by Tick (tests).
	Manual bool
}

// Handle publishes the ring.
type Handle struct {
	root    *actor.RootContext
	pid     *actor.PID
	points  atomic.Pointer[[]Point]
	stopped atomic.Bool
}

// Points returns the kept samples, oldest first. The slice is never
// written again; callers must not modify it.
func (h *Handle) Points() []Point { return *h.points.Load() }

// Tick takes a sample now.
func (h *Handle) Tick() { h.root.Send(h.pid, tickMsg) }

// Stop stops the actor and waits for it. It is idempotent.
func (h *Handle) Stop() {
	if h.stopped.CompareAndSwap(false, true) {
		_ = h.root.PoisonFuture(h.pid).Wait()
	}
}

type tick struct{}

var tickMsg = &tick{}

type historyActor struct {
	h     *Handle
	opts  Options
	ticks repeat.Ticker
}

// strategy restarts the actor after a panic (a sample function that
// panicked): the ring lives in the handle, so a fresh actor continues it.
// Stopping instead would freeze the dashboard's charts for good.
var strategy = supervise.Restart("history")

// Spawn takes a first sample (so the ring is never empty) and starts the
// actor.
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if o.Sample == nil {
		return nil, fmt.Errorf("history.Spawn: Options.Sample is nil")
	}
	o.Clock = clock.Or(o.Clock)
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Size <= 0 {
		o.Size = 300
	}
	h := &Handle{root: system.Root}
	first := []Point{o.Sample(o.Clock.Now())}
	h.points.Store(&first)
	produce := func() actor.Actor { return &historyActor{h: h, opts: o} }
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(produce, actor.WithGuardian(strategy)), fmt.Sprintf("history-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning the dashboard history actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

func (a *historyActor) Receive(ctx actor.Context) {
	if !a.opts.Manual && a.ticks.Lifecycle(ctx, a.opts.Clock, a.opts.Interval, tickMsg) {
		return
	}
	switch ctx.Message().(type) {
	case messages.Crash:
		ctx.Message().(messages.Crash).Panic()
	case *tick:
		p := a.opts.Sample(a.opts.Clock.Now())
		old := *a.h.points.Load()
		keep := old
		if len(keep) >= a.opts.Size {
			keep = keep[len(keep)-a.opts.Size+1:]
		}
		next := make([]Point, 0, len(keep)+1)
		next = append(append(next, keep...), p)
		a.h.points.Store(&next)
	}
}
