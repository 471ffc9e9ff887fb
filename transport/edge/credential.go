package edge

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/dialect"
)

// Credential returns the caller's API key from the headers of the
// dialect table's auth styles (Authorization: Bearer, x-api-key,
// x-goog-api-key), in that order, trimmed. The slice aliases the request
// header. It is the one reading of a caller's key: identify, the Expect
// decision, the models list and the relay token all take it from here.
func Credential(h *fasthttp.RequestHeader) []byte {
	if a := h.Peek(fasthttp.HeaderAuthorization); len(a) > 7 && bytes.EqualFold(a[:7], []byte("bearer ")) {
		if k := bytes.TrimSpace(a[7:]); len(k) > 0 {
			return k
		}
	}
	if k := bytes.TrimSpace(h.Peek(xAPIKeyHeader)); len(k) > 0 {
		return k
	}
	return bytes.TrimSpace(h.Peek(googAPIKeyHeader))
}

// The headers of the key-only auth styles, read from the table once.
var (
	xAPIKeyHeader    = dialect.AuthHeader(dialect.AuthXAPIKey)
	googAPIKeyHeader = dialect.AuthHeader(dialect.AuthGoogAPIKey)
)
