package ledger

import (
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/messages"
)

// DimensionView is one limited window of a slot: its limit, what it
// counts now (held by requests in flight, and used by settled ones), what
// is left, and how long until everything it counts has left it.
type DimensionView struct {
	Period    string `json:"period"`
	Limit     uint64 `json:"limit"`
	Used      uint64 `json:"used"`
	Remaining uint64 `json:"remaining"`
	ResetMs   int64  `json:"resetMs"`
	// ResetAt is when the window holds nothing again (absent while it
	// holds nothing).
	ResetAt time.Time `json:"resetAt,omitzero"`
	Source  string    `json:"source"`
	dim     rolling.Dim
	period  rolling.Period
}

// WindowView is one limited window with its dimension.
type WindowView struct {
	Dimension string `json:"dimension"`
	DimensionView
}

// SlotView is one budget as published.
type SlotView struct {
	Connection string `json:"connection"`
	Model      string `json:"model"`
	Limited    bool   `json:"limited"`
	// Tokens and Requests are the tightest window of each (the one with
	// the least left); Windows are all of them.
	Tokens        *DimensionView `json:"tokens,omitempty"`
	Requests      *DimensionView `json:"requests,omitempty"`
	Windows       []WindowView   `json:"windows"`
	Refunds       uint64         `json:"refunds"`
	TotalTokens   uint64         `json:"totalTokens"`
	TotalRequests uint64         `json:"totalRequests"`
}

// Snapshot is the ledger's published view.
type Snapshot struct {
	At    time.Time  `json:"at"`
	Slots []SlotView `json:"slots"`
}

func dimView(now time.Time, d rolling.Dim, b rolling.Bucket, src string) DimensionView {
	v := DimensionView{Period: b.Period.String(), Limit: uint64(b.Limit), Used: uint64(b.Used), Remaining: uint64(b.Remaining),
		ResetMs: b.Reset.Milliseconds(), Source: src, dim: d, period: b.Period}
	if b.Reset > 0 {
		v.ResetAt = now.Add(b.Reset)
	}
	return v
}

func (a *ledgerActor) publish() {
	now := a.h.clk.Now()
	n := now.UnixNano()
	snap := &Snapshot{At: now, Slots: make([]SlotView, len(a.acct))}
	for i := range a.acct {
		sl := a.h.slots.At(i)
		l := sl.limits.Load()
		v := SlotView{Connection: sl.spec.Connection, Model: sl.spec.Model, Limited: l.Windows.Any(), Windows: []WindowView{}}
		sl.mu.Lock()
		w := sl.windows(l)
		for d := range rolling.NumDims {
			for p := range rolling.NumPeriods {
				if b, ok := w.Bucket(n, d, p); ok {
					v.Windows = append(v.Windows, WindowView{Dimension: d.String(), DimensionView: dimView(now, d, b, l.Source[d][p])})
				}
			}
			if b, ok := w.Tightest(n, d); ok {
				dv := dimView(now, d, b, l.Source[d][b.Period])
				if d == rolling.Tokens {
					v.Tokens = &dv
				} else {
					v.Requests = &dv
				}
			}
		}
		sl.mu.Unlock()
		ac := &a.acct[i]
		v.TotalTokens, v.TotalRequests, v.Refunds = ac.totalTokens, ac.totalRequests, ac.refunds
		snap.Slots[i] = v
	}
	a.h.snap.Store(snap)
}

// estimateDims are the windows the quota telemetry has a dimension for.
var estimateDims = [rolling.NumDims][rolling.NumPeriods]messages.QuotaDimension{
	rolling.Requests: {rolling.Minute: messages.DimRequests, rolling.Day: messages.DimDailyRequests},
	rolling.Tokens:   {rolling.Minute: messages.DimTokens},
}

// Estimates returns the snapshot's windows for one connection as quota
// values of source estimated (confidence medium: the gateway's own
// accounting), scoped to each budget's model: the minute's requests and
// tokens, and the day's requests. A value resets when everything its
// window counts has left it, and is read afresh every second.
func (s *Snapshot) Estimates(connection string) []quota.Value {
	if s == nil {
		return nil
	}
	var out []quota.Value
	for i := range s.Slots {
		sv := &s.Slots[i]
		if sv.Connection != connection {
			continue
		}
		for _, w := range sv.Windows {
			d, p := w.dim, w.period
			if estimateDims[d][p] == messages.DimUnknown {
				continue
			}
			reset, expires := w.ResetAt, w.ResetAt
			if reset.IsZero() {
				// Nothing counted: the value holds for as long as the window.
				reset = s.At
				expires = s.At.Truncate(p.Width()).Add(p.Width())
			}
			out = append(out, quota.Value{Dimension: estimateDims[d][p], Model: sv.Model, Flags: quota.HasLimit | quota.HasUsed | quota.HasRemaining,
				Limit: float64(w.Limit), Used: float64(w.Used), Remaining: float64(w.Remaining), ResetAt: reset,
				Unit: w.Dimension, Source: quota.SourceEstimated, Confidence: quota.ConfidenceMedium, Expires: expires})
		}
	}
	return out
}
