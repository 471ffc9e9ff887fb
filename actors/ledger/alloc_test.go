//go:build !race

package ledger

import "testing"

// TestReserveAllocAllocatesNothing: the request path checks and reserves
// with atomics only.
func TestReserveAllocAllocatesNothing(t *testing.T) {
	h, clk := start(t, SlotSpec{Connection: "p/a", Model: "m", Configured: lim(1<<40, 1<<40)})
	now := clk.Now()
	if a := testing.AllocsPerRun(200, func() {
		h.Check(0, 500, now)
		r, _, _ := h.Reserve(0, 500, now)
		_ = r
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
