package targets

import (
	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/messages"
)

// strategy restarts the targets actor after a panic (a bug in draining
// the accumulators, for instance): routing reads its snapshot for every
// request, so it must come back. The fresh actor rebuilds its state from the last published
// snapshot (restoreState): counters, failure streaks, cooldowns and open
// circuits and the incident count survive; only a quota failure streak's
// doubling and a stream-cut streak start over.
var strategy = supervise.Restart("targets")

// restoreState rebuilds the per-target state from a published snapshot.
func restoreState(snap *Snapshot, n int) []state {
	st := make([]state, n)
	if snap == nil {
		return st
	}
	for i := range st {
		if i >= len(snap.Targets) {
			break
		}
		v := &snap.Targets[i]
		s := &st[i]
		s.attempts, s.successes, s.consecutive, s.ttfbEWMA = v.Attempts, v.Successes, v.ConsecutiveFailures, v.TTFBEWMAMillis
		for c := messages.FailureClass(0); c < messages.NumFailureClasses; c++ {
			s.failures[c] = v.Failures[c.String()]
			if v.LastFailureClass == c.String() {
				s.lastClass = c
			}
		}
		if v.LastFailureAt != nil {
			s.lastFailureAt = *v.LastFailureAt
		}
		s.breaker = breaker{open: v.Open, coolUntil: v.CoolUntil, coolReason: v.CooldownReason, errorRate: v.ErrorRate, lastReason: v.LastFailureReason,
			incidents: v.Incidents}
		if v.IncidentSince != nil {
			s.incidentAt = *v.IncidentSince
		}
	}
	return st
}
