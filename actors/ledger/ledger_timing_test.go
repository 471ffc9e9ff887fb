package ledger

import (
	"testing"
)

// BenchmarkReserveSettleParallel: every goroutine reserves and settles on
// the same budget, the worst case of contention on one window word.
func BenchmarkReserveSettleParallel(b *testing.B) {
	h, clk := start(b, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(1<<40, 1<<40)})
	now := clk.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, _, _ := h.Reserve(0, 1000, now)
			h.Settle(&r, 900, false)
		}
	})
}

// BenchmarkReserveOnly is the atomic part alone.
func BenchmarkReserveOnly(b *testing.B) {
	h, clk := start(b, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(1<<40, 0)})
	now := clk.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Reserve(0, 1, now)
		}
	})
}
