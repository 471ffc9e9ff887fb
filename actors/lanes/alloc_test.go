//go:build !race

package lanes

import (
	"testing"

	"github.com/omniroute/gateway/internal/admission"
)

// TestAcquireReleaseAllocs pins the fast path: admitting a request that
// fits and releasing it allocates nothing (the release record is pooled),
// nor does a try-acquire that finds no room.
func TestAcquireReleaseAllocs(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 1000, 1000, 1000 })
	tk := Ticket{Tenant: id("a"), Class: admission.Interactive, Cost: 5, Stream: true}
	var l Lease
	allocs := testing.AllocsPerRun(1000, func() {
		if e.h.Acquire(tk, &l) != None {
			t.Fatal("not admitted")
		}
		e.h.FirstByte(&l, 0, 0)
		e.h.Release(&l, success)
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per admitted request", allocs)
	}
	var full [200]Lease
	for i := range full {
		if e.h.Acquire(tk, &full[i]) != None {
			t.Fatal("filling up")
		}
	}
	if a := testing.AllocsPerRun(1000, func() { e.h.TryAcquire(tk, &l) }); a > 0 {
		t.Fatalf("%.1f allocations per refused try-acquire", a)
	}
	for i := range full {
		e.h.Release(&full[i], success)
	}
}
