package transport

import (
	"sort"
)

// limitWindow is one rolling window of a budget as health and the
// dashboard show it: a connection's model (the token ledger) or a
// tenant's key (its limiter), this node's count. In cluster mode the
// node's credit pools show the cluster's (health's cluster.credit).
type limitWindow struct {
	// Kind is "connection" or "tenant"; Budget names it: the connection
	// and upstream model, or the tenant.
	Kind      string `json:"kind"`
	Budget    string `json:"budget"`
	Model     string `json:"model,omitempty"`
	Dimension string `json:"dimension"`
	Period    string `json:"period"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	ResetMs   int64  `json:"resetMs"`
}

// connectionWindows are the ledger's limited windows of the connections
// the config in force routes to.
func (g *Gateway) connectionWindows() []limitWindow {
	out := []limitWindow{}
	s := g.qs.ledger.Snapshot()
	if s == nil {
		return out
	}
	live := map[string]bool{}
	for _, c := range g.rc.Load().cat.Connections {
		live[c.Name] = true
	}
	for _, sv := range s.Slots {
		if !live[sv.Connection] {
			continue
		}
		for _, w := range sv.Windows {
			out = append(out, limitWindow{Kind: "connection", Budget: sv.Connection, Model: sv.Model, Dimension: w.Dimension, Period: w.Period,
				Limit: int64(w.Limit), Used: int64(w.Used), Remaining: int64(w.Remaining), ResetMs: w.ResetMs})
		}
	}
	return out
}

// tenantWindows are the tenant limiter's windows.
func (g *Gateway) tenantWindows() []limitWindow {
	out := []limitWindow{}
	if g.ten == nil || g.ten.limits == nil {
		return out
	}
	s := g.ten.limits.Snapshot()
	if s == nil {
		return out
	}
	for _, tv := range s.Tenants {
		for _, w := range tv.Windows {
			out = append(out, limitWindow{Kind: "tenant", Budget: tv.Name, Dimension: w.Dimension, Period: w.Period,
				Limit: w.Limit, Used: w.Used, Remaining: w.Remaining, ResetMs: w.ResetMs})
		}
	}
	return out
}

// fullestFirst orders windows by the share of their limit in use, the
// fullest first (then by name, for a stable page).
func fullestFirst(ws []limitWindow) {
	share := func(w *limitWindow) float64 {
		if w.Limit <= 0 {
			return 0
		}
		return float64(w.Used) / float64(w.Limit)
	}
	sort.SliceStable(ws, func(i, j int) bool {
		if a, b := share(&ws[i]), share(&ws[j]); a != b {
			return a > b
		}
		return ws[i].Kind+ws[i].Budget+ws[i].Model < ws[j].Kind+ws[j].Budget+ws[j].Model
	})
}
