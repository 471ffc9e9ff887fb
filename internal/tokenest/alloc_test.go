//go:build !race

package tokenest

import "testing"

// Allocation tests run without -race (CI reruns -run Alloc without it).

func TestEstimateAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there \u00e9"}],"tools":[{"type":"function"}]}`)
	if n := testing.AllocsPerRun(100, func() { Estimate(body, 32000) }); n != 0 {
		t.Fatalf("Estimate allocates %v times per call", n)
	}
}
