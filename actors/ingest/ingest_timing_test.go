package ingest

import (
	"testing"

	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/testutil"
)

// BenchmarkFastPath is a heavy reservation that fits while nobody waits:
// two CASes, a lease and its registration, then the release.
func BenchmarkFastPath(b *testing.B) {
	sys := testutil.ActorSystem(b)
	h, err := Spawn(sys, Config{Budget: budget.Budget{Bytes: 1 << 40}, LargeBody: 256 * kib, MaxQueuedBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, ok := h.TryAcquire(1*mib, true)
			if !ok {
				b.Fatal("fast path refused")
			}
			l.Release()
		}
	})
}

// BenchmarkLightDecision is the check a light body costs.
func BenchmarkLightDecision(b *testing.B) {
	sys := testutil.ActorSystem(b)
	fp := &fakePressure{}
	h, err := Spawn(sys, Config{Budget: budget.Budget{Bytes: 1 << 30}, LargeBody: 256 * kib, MaxQueuedBytes: 1 << 30, Pressure: fp})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if h.Critical() || 1000 >= h.LargeBody() {
			b.Fatal("light body refused")
		}
	}
}
