package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/sanitize"
)

// TestRedactingCoversEveryPart: the message, string, error, byte-slice and
// Stringer attributes, groups and WithAttrs are all redacted, in both
// formats; non-text values keep their type.
func TestRedactingCoversEveryPart(t *testing.T) {
	const key = "provider-key-77"
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		l := Redacting(New(format, "debug", &buf), sanitize.NewRedactor(key))
		l = l.With("base", "Bearer "+key)
		l.Debug("msg with "+key, "s", key, "err", errors.New("upstream said "+key), "b", []byte("x-api-key: abcdefgh1"),
			slog.Group("g", "inner", "token="+key), "n", 42)
		l.WithGroup("grp").Error("e", "k", "sk-abcdefghijklmnop")
		out := buf.String()
		for _, leak := range []string{key, "abcdefgh1", "sk-abcdefghijklmnop"} {
			if strings.Contains(out, leak) {
				t.Errorf("%s: %q leaked:\n%s", format, leak, out)
			}
		}
		if !strings.Contains(out, "42") || strings.Count(out, sanitize.Redacted) < 6 {
			t.Errorf("%s: unexpected output:\n%s", format, out)
		}
	}
}
