package ledger

import (
	"time"

	"github.com/omniroute/gateway/internal/ledger"
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
	snap := &Snapshot{At: now, WindowStart: start, WindowEnd: end, Slots: make([]SlotView, len(a.h.slots))}
	for i := range a.h.slots {
		sl := &a.h.slots[i]
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
