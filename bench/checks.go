package bench

import (
	"fmt"
	"math"

	"github.com/omniroute/gateway/bench/report"
)

// Goal is a comparison against a threshold.
type Goal struct {
	Op  string // ">=", "<=" or "=="
	Thr float64
}

// AtLeast, AtMost and Exactly build goals.
func AtLeast(v float64) Goal { return Goal{">=", v} }
func AtMost(v float64) Goal  { return Goal{"<=", v} }
func Exactly(v float64) Goal { return Goal{"==", v} }

func (g Goal) text(unit string) string {
	op := map[string]string{">=": "≥", "<=": "≤", "==": "="}[g.Op]
	s := fmt.Sprintf("%s %g", op, g.Thr)
	if unit != "" {
		s += " " + unit
	}
	return s
}

func (g Goal) met(v float64) bool {
	switch g.Op {
	case ">=":
		return v >= g.Thr
	case "<=":
		return v <= g.Thr
	default:
		return math.Abs(v-g.Thr) < 1e-9
	}
}

// NewCheck evaluates the median of per-round values against g. No values
// gives n/a with the note (why it could not be computed).
func NewCheck(id, scenario, variant, metric string, g Goal, unit string, rounds []float64, note string) report.Check {
	c := report.Check{ID: id, Scenario: scenario, Variant: variant, Metric: metric, Goal: g.text(unit), Unit: unit, Rounds: rounds, Status: report.NA, Note: note}
	if len(rounds) == 0 {
		if c.Note == "" {
			c.Note = "no data"
		}
		return c
	}
	v := report.Median(rounds)
	c.Value = &v
	c.Status = report.Fail
	if g.met(v) {
		c.Status = report.Pass
	}
	return c
}

// PerRound collects f(round) for rounds 1..n, skipping rounds where f
// reports false (a missing cell or a zero denominator); skipped counts
// those.
func PerRound(n int, f func(round int) (float64, bool)) (vals []float64, skipped int) {
	for round := 1; round <= n; round++ {
		v, ok := f(round)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			skipped++
			continue
		}
		vals = append(vals, v)
	}
	return vals, skipped
}

// cellValue reads one figure of a cell.
func cellValue(s *report.Scenario, load, target string, round int, f func(*report.Cell) (float64, bool)) (float64, bool) {
	c := s.Find(load, target, round)
	if c == nil {
		return 0, false
	}
	return f(c)
}

// ratio of f over two targets in the same round.
func ratio(s *report.Scenario, load, num, den string, f func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
	return func(round int) (float64, bool) {
		a, ok1 := cellValue(s, load, num, round, f)
		b, ok2 := cellValue(s, load, den, round, f)
		if !ok1 || !ok2 || b <= 0 {
			return 0, false
		}
		return a / b, true
	}
}

// minAddedMS is the smallest added latency of R over D (ms) that a ratio
// is divided by; below it the round's ratio is meaningless noise.
const minAddedMS = 0.01

// addedRatio is (G-D)/(R-D) of a latency figure in the same round.
func addedRatio(s *report.Scenario, load, g string, f func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
	return func(round int) (float64, bool) {
		gv, ok1 := cellValue(s, load, g, round, f)
		rv, ok2 := cellValue(s, load, TargetR, round, f)
		dv, ok3 := cellValue(s, load, TargetD, round, f)
		if !ok1 || !ok2 || !ok3 || rv-dv < minAddedMS {
			return 0, false
		}
		return (gv - dv) / (rv - dv), true
	}
}

// added is target-D of a latency figure in the same round (ms).
func added(s *report.Scenario, load, target string, f func(*report.Cell) (float64, bool)) func(int) (float64, bool) {
	return func(round int) (float64, bool) {
		tv, ok1 := cellValue(s, load, target, round, f)
		dv, ok2 := cellValue(s, load, TargetD, round, f)
		return tv - dv, ok1 && ok2
	}
}

// Cell figures.
func throughput(c *report.Cell) (float64, bool) { return c.Summary.Throughput, c.Summary.OK > 0 }
func p50(c *report.Cell) (float64, bool)        { return c.Summary.Latency.P50, c.Summary.Latency.N > 0 }
func p99(c *report.Cell) (float64, bool)        { return c.Summary.Latency.P99, c.Summary.Latency.N > 0 }
func ttft50(c *report.Cell) (float64, bool) {
	if c.Summary.TTFT == nil || c.Summary.TTFT.N == 0 {
		return 0, false
	}
	return c.Summary.TTFT.P50, true
}
func cpuPerReq(role string) func(*report.Cell) (float64, bool) {
	return procFigure(role, func(p *report.Proc) float64 { return p.CPUPerRequestUS })
}
func cpuPerEvent(role string) func(*report.Cell) (float64, bool) {
	return procFigure(role, func(p *report.Proc) float64 { return p.CPUPerEventUS })
}

// procFigure is a positive figure of role's process in a cell; a cell
// without that process, or where the figure is not positive (nothing was
// measured), has none.
func procFigure(role string, f func(*report.Proc) float64) func(*report.Cell) (float64, bool) {
	return func(c *report.Cell) (float64, bool) {
		p := c.Proc(role)
		if p == nil || f(p) <= 0 {
			return 0, false
		}
		return f(p), true
	}
}

// skippedNote explains rounds left out of a median.
func skippedNote(skipped int, why string) string {
	if skipped == 0 {
		return ""
	}
	return fmt.Sprintf("%d round(s) left out: %s", skipped, why)
}

// figure is an informative median.
func figure(name, unit string, vals []float64) report.Figure {
	return report.Figure{Name: name, Unit: unit, Value: report.Median(vals), Rounds: vals}
}
