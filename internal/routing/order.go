package routing

import "math"

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
// request numbered cursor: the first is drawn in proportion to weight ×
// score, the rest follow by descending score (configured order on ties) as
// failover.
func RoundRobin(ts []Live, cursor uint64, out []int) []int {
	var total float64
	for i := range ts {
		if ts[i].Eligible {
			total += weightOf(&ts[i])
		}
	}
	if total <= 0 {
		return Priority(ts, out)
	}
	_, frac := math.Modf(float64(cursor%(1<<52)) * invPhi)
	u := frac * total
	first := -1
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
