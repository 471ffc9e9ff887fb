package attempt

import (
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/transport/upstream"
)

// CopyResponseHeaders adds the upstream response headers the caller sees
// (all but the hop-by-hop, framing, cookie and identity ones) to dst.
func CopyResponseHeaders(dst *fasthttp.ResponseHeader, src *fasthttp.ResponseHeader) {
	for k, v := range src.All() {
		if skipResponseHeader(k) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
}

func skipResponseHeader(k []byte) bool {
	switch len(k) {
	case 4:
		return ascii.EqualFold(k, "date")
	case 6:
		return ascii.EqualFold(k, "server")
	case 7:
		return ascii.EqualFold(k, "trailer")
	case 10:
		return ascii.EqualFold(k, "connection") || ascii.EqualFold(k, "keep-alive") || ascii.EqualFold(k, "set-cookie")
	case 12:
		return ascii.EqualFold(k, "x-request-id") || ascii.EqualFold(k, "content-type")
	case 14:
		return ascii.EqualFold(k, "content-length")
	case 17:
		return ascii.EqualFold(k, "transfer-encoding")
	}
	return len(k) > 6 && ascii.EqualFold(k[:6], "proxy-")
}

// PassHeaders starts the response with the upstream answer's status and
// headers: the ones the caller sees, its content type, and its request id
// as X-Upstream-Request-Id. The pipeline writes the routing headers next,
// then PassBody.
func PassHeaders(ctx *fasthttp.RequestCtx, x *upstream.Exchange) {
	ctx.SetStatusCode(x.Resp.StatusCode())
	CopyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentTypeBytes(x.Resp.Header.ContentType())
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		ctx.Response.Header.SetBytesV("X-Upstream-Request-Id", up)
	}
}

// PassBody sets the upstream answer's body as the response's. A success
// is passed through byte for byte (its model renamed, see Renamed); an
// error answer's headers and body are redacted first (a provider may echo
// the key it was sent). A body to translate is set as it came:
// TranslateAnswer renders it.
func (st *State) PassBody(s *Stage, ctx *fasthttp.RequestCtx, x *upstream.Exchange) {
	if x.Resp.StatusCode() >= 400 {
		s.redactErrorHeaders(&ctx.Response.Header)
		ctx.Response.SetBody(s.redact.Bytes(x.Resp.Body()))
		return
	}
	if st.Translating() {
		ctx.Response.SetBody(x.Resp.Body())
		return
	}
	ctx.Response.SetBody(st.Renamed(x.Resp.Body()))
}

// redactErrorHeaders redacts the header values of an upstream error
// answer in place (a provider may echo the key it was sent).
func (s *Stage) redactErrorHeaders(h *fasthttp.ResponseHeader) {
	for k, v := range h.All() {
		if red := s.redact.Bytes(v); &red[0] != &v[0] {
			h.SetBytesKV(k, red)
		}
	}
}

// Kept is the last provider error kept for pass-through when failover
// runs out of targets (Status 0: none).
type Kept struct {
	Status      int
	contentType []byte
	retryAfter  []byte
	body        []byte
	up          catalog.Surface // the dialect of the attempt that answered it
}

// Keep keeps x's answer, which the attempt in dialect up brought.
func (k *Kept) Keep(x *upstream.Exchange, up catalog.Surface) {
	k.Status = x.Resp.StatusCode()
	k.contentType = append(k.contentType[:0], x.Resp.Header.ContentType()...)
	k.retryAfter = append(k.retryAfter[:0], x.Resp.Header.Peek(fasthttp.HeaderRetryAfter)...)
	k.body = append(k.body[:0], x.Resp.Body()...)
	k.up = up
}

// ReplayStatus starts the response with the kept error's status, content
// type and Retry-After. The pipeline writes the routing headers next,
// then ReplayBody.
func (k *Kept) ReplayStatus(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(k.Status)
	if len(k.contentType) > 0 {
		ctx.Response.Header.SetContentTypeBytes(k.contentType)
	}
	if len(k.retryAfter) > 0 {
		ctx.Response.Header.SetBytesV(fasthttp.HeaderRetryAfter, k.retryAfter)
	}
}

// ReplayBody sets the kept error's body, redacted, in the caller's
// dialect whatever the current attempt's (TranslateKeptError).
func (st *State) ReplayBody(s *Stage, ctx *fasthttp.RequestCtx, k *Kept, rid []byte) {
	ctx.Response.SetBody(s.redact.Bytes(k.body))
	if k.up != st.caller {
		st.translateKeptError(ctx, k.up, rid)
	}
}
