package quota

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/messages"
)

// headerAdapter keeps, per model, the freshest header value of each
// dimension (by the time its response was received; a tie goes to the
// later arrival). News that can worsen a state (anything at or below the
// approaching threshold) goes to the aggregator at once; the rest is
// coalesced and flushed every HeaderFlushInterval.
//
// In cluster mode (peers set) it also keeps, per model, the latest
// observation this node made itself, and hands those to the node's
// cluster actor for the other members: urgent news at once unless it has
// already sent since the last flush tick, the rest at the next tick. So a
// connection sends its peers at most two batches per tick (10 a second)
// however many requests it serves, and news waits at most two ticks.
// Observations heard from peers (peerHeaders) merge exactly as local ones
// do but are never handed on: no echo.
type headerAdapter struct {
	conn      int
	parent    *actor.PID
	peers     *atomic.Pointer[actor.PID] // the cluster actor; nil inside: not shared
	mapping   *quota.Mapping
	clk       clock.Clock
	threshold float64
	byModel   map[string][]heldValue
	dirty     bool
	seen      bool
	ticks     repeat.Ticker
	// outbox is the latest local observation per model not yet sent to
	// the peers; sentSinceTick says a batch left since the last tick.
	outbox        map[string]messages.QuotaObservation
	sentSinceTick bool
	// last is the latest local observation per model, sent or not: a
	// member that joins is sent them (reshareHeaders), since it heard
	// none of the batches that went before.
	last map[string]messages.QuotaObservation
}

// heldValue is a header value and when its response was received.
type heldValue struct {
	v  quota.Value
	at time.Time
}

// HeaderFlushInterval bounds how stale good news from headers may be, and
// paces the batches a connection sends its cluster peers.
const HeaderFlushInterval = 200 * time.Millisecond

type flush struct{}

// peerHeaders are header observations another member made, for the
// connection's header adapter.
type peerHeaders struct{ obs []headerObserved }

// reshareHeaders asks the header adapter to send its peers the latest
// local observation of each model that still says something (a member
// joined).
type reshareHeaders struct{}

func (a *headerAdapter) Receive(ctx actor.Context) {
	if a.ticks.Lifecycle(ctx, a.clk, HeaderFlushInterval, flush{}) {
		return
	}
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *headerObserved:
		urgent := a.observe(m)
		if urgent {
			a.send(ctx)
		}
		if a.share(m) && urgent && !a.sentSinceTick {
			a.sendPeers(ctx)
		}
	case *peerHeaders:
		urgent := false
		for i := range m.obs {
			urgent = a.observe(&m.obs[i]) || urgent
		}
		if urgent {
			a.send(ctx)
		}
	case reshareHeaders:
		if a.reshare() {
			a.sendPeers(ctx)
		}
	case flush:
		if a.dirty {
			a.send(ctx)
		}
		if len(a.outbox) > 0 && !a.sentSinceTick {
			a.sendPeers(ctx)
		}
		a.sentSinceTick = false
	}
}

// observe merges an observation and reports whether it is urgent. A
// dimension's value is replaced only by one observed at the same time or
// later: a late-arriving older observation (a peer's, or a slow local
// response) loses to the fresher one held.
func (a *headerAdapter) observe(m *headerObserved) bool {
	vals := a.byModel[m.Model]
	urgent := false
	for i := 0; i < m.Obs.N; i++ {
		r := &m.Obs.Readings[i]
		v := quota.ReadingValue(r, m.Model, m.Obs.At, a.mapping.UnitOf(r.Dimension))
		replaced, stale := false, false
		for j := range vals {
			h := &vals[j]
			if h.v.Dimension != v.Dimension {
				continue
			}
			if m.Obs.At.Before(h.at) {
				stale = true
				break
			}
			if h.v.Known(quota.HasRemaining) && h.v.Remaining/max(h.v.Limit, 1) <= a.threshold && !h.v.Stale(m.Obs.At) {
				urgent = true // leaving a bad state matters as much
			}
			*h, replaced = heldValue{v: v, at: m.Obs.At}, true
			break
		}
		if stale {
			continue
		}
		if v.Known(quota.HasRemaining) && (v.Remaining <= 0 || (v.Known(quota.HasLimit) && v.Limit > 0 && v.Remaining/v.Limit <= a.threshold)) {
			urgent = true
		}
		if !replaced {
			vals = append(vals, heldValue{v: v, at: m.Obs.At})
		}
	}
	a.byModel[m.Model] = vals
	a.dirty, a.seen = true, true
	return urgent
}

