package routing

import (
	"math"

	"github.com/omniroute/gateway/internal/rendezvous"
)

// Live is one configured target as the request path sees it.
type Live struct {
	Eligible bool
	// Demoted marks an eligible target that is approaching its limit:
	// priority order tries it after every non-demoted one.
	Demoted bool
	Score   float64
	// Weight is the configured round-robin weight (≥ 1).
	Weight int
}

// invPhi is 1/φ: successive multiples modulo 1 are a low-discrepancy
// sequence, so weighted picks spread evenly without shared mutable state.
const invPhi = 0.6180339887498949

// Priority appends to out the indices of the eligible targets in try
// order: configured order, targets approaching their limit after the rest.
func Priority(ts []Live, out []int) []int {
	for i := range ts {
		if ts[i].Eligible && !ts[i].Demoted {
			out = append(out, i)
		}
	}
	for i := range ts {
		if ts[i].Eligible && ts[i].Demoted {
			out = append(out, i)
		}
	}
	return out
}

// RoundRobin appends to out the eligible targets in try order for the
// request numbered cursor. While the eligible targets score alike (within
// 1 %: healthy, fast, with quota), the first follows sched, the model's
// smooth weighted rotation (3:1 gives a a b a), so "round-robin" rotates
// exactly as configured; an ineligible scheduled target hands its turn to
// the next in the schedule. Once scores differ, the first is drawn in
// proportion to weight × score instead, so a degraded target gets less.
// The rest follow by descending score (configured order on ties) as
// failover.
func RoundRobin(ts []Live, cursor uint64, sched []uint16, out []int) []int {
	var total float64
	lo, hi := math.Inf(1), 0.0
	for i := range ts {
		if ts[i].Eligible {
			total += weightOf(&ts[i])
			lo, hi = min(lo, ts[i].Score), max(hi, ts[i].Score)
		}
	}
	if total <= 0 {
		return Priority(ts, out)
	}
	first := -1
	if len(sched) > 0 && lo >= hi*0.99 {
		for k := 0; k < len(sched) && first < 0; k++ {
			if i := int(sched[(cursor+uint64(k))%uint64(len(sched))]); i < len(ts) && ts[i].Eligible {
				first = i
			}
		}
	}
	if first < 0 {
		_, frac := math.Modf(float64(cursor%(1<<52)) * invPhi)
		u := frac * total
		for i := range ts {
			if !ts[i].Eligible {
				continue
			}
			u -= weightOf(&ts[i])
			first = i
			if u < 0 {
				break
			}
		}
	}
	start := len(out)
	out = append(out, first)
	for i := range ts {
		if ts[i].Eligible && i != first {
			out = append(out, i)
		}
	}
	// Insertion sort of the failover tail by score (stable, tiny n).
	tail := out[start+1:]
	for i := 1; i < len(tail); i++ {
		for j := i; j > 0 && ts[tail[j]].Score > ts[tail[j-1]].Score; j-- {
			tail[j], tail[j-1] = tail[j-1], tail[j]
		}
	}
	return out
}

func weightOf(t *Live) float64 {
	w := t.Weight
	if w < 1 {
		w = 1
	}
	s := t.Score
	if s <= 0 {
		s = 1e-6
	}
	return float64(w) * s
}

// SmoothSchedule returns one cycle of smooth weighted round robin (as
// nginx) over weights: the index each turn starts at, 3:1 giving 0 0 1 0
// rather than 0 0 0 1. The cycle has sum(weights)/gcd entries; weights are
// scaled down first if that would exceed maxSchedule.
func SmoothSchedule(weights []int) []uint16 {
	if len(weights) == 0 || len(weights) > 1<<16 {
		return nil
	}
	w := make([]int, len(weights))
	g, total := 0, 0
	for i, x := range weights {
		w[i] = max(x, 1)
		g = gcd(g, w[i])
	}
	for i := range w {
		w[i] /= g
		total += w[i]
	}
	if total > maxSchedule {
		scale := total
		total = 0
		for i := range w {
			w[i] = max(1, w[i]*maxSchedule/scale)
			total += w[i]
		}
	}
	cur := make([]int, len(w))
	out := make([]uint16, 0, total)
	for k := 0; k < total; k++ {
		best := 0
		for i := range w {
			cur[i] += w[i]
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, uint16(best))
	}
	return out
}

// maxSchedule bounds a rotation cycle.
const maxSchedule = 4096

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Affinity appends to out the eligible targets in try order for a
// conversation whose session key is key: by weighted rendezvous score of
// the key and each target's hash (hashes, by position), highest first.
// The same key picks the same target whatever the other targets' health
// or load, on any node that has the same targets, as long as that target
// is eligible; when it is not, the conversation goes to its next choice,
// and conversations spread over the targets in proportion to weight.
func Affinity(ts []Live, key uint64, hashes []uint64, out []int) []int {
	start := len(out)
	for i := range ts {
		if ts[i].Eligible && i < len(hashes) {
			out = append(out, i)
		}
	}
	tail := out[start:]
	score := func(i int) float64 { return rendezvous.Score(key, hashes[i], ts[i].Weight) }
	for i := 1; i < len(tail); i++ {
		for j := i; j > 0 && score(tail[j]) > score(tail[j-1]); j-- {
			tail[j], tail[j-1] = tail[j-1], tail[j]
		}
	}
	return out
}
