package loadgen

import "math"

// Histogram buckets latencies on a log scale: BucketsPerDecade buckets per
// factor of ten from HistMin up to HistMax, plus an underflow and an
// overflow bucket. Bucket i (1 ≤ i ≤ n) covers [Edge(i-1), Edge(i)); the
// relative width is about 12 %, enough to draw a distribution and to merge
// rounds, while the exact percentiles come from the raw samples.
type Histogram struct {
	// MinUS is the lower edge of the first regular bucket in microseconds.
	MinUS float64 `json:"min_us"`
	// PerDecade is the number of buckets per factor of ten.
	PerDecade int `json:"per_decade"`
	// Counts[0] is the underflow (< MinUS), the last entry the overflow.
	Counts []int64 `json:"counts"`
}

// Histogram layout.
const (
	HistMinUS        = 10.0 // 10 µs
	HistDecades      = 7    // up to 100 s
	BucketsPerDecade = 20
	histBuckets      = HistDecades*BucketsPerDecade + 2
)

// NewHistogram returns an empty histogram with the standard layout, so
// histograms of different cells and rounds can be added.
func NewHistogram() Histogram {
	return Histogram{MinUS: HistMinUS, PerDecade: BucketsPerDecade, Counts: make([]int64, histBuckets)}
}

// Add counts one latency given in nanoseconds.
func (h *Histogram) Add(ns int64) {
	us := float64(ns) / 1e3
	var i int
	if us < h.MinUS {
		i = 0
	} else {
		i = 1 + int(math.Floor(math.Log10(us/h.MinUS)*float64(h.PerDecade)))
		if i >= len(h.Counts) {
			i = len(h.Counts) - 1
		}
	}
	h.Counts[i]++
}

// Merge adds o's counts (same layout) into h.
func (h *Histogram) Merge(o Histogram) {
	if len(h.Counts) == 0 {
		*h = NewHistogram()
	}
	for i := range o.Counts {
		if i < len(h.Counts) {
			h.Counts[i] += o.Counts[i]
		}
	}
}

// Edge returns the upper edge of bucket i in microseconds (i = 0 is the
// underflow, whose upper edge is MinUS).
func (h *Histogram) Edge(i int) float64 {
	return h.MinUS * math.Pow(10, float64(i)/float64(h.PerDecade))
}

// Total is the number of samples.
func (h *Histogram) Total() int64 {
	var n int64
	for _, c := range h.Counts {
		n += c
	}
	return n
}
