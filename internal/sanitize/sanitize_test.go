package sanitize

import (
	"strings"
	"testing"
)

func TestMessage(t *testing.T) {
	cases := []struct{ in, mustNot, must string }{
		{"Authorization: Bearer sk-abc123def456ghi", "sk-abc123def456ghi", "[REDACTED]"},
		{"upstream said api_key=abcd1234 is wrong", "abcd1234", "api_key=[REDACTED]"},
		{`{"x-api-key": "k-9999999"}`, "k-9999999", "[REDACTED]"},
		{"open /home/alice/.config/omniroute/secret.json: permission denied", "/home/alice", "<path>"},
		{`failed at C:\Users\bob\app\main.js:10`, `C:\Users\bob`, "<path>"},
		{"image data:image/png;base64,iVBORw0KGgoAAAANSUhEUg== rejected", "iVBORw0KGgo", "[REDACTED_DATA_URL]"},
		{"key -----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY----- leaked", "MIIabc", "[REDACTED_PRIVATE_KEY]"},
		{"token sk-proj-ABCDEFGHIJKLMNOP in text", "ABCDEFGHIJKLMNOP", "[REDACTED]"},
		{"https://x/y?key=AIzaSyA-very-secret&v=1", "very-secret", "[REDACTED]"},
		{"first line\nsecond line with secret", "second line", "first line"},
	}
	for _, tc := range cases {
		got := Message(tc.in, "fallback")
		if strings.Contains(got, tc.mustNot) || !strings.Contains(got, tc.must) {
			t.Fatalf("Message(%q) = %q; must not contain %q, must contain %q", tc.in, got, tc.mustNot, tc.must)
		}
	}
	if got := Message("   ", "fallback"); got != "fallback" {
		t.Fatalf("blank: %q", got)
	}
	if got := Message(strings.Repeat("a", 5000), ""); len(got) > MaxLen+4 {
		t.Fatalf("not bounded: %d", len(got))
	}
}

func FuzzMessage(f *testing.F) {
	f.Add("Bearer abc.def")
	f.Fuzz(func(t *testing.T, s string) {
		out := Message(s, "x")
		if strings.ContainsAny(out, "\r\n") || len(out) > MaxLen+4 {
			t.Fatalf("Message(%q) = %q: multi-line or unbounded", s, out)
		}
	})
}
