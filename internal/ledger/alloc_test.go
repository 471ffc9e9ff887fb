//go:build !race

package ledger

import "testing"

// TestLedgerAllocAllocatesNothing: estimating, reserving, settling and
// reading usage run on every request.
func TestLedgerAllocAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`)
	chunk := []byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	var c Counter
	var u Usage
	if a := testing.AllocsPerRun(200, func() {
		in, out := Estimate(body, 100, 1, DefaultOutputTokens)
		idx, _, ok := c.Reserve(9, uint64(in+out), 1<<40)
		if ok {
			c.Adjust(idx, uint64(in+out), 10)
		}
		ParseUsage(chunk, &u)
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
