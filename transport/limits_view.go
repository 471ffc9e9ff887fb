package transport

import (
	"github.com/omniroute/gateway/transport/ops"
)

// connectionWindows are the ledger's limited windows of the connections
// the config in force routes to.
func (g *Gateway) connectionWindows() []ops.LimitWindow {
	out := []ops.LimitWindow{}
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
			out = append(out, ops.LimitWindow{Kind: "connection", Budget: sv.Connection, Model: sv.Model, Dimension: w.Dimension, Period: w.Period,
				Limit: int64(w.Limit), Used: int64(w.Used), Remaining: int64(w.Remaining), ResetMs: w.ResetMs})
		}
	}
	return out
}

// tenantWindows are the tenant limiter's windows.
func (g *Gateway) tenantWindows() []ops.LimitWindow {
	if g.ten == nil {
		return []ops.LimitWindow{}
	}
	return g.ten.Windows()
}
