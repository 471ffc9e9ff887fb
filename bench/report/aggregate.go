package report

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/omniroute/gateway/bench/loadgen"
)

// Median returns the median of vs (mean of the middle two for an even
// count); NaN-free input is assumed. It returns 0 for no values.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Agg is one (load, target) over all rounds: medians of the per-round
// figures, sums of the counts, merged histograms.
type Agg struct {
	Rounds     int
	Throughput float64
	P50, P90   float64
	P99, Max   float64
	TTFT50     float64
	TTFT99     float64
	// CPU per answered request (and per SSE event) by process role, µs.
	CPUReq   map[string]float64
	CPUEvent map[string]float64
	PeakRSS  map[string]int64 // max over rounds, by role
	Arrivals int
	OK       int
	Failures map[string]int // by kind: "timeout", "503 code", ...
	Hist     loadgen.Histogram
	TTFTHist loadgen.Histogram
	HasTTFT  bool
	SendLag  float64 // median p99 send lag, ms (open loop)
	Late     int     // sends more than 1 ms late, all rounds
	Open     bool
	// Rejections are 429/503 answers over all rounds, how many carried
	// Retry-After, and the median over rounds of their p99 latency (ms).
	Rejections, RejectionsRetryAfter int
	RejectionP99                     float64
}

// Aggregate folds the rounds of one (load, target).
func (s *Scenario) Aggregate(load, target string) *Agg {
	a := &Agg{CPUReq: map[string]float64{}, CPUEvent: map[string]float64{}, PeakRSS: map[string]int64{},
		Failures: map[string]int{}, Hist: loadgen.NewHistogram(), TTFTHist: loadgen.NewHistogram()}
	var thr, p50, p90, p99, mx, t50, t99, lag, rej []float64
	cpuReq := map[string][]float64{}
	cpuEv := map[string][]float64{}
	for _, c := range s.Cells {
		if c.Load != load || c.Target != target {
			continue
		}
		a.Rounds++
		m := &c.Summary
		thr = append(thr, m.Throughput)
		p50, p90, p99, mx = append(p50, m.Latency.P50), append(p90, m.Latency.P90), append(p99, m.Latency.P99), append(mx, m.Latency.Max)
		a.Arrivals += m.Arrivals
		a.OK += m.OK
		a.Hist.Merge(m.Hist)
		a.Rejections += m.Rejections
		a.RejectionsRetryAfter += m.RejectionsRetryAfter
		if m.RejectionLatency.N > 0 {
			rej = append(rej, m.RejectionLatency.P99)
		}
		if m.TTFT != nil {
			a.HasTTFT = true
			t50, t99 = append(t50, m.TTFT.P50), append(t99, m.TTFT.P99)
			a.TTFTHist.Merge(*m.TTFTHist)
		}
		if m.SendLag != nil {
			a.Open = true
			lag = append(lag, m.SendLag.P99)
			a.Late += m.LateSends
		}
		for code, n := range m.Statuses {
			if code != "200" {
				a.Failures["HTTP "+code] += n
			}
		}
		for code, n := range m.Codes {
			a.Failures["code "+code] += n
		}
		for k, n := range map[string]int{"timeout": m.Timeouts, "conn error": m.ConnErrors, "in-band error": m.InBandErrors,
			"truncated": m.Truncated, "not sent": m.NotSent} {
			if n > 0 {
				a.Failures[k] += n
			}
		}
		for _, p := range c.Procs {
			cpuReq[p.Role] = append(cpuReq[p.Role], p.CPUPerRequestUS)
			if p.CPUPerEventUS > 0 {
				cpuEv[p.Role] = append(cpuEv[p.Role], p.CPUPerEventUS)
			}
			a.PeakRSS[p.Role] = max(a.PeakRSS[p.Role], p.PeakRSS)
		}
	}
	a.Throughput, a.P50, a.P90, a.P99, a.Max = Median(thr), Median(p50), Median(p90), Median(p99), Median(mx)
	a.TTFT50, a.TTFT99, a.SendLag, a.RejectionP99 = Median(t50), Median(t99), Median(lag), Median(rej)
	for r, v := range cpuReq {
		a.CPUReq[r] = Median(v)
	}
	for r, v := range cpuEv {
		a.CPUEvent[r] = Median(v)
	}
	return a
}

// FailureText lists failures, most frequent first ("" when none).
func (a *Agg) FailureText() string {
	keys := slices.Collect(maps.Keys(a.Failures))
	sort.Slice(keys, func(i, j int) bool {
		if a.Failures[keys[i]] != a.Failures[keys[j]] {
			return a.Failures[keys[i]] > a.Failures[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, a.Failures[k]))
	}
	if a.Rejections > 0 {
		parts = append(parts, fmt.Sprintf("429/503 with Retry-After %d of %d, p99 %.2f ms", a.RejectionsRetryAfter, a.Rejections, a.RejectionP99))
	}
	return strings.Join(parts, ", ")
}

// MB formats bytes as mebibytes.
func MB(b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

// num formats a float compactly.
func num(v float64, digits int) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.*f", digits, v)
}
