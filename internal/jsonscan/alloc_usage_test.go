//go:build !race

package jsonscan

import "testing"

// TestIncludeUsageAllocAllocatesNothing: rewriting a streaming chat body
// to ask for usage reuses the caller's buffer.
func TestIncludeUsageAllocAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	var r Request
	if err := ScanRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 512)
	if a := testing.AllocsPerRun(200, func() { dst = AppendIncludeUsage(dst[:0], body, &r, "upstream-name") }); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
