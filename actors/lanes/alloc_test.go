//go:build !race

package lanes

import (
	"testing"

	"github.com/omniroute/gateway/internal/admission"
)

// TestAcquireReleaseAllocs pins the fast path: admitting a request that
// fits and releasing it allocates nothing (the release message is pooled).
func TestAcquireReleaseAllocs(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.InitialLimit = 1000 })
	tk := Ticket{Tenant: id("a"), Class: admission.Interactive, Cost: 5}
	var l Lease
	allocs := testing.AllocsPerRun(1000, func() {
		if e.h.Acquire(tk, &l) != None {
			t.Fatal("not admitted")
		}
		e.h.Release(&l, success)
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per admitted request", allocs)
	}
	if r := e.h.Probe(admission.Interactive, 5, -1, true); r != admission.ProbeOK {
		t.Fatal(r)
	}
	if a := testing.AllocsPerRun(1000, func() { e.h.Probe(admission.Interactive, 5, -1, true) }); a > 0 {
		t.Fatalf("%.1f allocations per probe", a)
	}
}
