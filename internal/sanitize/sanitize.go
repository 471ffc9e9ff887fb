// Package sanitize strips secrets and local detail from text that may reach
// a caller or a log line: bearer tokens, API keys, key=value credentials,
// data URLs, PEM private keys and absolute file paths.
//
// It errs on the side of redacting: an error message loses nothing a caller
// can act on when a token-shaped word becomes [REDACTED].
package sanitize

import (
	"regexp"
	"strings"
)

// MaxLen bounds a sanitised message.
const MaxLen = 1024

var rules = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), "[REDACTED_PRIVATE_KEY]"},
	{regexp.MustCompile(`data:[a-zA-Z0-9.+/-]+;base64,[A-Za-z0-9+/=_-]+`), "[REDACTED_DATA_URL]"},
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`), "$1 [REDACTED]"},
	{regexp.MustCompile(`(?i)((?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|auth[_-]?token|authorization|x-api-key|x-goog-api-key|secret|password|passwd|cookie|token)["']?\s*[:=]\s*["']?)[^\s"'&,;]+`), "$1[REDACTED]"},
	{regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_-]{8,}|\bsk_[A-Za-z0-9_]{8,}|\bAIza[0-9A-Za-z_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{8,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*`), "[REDACTED]"},
	{regexp.MustCompile(`[?&](key|api_key|token|access_token|sig|signature)=[^&\s]+`), "?$1=[REDACTED]"},
	{regexp.MustCompile(`(^|[\s"'(=])(/(?:[A-Za-z0-9._@+-]+/)+[A-Za-z0-9._@+-]*|[A-Za-z]:\\(?:[^\\\s"']+\\)+[^\\\s"']*)`), "$1<path>"},
}

// Message returns s as a single, bounded line with secrets and paths
// redacted. fallback is returned when nothing useful is left.
func Message(s, fallback string) string {
	// Private keys span lines: redact them before cutting to one line.
	s = rules[0].re.ReplaceAllString(s, rules[0].repl)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 4*MaxLen {
		s = s[:4*MaxLen]
	}
	for _, r := range rules[1:] {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		s = s[:MaxLen] + "…"
	}
	if s == "" {
		return fallback
	}
	return s
}
