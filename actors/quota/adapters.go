package quota

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/repeat"
)

// headerAdapter keeps, per model, the latest header value of each
// dimension. News that can worsen a state (anything at or below the
// approaching threshold) goes to the aggregator at once; the rest is
// coalesced and flushed every HeaderFlushInterval.
type headerAdapter struct {
	parent    *actor.PID
	mapping   *quota.Mapping
	clk       interface{ Now() time.Time }
	threshold float64
	byModel   map[string][]quota.Value
	dirty     bool
	seen      bool
	cancel    scheduler.CancelFunc
}

// HeaderFlushInterval bounds how stale good news from headers may be.
const HeaderFlushInterval = 200 * time.Millisecond

type flush struct{}

func (a *headerAdapter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *actor.Started:
		a.cancel = repeat.Send(ctx.ActorSystem().Root, HeaderFlushInterval, HeaderFlushInterval, ctx.Self(), flush{})
	case *actor.Restarting, *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	case *HeaderObserved:
		if a.observe(m) {
			a.send(ctx)
		}
	case flush:
		if a.dirty {
			a.send(ctx)
		}
	}
}

// observe merges an observation and reports whether it is urgent.
func (a *headerAdapter) observe(m *HeaderObserved) bool {
	vals := a.byModel[m.Model]
	urgent := false
	for i := 0; i < m.Obs.N; i++ {
		r := &m.Obs.Readings[i]
		v := quota.ReadingValue(r, m.Model, m.Obs.At, a.mapping.UnitOf(r.Dimension))
		if v.Known(quota.HasRemaining) && (v.Remaining <= 0 || (v.Known(quota.HasLimit) && v.Limit > 0 && v.Remaining/v.Limit <= a.threshold)) {
			urgent = true
		}
		replaced := false
		for j := range vals {
			if vals[j].Dimension == v.Dimension {
				if vals[j].Known(quota.HasRemaining) && vals[j].Remaining/max(vals[j].Limit, 1) <= a.threshold && !vals[j].Stale(m.Obs.At) {
					urgent = true // leaving a bad state matters as much
				}
				vals[j], replaced = v, true
				break
			}
		}
		if !replaced {
			vals = append(vals, v)
		}
	}
	a.byModel[m.Model] = vals
	a.dirty, a.seen = true, true
	return urgent
}

func (a *headerAdapter) send(ctx actor.Context) {
	now := a.clk.Now()
	var all []quota.Value
	for model, vals := range a.byModel {
		kept := vals[:0]
		for _, v := range vals {
			if !v.Stale(now) {
				kept = append(kept, v)
			}
		}
		a.byModel[model] = kept
		all = append(all, kept...)
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
	case supervise.Crash:
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
	read   func() []quota.Value
	cancel scheduler.CancelFunc
	last   []quota.Value
	sent   bool
}

// EstimateInterval is how often the estimate adapter reads the ledger.
const EstimateInterval = time.Second

type readLedger struct{}

func (a *estimateAdapter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case supervise.Crash:
		m.Panic()
	case *actor.Started:
		a.cancel = repeat.Send(ctx.ActorSystem().Root, EstimateInterval, EstimateInterval, ctx.Self(), readLedger{})
	case *actor.Restarting, *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
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
