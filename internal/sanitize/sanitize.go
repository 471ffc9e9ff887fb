// Package sanitize strips secrets and local detail from text that may reach
// a caller or a log line: bearer tokens, API keys, key=value credentials,
// data URLs, PEM private keys and absolute file paths.
//
// It is the gateway's one redaction path. Secrets (and a Redactor, which
// also knows the configured keys by value) is what every log line and
// every passed-through upstream error goes through; Message is the same
// redaction cut to one bounded line without local paths, for error
// messages written to callers.
//
// It errs on the side of redacting: an error message loses nothing a caller
// can act on when a token-shaped word becomes [REDACTED].
package sanitize

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MaxLen bounds a sanitised message.
const MaxLen = 1024

// Redacted replaces a secret.
const Redacted = "[REDACTED]"

type rule struct {
	re   *regexp.Regexp
	repl string
}

// Secret-shaped text, most specific first. Every replacement is plain
// text without quotes or backslashes, so a secret inside a JSON string
// leaves a valid JSON string.
var (
	privateKey  = rule{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), "[REDACTED_PRIVATE_KEY]"}
	secretRules = []rule{
		privateKey,
		{regexp.MustCompile(`data:[a-zA-Z0-9.+/-]+;base64,[A-Za-z0-9+/=_-]+`), "[REDACTED_DATA_URL]"},
		{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`), "$1 " + Redacted},
		{regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_-]{8,}|\bsk_[A-Za-z0-9_]{8,}|\bAIza[0-9A-Za-z_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{8,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*`), Redacted},
		{regexp.MustCompile(`[?&](key|api_key|token|access_token|sig|signature)=[^&\s"']+`), "?$1=" + Redacted},
	}
	// credentialName is a field, header or parameter name that holds a
	// credential.
	credentialName = `(?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|auth[_-]?token|authorization|x-api-key|x-goog-api-key|secret|password|passwd|cookie|token)`
	// keyValue: name=value or name: value in free text.
	keyValue = rule{regexp.MustCompile(`(?i)(` + credentialName + `["']?\s*[:=]\s*["']?)[^\s"'&,;\\]+`), "${1}" + Redacted}
	// jsonField: "name": "value" in JSON, keeping the JSON valid.
	jsonField = rule{regexp.MustCompile(`(?i)("` + credentialName + `"\s*:\s*")(?:[^"\\]|\\.)*`), "${1}" + Redacted}
	pathRule  = rule{regexp.MustCompile(`(^|[\s"'(=])(/(?:[A-Za-z0-9._@+-]+/)+[A-Za-z0-9._@+-]*|[A-Za-z]:\\(?:[^\\\s"']+\\)+[^\\\s"']*)`), "$1<path>"}
)

// Secrets returns s with every secret-shaped token redacted, keeping its
// lines and everything else: for log lines and multi-line details.
func Secrets(s string) string {
	for _, r := range secretRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	s = jsonField.re.ReplaceAllString(s, jsonField.repl)
	return keyValue.re.ReplaceAllString(s, keyValue.repl)
}

// Message returns s as a single, bounded line with secrets and paths
// redacted. fallback is returned when nothing useful is left.
func Message(s, fallback string) string { return (*Redactor)(nil).Message(s, fallback) }

// Redactor redacts the secret-shaped text Secrets does and, besides, every
// occurrence of the literal values it was given (the configured provider
// keys, management key and the like, whatever their shape). A nil
// Redactor redacts shapes only.
//
// Add learns more values while the Redactor is in use (a config reload
// bringing a new provider key): readers load the current set with one
// atomic load, and a value once added stays (a stream in flight may still
// carry an old key).
type Redactor struct {
	set atomic.Pointer[knownSet]
	mu  sync.Mutex // serialises Add
}

// knownSet is an immutable set of literal values to redact.
type knownSet struct {
	known [][]byte
	strs  []string
	seen  map[string]bool
}

// minKnown is the shortest literal value worth redacting: a shorter one
// would blank ordinary words.
const minKnown = 6

// NewRedactor returns a Redactor for the literal secrets given (empty and
// very short values are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	r.set.Store(&knownSet{seen: map[string]bool{}})
	r.Add(secrets...)
	return r
}

// Add makes r redact secrets too (empty, very short and known values are
// ignored). Every line and body redacted after Add returns is covered.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.set.Load()
	var next *knownSet
	for _, s := range secrets {
		if len(s) < minKnown || cur.seen[s] || (next != nil && next.seen[s]) {
			continue
		}
		if next == nil {
			next = &knownSet{known: slices.Clip(cur.known), strs: slices.Clip(cur.strs), seen: maps.Clone(cur.seen)}
		}
		next.seen[s] = true
		next.known = append(next.known, []byte(s))
		next.strs = append(next.strs, s)
	}
	if next != nil {
		r.set.Store(next)
	}
}

// String redacts s for a log line: known values, then secret shapes.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, k := range r.set.Load().strs {
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	return Secrets(s)
}

// Bytes redacts an upstream error body or header value passed through to
// a caller: known values, secret shapes and JSON credential fields. It
// keeps JSON valid and returns b itself when nothing was redacted.
func (r *Redactor) Bytes(b []byte) []byte {
	out := b
	if r != nil {
		for _, k := range r.set.Load().known {
			if bytes.Contains(out, k) {
				out = bytes.ReplaceAll(out, k, []byte(Redacted))
			}
		}
	}
	for _, rl := range secretRules {
		out = rl.re.ReplaceAll(out, []byte(rl.repl))
	}
	out = jsonField.re.ReplaceAll(out, []byte(jsonField.repl))
	if t := bytes.TrimSpace(out); len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		out = keyValue.re.ReplaceAll(out, []byte(keyValue.repl)) // free text, not JSON
	}
	if bytes.Equal(out, b) {
		return b
	}
	return out
}

// Message returns s as a single, bounded line with known values, secrets
// and paths redacted. fallback is returned when nothing useful is left.
func (r *Redactor) Message(s, fallback string) string {
	// Private keys span lines: redact them before cutting to one line.
	s = privateKey.re.ReplaceAllString(s, privateKey.repl)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 4*MaxLen {
		s = s[:4*MaxLen]
	}
	s = pathRule.re.ReplaceAllString(r.String(s), pathRule.repl)
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		s = s[:MaxLen] + "…"
	}
	if s == "" {
		return fallback
	}
	return s
}
