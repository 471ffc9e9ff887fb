package ascii

import (
	"strings"
	"testing"
)

func TestEqualFold(t *testing.T) {
	for _, c := range []struct {
		b, s string
		want bool
	}{
		{"Content-Length", "content-length", true},
		{"CONTENT-LENGTH", "content-length", true},
		{"content-length", "content-length", true},
		{"Content-Lengths", "content-length", false},
		{"Content-Lengt", "content-length", false},
		{"", "", true},
		{"Date", "data", false},
		{"[", "{", false}, // not letters: no folding ('[' is 'Z'+1)
		{"@", "`", false},
	} {
		if got := EqualFold([]byte(c.b), c.s); got != c.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", c.b, c.s, got, c.want)
		}
	}
}

func TestHasPrefixFold(t *testing.T) {
	for _, c := range []struct {
		b, p string
		want bool
	}{
		{"X-RateLimit-Limit-Requests", "x-ratelimit-", true},
		{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-", true},
		{"X-Rate", "x-ratelimit-", false},
		{"Y-RateLimit-Limit", "x-ratelimit-", false},
		{"anything", "", true},
		{"x-ratelimit-", "x-ratelimit-", true},
		{"x-ratelimi", "x-ratelimit-", false},
		{"x-rate-limit-", "x-ratelimit-", false},
		{"ANTHROPIC-RATELIMIT-X", "x-ratelimit-", false},
	} {
		if got := HasPrefixFold([]byte(c.b), c.p); got != c.want {
			t.Errorf("HasPrefixFold(%q, %q) = %v, want %v", c.b, c.p, got, c.want)
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
