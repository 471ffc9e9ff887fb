package edge

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
)

// RequestID appends the request's id to dst: the caller's X-Request-Id
// when it is safe to echo and to send upstream, else a new one.
func (e *Edge) RequestID(dst []byte, h *fasthttp.RequestHeader) []byte {
	if id := h.Peek("X-Request-Id"); validClientRequestID(id) {
		return append(dst, id...)
	}
	return e.rids.next(dst)
}

// SetAnthropicRequestID adds request-id, where the Anthropic SDK reads a
// response's request id (the dialect table's RequestIDHeader), beside
// X-Request-Id on Anthropic-dialect answers.
func SetAnthropicRequestID(h *fasthttp.ResponseHeader, f apierror.Format, rid []byte) {
	if f == apierror.Anthropic {
		h.SetBytesV(anthropicRequestID, rid)
	}
}

var anthropicRequestID = dialect.Of(dialect.Messages).RequestIDHeader

// requestIDs makes x-request-id values: a random per-process prefix and a
// counter, so ids are unique without a syscall per request.
type requestIDs struct {
	prefix [8]byte
	n      atomic.Uint64
}

func (r *requestIDs) init() {
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	hex.Encode(r.prefix[:], raw[:])
}

// next appends a new id ("req_" + 8 hex + 12 hex) to dst.
func (r *requestIDs) next(dst []byte) []byte {
	dst = append(dst, "req_"...)
	dst = append(dst, r.prefix[:]...)
	n := r.n.Add(1)
	var b [12]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = "0123456789abcdef"[n&0xf]
		n >>= 4
	}
	return append(dst, b[:]...)
}

// validClientRequestID accepts a caller-supplied id that is safe to echo
// and to send upstream.
func validClientRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
