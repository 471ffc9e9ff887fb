//go:build !race

package ledger

import "testing"

// TestLedgerAllocAllocatesNothing: estimating and reading usage run on
// every request.
func TestLedgerAllocAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`)
	chunk := []byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	var u Usage
	if a := testing.AllocsPerRun(200, func() {
		_, _ = Estimate(body, 100, 1, DefaultOutputTokens)
		ParseUsage(chunk, &u)
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
