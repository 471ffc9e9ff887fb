//go:build !race

package ledger

import "testing"

// TestLedgerAllocAllocatesNothing: estimating runs on every request
// (reading the usage report is the dialect table's, tested there).
func TestLedgerAllocAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`)
	if a := testing.AllocsPerRun(200, func() {
		_, _ = Estimate(body, 100, 1, DefaultOutputTokens)
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
