package ledger

import (
	"time"

	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// DimensionView is one limited dimension of a slot in the current window.
type DimensionView struct {
	Limit     uint64 `json:"limit"`
	Used      uint64 `json:"used"`
	Remaining uint64 `json:"remaining"`
	Source    string `json:"source"`
}

// SlotView is one budget as published.
type SlotView struct {
	Connection string         `json:"connection"`
	Model      string         `json:"model"`
	Limited    bool           `json:"limited"`
	Tokens     *DimensionView `json:"tokens,omitempty"`
	Requests   *DimensionView `json:"requests,omitempty"`
	// SettledTokens is what requests settled in this window really used;
	// the rest of Tokens.Used is held by requests still running.
	SettledTokens   uint64 `json:"settledTokens"`
	SettledRequests uint64 `json:"settledRequests"`
	Refunds         uint64 `json:"refunds"`
	TotalTokens     uint64 `json:"totalTokens"`
	TotalRequests   uint64 `json:"totalRequests"`
}

// Snapshot is the ledger's published view.
type Snapshot struct {
	At          time.Time  `json:"at"`
	WindowStart time.Time  `json:"windowStart"`
	WindowEnd   time.Time  `json:"windowEnd"`
	Slots       []SlotView `json:"slots"`
}

func dimView(c *ledger.Counter, idx, limit uint64, src string) *DimensionView {
	if limit == 0 {
		return nil
	}
	used := c.Used(idx)
	v := &DimensionView{Limit: limit, Used: used, Source: src}
	if used < limit {
		v.Remaining = limit - used
	}
	return v
}

func (a *ledgerActor) publish() {
	now := a.h.clk.Now()
	idx := ledger.WindowIndex(now, Window)
	start, end := ledger.WindowBounds(now, Window)
	snap := &Snapshot{At: now, WindowStart: start, WindowEnd: end, Slots: make([]SlotView, len(a.acct))}
	for i := range a.acct {
		sl := a.h.slots.At(i)
		l := sl.limits.Load()
		v := SlotView{Connection: sl.spec.Connection, Model: sl.spec.Model, Limited: l.Tokens > 0 || l.Requests > 0,
			Tokens: dimView(&sl.tokens, idx, l.Tokens, l.TokensSource), Requests: dimView(&sl.requests, idx, l.Requests, l.RequestsSource)}
		ac := &a.acct[i]
		v.TotalTokens, v.TotalRequests = ac.totalTokens, ac.totalRequests
		if ac.idx == idx {
			v.SettledTokens, v.SettledRequests, v.Refunds = ac.settledTokens, ac.settled, ac.refunds
		}
		snap.Slots[i] = v
	}
	a.h.snap.Store(snap)
	a.dirty = false
}

// Estimates returns the snapshot's windows for one connection as quota
// values of source estimated (confidence medium: the gateway's own
// accounting), scoped to each budget's model and expiring at the window's
// end.
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
		for _, d := range [...]struct {
			dim  messages.QuotaDimension
			view *DimensionView
			unit string
		}{{messages.DimTokens, sv.Tokens, "tokens"}, {messages.DimRequests, sv.Requests, "requests"}} {
			if d.view == nil {
				continue
			}
			out = append(out, quota.Value{Dimension: d.dim, Model: sv.Model, Flags: quota.HasLimit | quota.HasUsed | quota.HasRemaining,
				Limit: float64(d.view.Limit), Used: float64(d.view.Used), Remaining: float64(d.view.Remaining), ResetAt: s.WindowEnd,
				Unit: d.unit, Source: quota.SourceEstimated, Confidence: quota.ConfidenceMedium, Expires: s.WindowEnd})
		}
	}
	return out
}
