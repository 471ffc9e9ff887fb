package transport

import (
	"strconv"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
)

// formatFor picks the error dialect of a surface.
func formatFor(s catalog.Surface) apierror.Format {
	if s == catalog.Messages {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// writeError renders e as the response, in format f.
func writeError(ctx *fasthttp.RequestCtx, f apierror.Format, rid string, e *apierror.Error) {
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

// The gateway's own errors. Messages say what failed and what to do.
var (
	errNotFound = func(path string) *apierror.Error {
		return &apierror.Error{Status: 404, Type: "invalid_request_error", Code: "not_found",
			Message: "no route for " + strconv.Quote(path) + "; the gateway serves /v1/chat/completions, /v1/messages, /v1/messages/count_tokens, /v1/responses, /v1/models and /v1/models/{id}"}
	}
	errMethod = func(allow string) *apierror.Error {
		return &apierror.Error{Status: 405, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: "method not allowed; use " + allow}
	}
	errMediaType = &apierror.Error{Status: 415, Type: "invalid_request_error", Code: "unsupported_media_type",
		Message: "Content-Type must be application/json, and is required (with curl, add -H 'Content-Type: application/json')"}
	errMissingKey = &apierror.Error{Status: 401, Type: "authentication_error", Code: "missing_api_key",
		Message: "no API key: send Authorization: Bearer <key> or x-api-key: <key>"}
	errInvalidKey = &apierror.Error{Status: 401, Type: "authentication_error", Code: "invalid_api_key",
		Message: "the API key is not configured on this gateway"}
	errDraining = &apierror.Error{Status: 503, Type: "server_error", Code: "shutting_down",
		Message: "the gateway is shutting down; retry against another instance", RetryAfter: 1}
	errMissingModel = &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "missing_model",
		Message: `request body has no "model" string; set "model" to one of the names listed by GET /v1/models`}
	errEmptyBody = &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "empty_body",
		Message: "request body is empty; send a JSON object with at least \"model\""}
)

func errBodyTooLarge(limit int64) *apierror.Error {
	return &apierror.Error{Status: 413, Type: "invalid_request_error", Code: "payload_too_large",
		Message: "request body is larger than " + strconv.FormatInt(limit>>20, 10) + " MiB (OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES); shorten the conversation or raise the limit"}
}

func errInvalidJSON(detail string) *apierror.Error {
	return &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
		Message: "request body is not valid JSON: " + detail}
}

func errUnknownModel(name []byte) *apierror.Error {
	return &apierror.Error{Status: 404, Type: "invalid_request_error", AnthropicType: "not_found_error", Code: "model_not_found",
		Message: "model " + strconv.Quote(string(name)) + " is not configured on this gateway; GET /v1/models lists the available models"}
}

func errWrongSurface(m *catalog.Model, s catalog.Surface) *apierror.Error {
	if !s.Translated() {
		return &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_api_format",
			Message: "model " + strconv.Quote(m.Name) + " has no target whose provider serves " + s.String() + " (" + s.Route() +
				" is passed through, never translated); use a model on a provider that lists \"" + s.String() +
				"\" in its apis (an OpenAI-compatible endpoint; Anthropic-dialect providers have none)"}
	}
	msg := "model " + strconv.Quote(m.Name) + " is served only through "
	for i, n := range m.Surfaces.Names() {
		if i > 0 {
			msg += ", "
		}
		msg += (surfaceByName(n)).Route()
	}
	msg += "; call that endpoint, or add a target whose provider speaks " + s.String() + " or another translated API"
	return &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_api_format", Message: msg}
}

func surfaceByName(n string) catalog.Surface {
	for _, s := range catalog.Surfaces {
		if s.String() == n {
			return s
		}
	}
	return 0
}
