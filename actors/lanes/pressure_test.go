package lanes

import (
	"testing"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestPressureFollowerCarriesTheSamples: what the resource-pressure
// actor sends its subscribers (PressurePID) reaches every upstream as the
// pressure link did when it was a callback on the pressure actor: a
// used-up CPU marks the controllers' readings busy, high and critical
// pressure are the snapshot's resource severity with their reason,
// critical halves the limit, and normal pressure changes neither.
func TestPressureFollowerCarriesTheSamples(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 2, 20, 40 }, 0, 0)
	send := func(st *pressure.State) {
		e.sys.Root.Send(e.h.PressurePID(), &messages.Published[*pressure.State]{Snapshot: st})
		testutil.Drain(t, e.sys.Root, e.h.PressurePID())
	}
	send(&pressure.State{Severity: pressure.Normal, CPUBusy: 0.1})
	if e.h.cpuBusy.Load() {
		t.Fatal("an idle CPU marked busy")
	}
	if s := e.h.Snapshot(); s.ResourceSeverity != admission.PressureNormal.String() {
		t.Fatalf("normal pressure shows %q", s.ResourceSeverity)
	}
	send(&pressure.State{Severity: pressure.High, Reason: "go_heap", CPUBusy: 0.95})
	if !e.h.cpuBusy.Load() {
		t.Fatal("a used-up CPU did not reach the controllers")
	}
	if s := e.h.Snapshot(); s.ResourceSeverity != admission.PressureHigh.String() || s.ResourceReason != "go_heap" {
		t.Fatalf("high pressure shows %q %q", s.ResourceSeverity, s.ResourceReason)
	}
	before := e.h.Snapshot().Upstreams[1].CurrentLimit
	send(&pressure.State{Severity: pressure.Critical, Reason: "cgroup", CPUBusy: 0.1})
	if e.h.cpuBusy.Load() {
		t.Fatal("the CPU stayed busy after a sample that says it is not")
	}
	s := e.until("halved", func(s *Snapshot) bool {
		return s.Upstreams[0].CurrentLimit <= (before+1)/2 && s.Upstreams[1].CurrentLimit <= (before+1)/2
	})
	if s.ResourceSeverity != admission.PressureCritical.String() || s.ResourceReason != "cgroup" {
		t.Fatalf("critical pressure shows %q %q", s.ResourceSeverity, s.ResourceReason)
	}
}