// share keeps a local observation for the peers (cluster mode only) and
// reports whether it did.
func (a *headerAdapter) share(m *headerObserved) bool {
	if a.peers.Load() == nil {
		return false
	}
	if a.outbox == nil {
		a.outbox = map[string]messages.QuotaObservation{}
	}
	if held, ok := a.outbox[m.Model]; !ok || !m.Obs.At.Before(held.At) {
		a.outbox[m.Model] = *m.Obs
	}
	if a.last == nil {
		a.last = map[string]messages.QuotaObservation{}
	}
	if held, ok := a.last[m.Model]; !ok || !m.Obs.At.Before(held.At) {
		a.last[m.Model] = *m.Obs
	}
	return true
}

// reshare puts the latest local observations whose values are not all
// stale yet into the outbox (and forgets the others); it reports whether
// there is anything to send.
func (a *headerAdapter) reshare() bool {
	now := a.clk.Now()
	for model, obs := range a.last {
		live := false
		for i := 0; i < obs.N && !live; i++ {
			r := &obs.Readings[i]
			v := quota.ReadingValue(r, model, obs.At, a.mapping.UnitOf(r.Dimension))
			live = !v.Stale(now)
		}
		if !live {
			delete(a.last, model)
			continue
		}
		if a.outbox == nil {
			a.outbox = map[string]messages.QuotaObservation{}
		}
		if held, ok := a.outbox[model]; !ok || !obs.At.Before(held.At) {
			a.outbox[model] = obs
		}
	}
	return len(a.outbox) > 0 && a.peers.Load() != nil
}

// sendPeers hands the outbox to the cluster actor, which sends it to
// every other member.
func (a *headerAdapter) sendPeers(ctx actor.Context) {
	pid := a.peers.Load()
	if pid == nil {
		return
	}
	out := &shareHeaders{conn: a.conn, obs: make([]headerObserved, 0, len(a.outbox))}
	for model, obs := range a.outbox {
		o := obs
		out.obs = append(out.obs, headerObserved{Model: model, Obs: &o})
	}
	clear(a.outbox)
	a.sentSinceTick = true
	ctx.Send(pid, out)
}

func (a *headerAdapter) send(ctx actor.Context) {
	now := a.clk.Now()
	var all []quota.Value
	for model, vals := range a.byModel {
		kept := vals[:0]
		for _, h := range vals {
			if !h.v.Stale(now) {
				kept = append(kept, h)
				all = append(all, h.v)
			}
		}
		a.byModel[model] = kept
	}
	ctx.Send(a.parent, &readingUpdate{source: quota.SourceResponseHeaders, reading: quota.Reading{Source: quota.SourceResponseHeaders, Supported: a.seen && len(all) > 0, Values: all}})
	a.dirty = false
}

// configuredAdapter reports the configured limits once.
type configuredAdapter struct {
	parent *actor.PID
	values []quota.Value
}

func (a *configuredAdapter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		ctx.Send(a.parent, &readingUpdate{source: quota.SourceConfigured, reading: quota.Reading{Source: quota.SourceConfigured, Supported: true, Values: a.values}})
	}
}

// estimateAdapter reports the ledger's current windows as estimated values
// (confidence medium: the gateway's own accounting, not the provider's
// word), once per EstimateInterval.
type estimateAdapter struct {
	parent *actor.PID
	clk    clock.Clock
	read   func() []quota.Value
	ticks  repeat.Ticker
	last   []quota.Value
	sent   bool
}

// EstimateInterval is how often the estimate adapter reads the ledger.
const EstimateInterval = time.Second

type readLedger struct{}

func (a *estimateAdapter) Receive(ctx actor.Context) {
	if a.ticks.Lifecycle(ctx, a.clk, EstimateInterval, readLedger{}) {
		return
	}
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case readLedger:
		vals := a.read()
		if a.sent && sameValues(vals, a.last) {
			return // nothing moved: no recomputation upstream
		}
		a.last, a.sent = vals, true
		ctx.Send(a.parent, &readingUpdate{source: quota.SourceEstimated, reading: quota.Reading{Source: quota.SourceEstimated, Supported: len(vals) > 0, Values: vals}})
	}
}

func sameValues(a, b []quota.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Dimension != b[i].Dimension || a[i].Model != b[i].Model || a[i].Limit != b[i].Limit || a[i].Used != b[i].Used ||
			a[i].Remaining != b[i].Remaining || !a[i].Expires.Equal(b[i].Expires) {
			return false
		}
	}
	return true
}
