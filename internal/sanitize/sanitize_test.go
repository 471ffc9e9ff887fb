package sanitize

import (
	"bytes"
	"encoding/json"
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

func TestRedactorKnownValuesAndShapes(t *testing.T) {
	r := NewRedactor("upstream-key-a", "", "abc") // empty and short values are ignored
	cases := []struct{ in, mustNot, must string }{
		{`{"error":{"message":"Incorrect API key provided: upstream-key-a","code":"invalid_api_key"}}`, "upstream-key-a", `provided: [REDACTED]"`},
		{`{"error":{"message":"bad key sk-proj-0123456789abcdef"}}`, "0123456789abcdef", "[REDACTED]"},
		{`{"api_key": "k-9999999", "n": 1}`, "k-9999999", `"api_key": "[REDACTED]"`},
		{`{"token": "a\"b\\c-secret", "ok": true}`, "c-secret", `"token": "[REDACTED]"`},
		{"key=upstream-key-a; retry", "upstream-key-a", "[REDACTED]"},
		{"password=hunter22 sent", "hunter22", "password=[REDACTED]"},
	}
	for _, tc := range cases {
		got := string(r.Bytes([]byte(tc.in)))
		if strings.Contains(got, tc.mustNot) || !strings.Contains(got, tc.must) {
			t.Errorf("Bytes(%q) = %q; must not contain %q, must contain %q", tc.in, got, tc.mustNot, tc.must)
		}
		if s := r.String(tc.in); strings.Contains(s, tc.mustNot) {
			t.Errorf("String(%q) = %q still holds %q", tc.in, s, tc.mustNot)
		}
	}
	in := []byte(`{"error":{"message":"rate limited","code":"rate_limit"}}`)
	if out := r.Bytes(in); &out[0] != &in[0] {
		t.Error("a body without secrets must be returned as is")
	}
	if got := r.String("abc abcabc"); got != "abc abcabc" {
		t.Errorf("a short value must not be redacted: %q", got)
	}
	var nilR *Redactor
	if got := nilR.String("Bearer tok.en-123"); strings.Contains(got, "tok.en-123") {
		t.Errorf("nil redactor: %q", got)
	}
	multi := "line one Bearer abcdefgh\n\tat /home/x/y.go:3"
	if got := Secrets(multi); strings.Contains(got, "abcdefgh") || !strings.Contains(got, "\n\tat /home/x/y.go:3") {
		t.Errorf("Secrets must keep lines and paths: %q", got)
	}
}

// FuzzRedactorKeepsJSON: redacting a JSON document leaves valid JSON, and
// a planted known secret never survives, wherever it sits.
func FuzzRedactorKeepsJSON(f *testing.F) {
	f.Add(`{"error":{"message":"x","type":"y"}}`, "prefix ")
	f.Add(`["token: abc", {"password":"p\"w"}]`, "")
	f.Fuzz(func(t *testing.T, doc, around string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		const key = "planted-Key_0042"
		r := NewRedactor(key)
		if out := r.Bytes([]byte(doc)); !json.Valid(out) {
			t.Fatalf("Bytes(%q) = %q is not JSON", doc, out)
		}
		withKey, _ := json.Marshal(map[string]any{"message": around + key + around, "doc": v})
		out := r.Bytes(withKey)
		if !json.Valid(out) || bytes.Contains(out, []byte(key)) {
			t.Fatalf("Bytes(%s) = %s", withKey, out)
		}
	})
}

// TestRedactorAddKeepsOldValues: a value added later is redacted from
// then on, the earlier ones still are, and Add races no reader (-race).
func TestRedactorAddKeepsOldValues(t *testing.T) {
	r := NewRedactor("first-key-plain")
	body := "old first-key-plain new second-key-plain"
	if got := r.String(body); !strings.Contains(got, "second-key-plain") {
		t.Fatalf("a value not yet added was redacted: %q", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			_ = r.Bytes([]byte(body))
		}
	}()
	r.Add("second-key-plain", "second-key-plain", "x")
	<-done
	for _, got := range []string{r.String(body), string(r.Bytes([]byte(body)))} {
		if strings.Contains(got, "first-key-plain") || strings.Contains(got, "second-key-plain") || strings.Count(got, Redacted) != 2 {
			t.Fatalf("after Add: %q", got)
		}
	}
	if got := r.String("x marks"); got != "x marks" {
		t.Fatalf("a too-short value was added: %q", got)
	}
}
