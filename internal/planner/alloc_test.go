//go:build !race

package planner

import (
	"testing"
	"time"
)

// staticSource serves the same evidence without recording anything.
type staticSource struct{ ev []Evidence }

func (s *staticSource) Evidence(i int, _ time.Time, e *Evidence) { *e = s.ev[i] }
func (s *staticSource) Skipped(int, Skip)                        {}

// TestPlanAllocatesNothing: a pooled plan's whole life (begin, rank,
// take, re-rank, wait decision, refusal) reuses its buffers.
func TestPlanAllocatesNothing(t *testing.T) {
	src := &staticSource{ev: []Evidence{healthy(), cooling(time.Second), healthy()}}
	var p Plan
	p.Reset()
	p.Begin(3, t0, Limits{MaxAttempts: 3, MaxWait: time.Minute})
	p.Rank(src, 3, t0, Order{})
	if a := testing.AllocsPerRun(200, func() {
		p.Reset()
		p.Begin(3, t0, Limits{MaxAttempts: 3, MaxWait: time.Minute})
		p.Rank(src, 3, t0, Order{RoundRobin: true, Cursor: 1})
		p.Take(p.Candidates()[0])
		p.Rerank()
		p.Rank(src, 3, t0, Order{})
		p.Wait(t0)
		_ = p.Refusal(t0)
	}); a != 0 {
		t.Fatalf("allocated %.1f times per request; want 0", a)
	}
}

// BenchmarkPlanRequest is the planner's share of one routed request over
// three candidates: begin, rank, take the first.
func BenchmarkPlanRequest(b *testing.B) {
	src := &staticSource{ev: []Evidence{healthy(), cooling(time.Second), healthy()}}
	var p Plan
	b.ReportAllocs()
	for b.Loop() {
		p.Reset()
		p.Begin(3, t0, Limits{MaxAttempts: 3, MaxWait: time.Minute})
		p.Rank(src, 3, t0, Order{})
		p.Take(p.Candidates()[0])
	}
}
