package ops

import (
	"sort"
)

// LimitWindow is one rolling window of a budget as health and the
// dashboard show it: a connection's model (the token ledger) or a
// tenant's key (its limiter), this node's count. In cluster mode the
// node's credit pools show the cluster's (health's cluster.credit).
type LimitWindow struct {
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

// fullestFirst orders windows by the share of their limit in use, the
// fullest first (then by name, for a stable page).
func fullestFirst(ws []LimitWindow) {
	share := func(w *LimitWindow) float64 {
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
