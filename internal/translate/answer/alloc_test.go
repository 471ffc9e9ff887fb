//go:build !race

package answer

import "testing"

// TestAllocStreamEvents: translating a content event on a warmed-up
// converter allocates nothing, for every upstream dialect.
func TestAllocStreamEvents(t *testing.T) {
	for _, be := range benchEvents {
		tr := primed(t, be.from, be.to, be.prime)
		out := make([]byte, 0, 4096)
		n := testing.AllocsPerRun(200, func() {
			var err error
			if out, err = tr.Event(out[:0], &be.event); err != nil {
				t.Fatal(err)
			}
			tr.st.acc = tr.st.acc[:0]
		})
		if n != 0 {
			t.Errorf("%s: %.1f allocations per event, want 0", be.name, n)
		}
	}
}
