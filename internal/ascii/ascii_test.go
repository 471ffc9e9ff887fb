package ascii

import (
	"strings"
	"testing"
)

// TestFold: EqualFold and HasPrefixFold on the same pairs (s lower-case):
// each row says what both answer.
func TestFold(t *testing.T) {
	for _, c := range []struct {
		b, s          string
		equal, prefix bool
	}{
		{"Content-Length", "content-length", true, true},
		{"CONTENT-LENGTH", "content-length", true, true},
		{"content-length", "content-length", true, true},
		{"Content-Lengths", "content-length", false, true},
		{"Content-Lengt", "content-length", false, false},
		{"", "", true, true},
		{"Date", "data", false, false},
		{"[", "{", false, false}, // not letters: no folding ('[' is 'Z'+1)
		{"@", "`", false, false},
		{"X-RateLimit-Limit-Requests", "x-ratelimit-", false, true},
		{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-", false, true},
		{"X-Rate", "x-ratelimit-", false, false},
		{"Y-RateLimit-Limit", "x-ratelimit-", false, false},
		{"anything", "", false, true},
		{"x-ratelimit-", "x-ratelimit-", true, true},
		{"x-ratelimi", "x-ratelimit-", false, false},
		{"x-rate-limit-", "x-ratelimit-", false, false},
		{"ANTHROPIC-RATELIMIT-X", "x-ratelimit-", false, false},
	} {
		if got := EqualFold([]byte(c.b), c.s); got != c.equal {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", c.b, c.s, got, c.equal)
		}
		if got := HasPrefixFold([]byte(c.b), c.s); got != c.prefix {
			t.Errorf("HasPrefixFold(%q, %q) = %v, want %v", c.b, c.s, got, c.prefix)
		}
	}
}

// FuzzEqualFold: against the standard library on ASCII input, with a
// lower-case s, the two agree.
func FuzzEqualFold(f *testing.F) {
	f.Add("Content-Type", "content-type")
	f.Add("X-Request-ID", "x-request-id")
	f.Fuzz(func(t *testing.T, b, s string) {
		for i := 0; i < len(b); i++ {
			if b[i] >= 0x80 {
				return
			}
		}
		s = strings.ToLower(s)
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return
			}
		}
		if got, want := EqualFold([]byte(b), s), strings.EqualFold(b, s); got != want {
			t.Fatalf("EqualFold(%q, %q) = %v, strings.EqualFold says %v", b, s, got, want)
		}
		if got, want := HasPrefixFold([]byte(b), s), len(b) >= len(s) && strings.EqualFold(b[:len(s)], s); got != want {
			t.Fatalf("HasPrefixFold(%q, %q) = %v, want %v", b, s, got, want)
		}
	})
}
