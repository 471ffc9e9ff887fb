package quota

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// readingUpdate is an adapter's current reading, sent to its aggregator.
type readingUpdate struct {
	source  quota.Source
	reading quota.Reading
	// at is when a poll reading was taken (the poll's start); zero for
	// the other sources.
	at time.Time
}

// peerPoll is a poll reading the connection's polling member took, heard
// from it through the cluster actor.
type peerPoll struct {
	reading quota.Reading
	at      time.Time
}

// setPolling starts (on) or stops this member's poller of the
// connection: the cluster actor's decision in cluster mode.
type setPolling struct{ on bool }

// resharePoll asks the polling member's aggregator to send the poll
// reading it holds again: a member joined that has not heard it.
type resharePoll struct{}

// sharePoll and shareHeaders are readings this node took, for the
// cluster actor to send to the other members.
type sharePoll struct {
	conn    int
	reading quota.Reading
	at      time.Time
}

type shareHeaders struct {
	conn int
	obs  []headerObserved
}

// reevaluate asks the aggregator to recompute when evidence expires.
type reevaluate struct{}

// aggregator merges one connection's adapter readings.
type aggregator struct {
	id       int
	spec     ConnSpec
	c        *conn
	clk      clock.Clock
	opts     Options
	ready    chan struct{} // closed by the first incarnation's Started
	readings [quota.SourceUnknown]quota.Reading
	timer    clock.Timer // the re-evaluation, due at timerAt
	timerAt  time.Time
	// peers is the handle's cluster actor (nil inside: single node);
	// pollAt is when the poll reading held was taken, here or on a peer:
	// the fresher poll wins.
	peers  *atomic.Pointer[actor.PID]
	pollAt time.Time
	poller *actor.PID // nil: this member does not poll the connection
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
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		a.start(ctx)
	case *actor.Restarting, *actor.Stopping:
		if a.timer != nil {
			a.timer.Stop()
			a.timer = nil
		}
	case *readingUpdate:
		if m.source == quota.SourceProviderAPI {
			if m.at.Before(a.pollAt) {
				return // a peer's poll is fresher (two pollers during a handover)
			}
			a.pollAt = m.at
			if pid := a.peerPID(); pid != nil {
				ctx.Send(pid, &sharePoll{conn: a.id, reading: m.reading, at: m.at})
			}
		}
		if m.source < quota.SourceUnknown {
			a.readings[m.source] = m.reading
		}
		a.update(ctx)
	case *peerPoll:
		if m.at.Before(a.pollAt) {
			return
		}
		a.pollAt = m.at
		a.readings[quota.SourceProviderAPI] = m.reading
		a.update(ctx)
	case resharePoll:
		if pid := a.peerPID(); pid != nil && !a.pollAt.IsZero() {
			ctx.Send(pid, &sharePoll{conn: a.id, reading: a.readings[quota.SourceProviderAPI], at: a.pollAt})
		}
	case *setPolling:
		switch {
		case m.on && a.poller == nil && a.spec.Poll != nil:
			a.startPoller(ctx)
		case !m.on && a.poller != nil:
			ctx.Stop(a.poller) // a poll in flight is cancelled
			a.poller = nil
		}
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
	peers := a.peers
	if peers == nil {
		peers = &atomic.Pointer[actor.PID]{}
	}
	header := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &headerAdapter{conn: a.id, parent: self, peers: peers, mapping: a.spec.Mapping, clk: a.clk, threshold: a.opts.Threshold, byModel: map[string][]heldValue{}}
	}))
	if len(a.spec.Configured) > 0 {
		vals := a.spec.Configured
		ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &configuredAdapter{parent: self, values: vals} }))
	}
	if a.spec.Poll != nil && (!a.opts.SharedPolls || a.c.polling.Load()) {
		a.startPoller(ctx)
	}
	if a.opts.Estimates != nil && a.spec.Budgeted {
		read, id := a.opts.Estimates, a.id
		ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &estimateAdapter{parent: self, clk: a.clk, read: func() []quota.Value { return read(id) }}
		}))
	}
	a.c.header.Store(header)
	select {
	case <-a.ready:
	default:
		close(a.ready) // the first start: Spawn waits for it
	}
}

// startPoller spawns the connection's usage-API poller; it polls at once.
func (a *aggregator) startPoller(ctx actor.Context) {
	p, self := a.spec.Poll, ctx.Self()
	id, onPoll := a.id, a.opts.OnPoll
	a.poller = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &poller{parent: self, spec: *p, clk: a.clk, backoff: backoff.Backoff{Policy: pollBackoff(p.Interval)}, client: a.opts.HTTPClient, onPoll: func(ok bool) {
			if onPoll != nil {
				onPoll(id, ok)
			}
		}}
	}))
}

func (a *aggregator) peerPID() *actor.PID {
	if a.peers == nil {
		return nil
	}
	return a.peers.Load()
}

func (a *aggregator) update(ctx actor.Context) {
	now := a.clk.Now()
	until := a.publish(now)
	// Re-evaluate when the earliest value expires, so an exhausted state
	// ends at its reset even if no new evidence arrives.
	if !until.IsZero() && (a.timerAt.IsZero() || until.Before(a.timerAt)) {
		if a.timer != nil {
			a.timer.Stop()
		}
		d := until.Sub(now) + time.Millisecond
		if d < time.Millisecond {
			d = time.Millisecond
		}
		a.timerAt = until
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.timer = a.clk.AfterFunc(d, func() { root.Send(self, reevaluate{}) })
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
