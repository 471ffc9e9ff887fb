package quota

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/quota"
)

// readingUpdate is an adapter's current reading, sent to its aggregator.
type readingUpdate struct {
	source  quota.Source
	reading quota.Reading
}

// reevaluate asks the aggregator to recompute when evidence expires.
type reevaluate struct{}

// aggregator merges one connection's adapter readings.
type aggregator struct {
	id       int
	spec     ConnSpec
	c        *conn
	clk      interface{ Now() time.Time }
	opts     Options
	ready    chan struct{} // closed by the first incarnation's Started
	readings [quota.SourceUnknown]quota.Reading
	timer    scheduler.CancelFunc
	timerAt  time.Time
}

// aggregatorStrategy restarts an aggregator after a panic: routing reads
// the state it publishes. The fresh one spawns fresh adapters (a restart
// stops the old ones) and publishes the new header adapter's PID; until
// the adapters report again the last published state stands.
var aggregatorStrategy = supervise.Restart("quota-aggregator")

// adapterStrategy restarts a failed adapter or poller on its own: each
// only feeds readings, and a fresh one reports again (the poller polls at
// once, the crash-loop delay keeping a failing one from hammering the
// provider).
var adapterStrategy = supervise.Restart("quota-adapter")

func (a *aggregator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *actor.Started:
		a.start(ctx)
	case *actor.Restarting, *actor.Stopping:
		if a.timer != nil {
			a.timer()
			a.timer = nil
		}
	case *readingUpdate:
		if m.source < quota.SourceUnknown {
			a.readings[m.source] = m.reading
		}
		a.update(ctx)
	case reevaluate:
		a.timerAt = time.Time{}
		a.update(ctx)
	case *addModels:
		models := append(slices.Clip(a.spec.Models), m.models...)
		a.spec.Models = models
		a.c.models.Store(&models)
		a.update(ctx)
		ctx.Respond(len(models))
	}
}

func (a *aggregator) start(ctx actor.Context) {
	self := ctx.Self()
	header := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &headerAdapter{parent: self, mapping: a.spec.Mapping, clk: a.clk, threshold: a.opts.Threshold, byModel: map[string][]quota.Value{}}
	}))
	if len(a.spec.Configured) > 0 {
		vals := a.spec.Configured
		ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &configuredAdapter{parent: self, values: vals} }))
	}
	if p := a.spec.Poll; p != nil {
		id, onPoll := a.id, a.opts.OnPoll
		ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &poller{parent: self, spec: *p, clk: a.clk, client: a.opts.HTTPClient, onPoll: func(ok bool) {
				if onPoll != nil {
					onPoll(id, ok)
				}
			}}
		}))
	}
	if a.opts.Estimates != nil && a.spec.Budgeted {
		read, id := a.opts.Estimates, a.id
		ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &estimateAdapter{parent: self, read: func() []quota.Value { return read(id) }}
		}))
	}
	a.c.header.Store(header)
	select {
	case <-a.ready:
	default:
		close(a.ready) // the first start: Spawn waits for it
	}
}

func (a *aggregator) update(ctx actor.Context) {
	now := a.clk.Now()
	until := a.publish(now)
	// Re-evaluate when the earliest value expires, so an exhausted state
	// ends at its reset even if no new evidence arrives.
	if !until.IsZero() && (a.timerAt.IsZero() || until.Before(a.timerAt)) {
		if a.timer != nil {
			a.timer()
		}
		d := until.Sub(now) + time.Millisecond
		if d < time.Millisecond {
			d = time.Millisecond
		}
		a.timerAt = until
		a.timer = scheduler.NewTimerScheduler(ctx).SendOnce(d, ctx.Self(), reevaluate{})
	}
}

// publish computes and stores the state; it returns the earliest expiry.
func (a *aggregator) publish(now time.Time) time.Time {
	rs := a.readings[:]
	wide := quota.Collect(rs, "", a.opts.Threshold, now)
	st := &ConnState{ProviderID: a.spec.Provider, ConnectionID: a.spec.Name, Supported: wide.Supported, FetchedAt: now,
		Status: wide.Status, Values: wide.Values, Error: wide.Error, Models: make([]ModelState, len(a.spec.Models))}
	if st.Values == nil {
		st.Values = []quota.Value{}
	}
	for s, r := range a.readings {
		if r.Supported || len(r.Values) > 0 || r.Err != "" {
			st.Sources = append(st.Sources, quota.Source(s).String())
		}
	}
	if st.Sources == nil {
		st.Sources = []string{}
	}
	until := wide.Until
	worst := wide.Status
	for i, m := range a.spec.Models {
		ms := quota.Collect(rs, m, a.opts.Threshold, now)
		if ms.Values == nil {
			ms.Values = []quota.Value{}
		}
		st.Models[i] = ModelState{Model: m, Status: ms.Status, Values: ms.Values, Until: ms.Until, StatusUntil: ms.StatusUntil}
		if ms.Status.Severity() > worst.Severity() {
			worst = ms.Status
		}
		if !ms.Until.IsZero() && (until.IsZero() || ms.Until.Before(until)) {
			until = ms.Until
		}
	}
	// The connection's status is the most severe of its connection-wide
	// status and its models' (routing uses each model's own status).
	st.Status = worst
	a.c.snap.Store(st)
	return until
}
