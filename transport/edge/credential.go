package edge

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/dialect"
)

// Credential returns the caller's API key from the headers of the
// dialect table's auth styles (Authorization: Bearer, x-api-key,
// x-goog-api-key), in that order, trimmed. The slice aliases the request
// header. It is the one reading of a caller's key: identify, the Expect
// decision, the models list and the relay token all take it from here.
func Credential(h *fasthttp.RequestHeader) []byte {
	if k, ok := bearer(h); ok && len(k) > 0 {
		return k
	}
	if k := bytes.TrimSpace(h.Peek(xAPIKeyHeader)); len(k) > 0 {
		return k
	}
	return bytes.TrimSpace(h.Peek(googAPIKeyHeader))
}

// bearer returns the token of an "Authorization: Bearer" header, trimmed
// (empty when the header names the scheme and nothing else), and whether
// the header is of that scheme: the one reading of it, for the caller's
// key (Credential) and the management key (localguard.go).
func bearer(h *fasthttp.RequestHeader) ([]byte, bool) {
	a := h.Peek(fasthttp.HeaderAuthorization)
	if len(a) <= 7 || !ascii.HasPrefixFold(a, "bearer ") {
		return nil, false
	}
	return bytes.TrimSpace(a[7:]), true
}

// The headers of the key-only auth styles, read from the table once.
var (
	xAPIKeyHeader    = dialect.AuthHeader(dialect.AuthXAPIKey)
	googAPIKeyHeader = dialect.AuthHeader(dialect.AuthGoogAPIKey)
)
