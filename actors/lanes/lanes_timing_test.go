package lanes

import (
	"testing"

	"github.com/omniroute/gateway/internal/admission"
)

// BenchmarkAcquireRelease is the admission fast path: admit a request that
// fits, release it (the controller drains the releases concurrently).
func BenchmarkAcquireRelease(b *testing.B) {
	e := start(b, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 100000, 100000, 100000 })
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		tk := Ticket{Tenant: id("a"), Class: admission.Interactive, Cost: 5}
		var l Lease
		for pb.Next() {
			if e.h.Acquire(tk, &l) != None {
				b.Fatal("not admitted")
			}
			e.h.Release(&l, success)
		}
	})
}
