package edge

import (
	"strconv"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// WriteError renders e as the response, in format f.
func WriteError(ctx *fasthttp.RequestCtx, f apierror.Format, rid string, e *apierror.Error) {
	ctx.Response.ResetBody()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.RetryAfter > 0 {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	buf := bytebufferpool.Get()
	buf.B = e.Append(buf.B, f, rid)
	ctx.Response.SetBody(buf.B)
	bytebufferpool.Put(buf)
}

// WriteManagementError writes the operator APIs' error body
// {"error":{"message","type","code"[,"field"]},"requestId"}. The type
// follows the reference: given, else server_error (5xx), not_found (404),
// conflict (409), invalid_request (others). field, when not empty, names
// the body field to blame.
func WriteManagementError(ctx *fasthttp.RequestCtx, rid []byte, status int, typ, code, msg string) {
	WriteManagementFieldError(ctx, rid, status, typ, code, "", msg)
}

// WriteManagementFieldError is WriteManagementError naming the field to
// blame.
func WriteManagementFieldError(ctx *fasthttp.RequestCtx, rid []byte, status int, typ, code, field, msg string) {
	if typ == "" {
		typ = apierror.ManagementType(status)
	}
	ctx.Response.ResetBody()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b := append([]byte(nil), `{"error":{"message":`...)
	b = apierror.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = apierror.AppendString(b, typ)
	b = append(b, `,"code":`...)
	b = apierror.AppendString(b, code)
	if field != "" {
		b = append(b, `,"field":`...)
		b = apierror.AppendString(b, field)
	}
	b = append(b, `},"requestId":`...)
	b = apierror.AppendString(b, string(rid))
	ctx.SetBody(append(b, '}'))
}

// writeManagement writes e as the operator APIs' error, its type the
// table's (OpenAI) one, as the edge's refusals on operator routes have it.
func writeManagement(ctx *fasthttp.RequestCtx, rid []byte, e *apierror.Error) {
	WriteManagementError(ctx, rid, e.Status, e.Type, e.Code, e.Message)
}

// writeIn writes e in route r's dialect as the edge renders it before the
// caller's headers are read (refusals, the panic answer).
func writeIn(ctx *fasthttp.RequestCtx, r Route, rid []byte, e *apierror.Error) {
	if routes[r].Dialect == DialectManagement {
		writeManagement(ctx, rid, e)
		return
	}
	WriteError(ctx, r.Format(), string(rid), e)
}

// The edge's own errors. Messages say what failed and what to do.

// ErrNotFound answers a path no row of the route table serves.
func ErrNotFound(path string) *apierror.Error {
	return apierror.New(apierror.CodeNotFound, "no route for "+strconv.Quote(path)+"; the gateway serves "+inferencePaths)
}

// ErrMethod answers a method the route does not take; allow names the
// ones it does ("GET or HEAD").
func ErrMethod(allow string) *apierror.Error {
	return apierror.New(apierror.CodeMethodNotAllowed, "method not allowed; use "+allow)
}

// ErrInternal answers a request whose handling panicked.
var ErrInternal = apierror.New(apierror.CodeInternalError,
	"the gateway failed while handling this request (logged with its request id); retry, and report it if it persists")

// ErrBodyTooLarge answers a body over OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES.
func ErrBodyTooLarge(limit int64) *apierror.Error {
	return apierror.New(apierror.CodePayloadTooLarge, "request body is larger than "+strconv.FormatInt(limit>>20, 10)+" MiB (OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES); shorten the conversation or raise the limit")
}

// ErrBodyTimeout answers a body that missed its arrival deadline.
var ErrBodyTimeout = apierror.New(apierror.CodeRequestTimeout,
	"the request body did not arrive in time (OMNIROUTE_HEADER_TIMEOUT_MS plus its size at OMNIROUTE_UPLOAD_MIN_BYTES_PER_SEC); resend it over a faster link or raise the limit")
