package routing

import (
	"testing"

	"github.com/omniroute/gateway/internal/quota"
)

// BenchmarkLiveRanking scores and orders three candidates, as the request
// path does for a three-target combo.
func BenchmarkLiveRanking(b *testing.B) {
	cands := []Candidate{base(), base(), base()}
	cands[1].Quota = quota.StatusApproaching
	cands[2].LatencyMs, cands[2].ErrorRate = Some(900), Some(0.05)
	live := make([]Live, 0, 3)
	order := make([]int, 0, 3)
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		live = live[:0]
		for i := range cands {
			s, ok := Score(&cands[i])
			live = append(live, Live{Eligible: ok, Demoted: cands[i].Quota == quota.StatusApproaching, Score: s, Weight: 1})
		}
		n++
		order = RoundRobin(live, n, nil, order[:0])
	}
}
