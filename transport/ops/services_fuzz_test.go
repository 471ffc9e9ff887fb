package ops

import (
	"encoding/json"
	"testing"
)

// FuzzParseAutoStart checks that the auto-start body parser never panics,
// accepts only bodies that really are {"enabled": <bool>}, and always gives
// a code and a message when it refuses.
func FuzzParseAutoStart(f *testing.F) {
	for _, s := range []string{`{"enabled":true}`, `{"enabled":false}`, `{}`, `{"enabled":1}`, `{"enabled":true}x`, ``, `[`, `{"enabled":true,"x":1}`, `{"enabled":true} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		enabled, code, msg := parseAutoStart(body)
		if code != 0 {
			if msg == "" || enabled {
				t.Fatalf("refusal without message, or with a value: %q %q %v", code, msg, enabled)
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil || len(v) != 1 {
			t.Fatalf("accepted %q", body)
		}
		if b, ok := v["enabled"].(bool); !ok || b != enabled {
			t.Fatalf("accepted %q as %v", body, enabled)
		}
	})
}
