//go:build !race

package routing

import (
	"testing"

	"github.com/omniroute/gateway/internal/quota"
)

// TestRankingAllocAllocatesNothing: live ranking scores and orders the
// candidates of every request into reused buffers.
func TestRankingAllocAllocatesNothing(t *testing.T) {
	cands := []Candidate{base(), base(), base()}
	cands[1].Quota = quota.StatusApproaching
	cands[2].Cooling = true
	live := make([]Live, 0, 3)
	order := make([]int, 0, 3)
	var n uint64
	if a := testing.AllocsPerRun(200, func() {
		live = live[:0]
		for i := range cands {
			s, ok := Score(&cands[i])
			live = append(live, Live{Eligible: ok, Demoted: cands[i].Quota == quota.StatusApproaching, Score: s, Weight: 1})
		}
		order = Priority(live, order[:0])
		n++
		order = RoundRobin(live, n, nil, order[:0])
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
