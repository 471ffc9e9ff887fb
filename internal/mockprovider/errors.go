package mockprovider

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
)

// family is the wire dialect of an endpoint; it decides error shapes.
type family uint8

const (
	familyOpenAI family = iota
	familyAnthropic
)

// errInfo is one error in family-neutral form.
type errInfo struct {
	status int
	code   string // FailSpec.Code override ("" = derived from status)
	msg    string
	param  string // the request field it is about (OpenAI "param"; "" = null)
}

// openAIErrorKind returns the OpenAI error "type" and "code" for a status, as
// the real API does: 429 is rate_limit_exceeded unless a code such as
// insufficient_quota is configured, in which case type and code are both it.
func openAIErrorKind(status int, code string) (typ, cod string) {
	switch {
	case status == 429:
		if code != "" {
			return code, code
		}
		return "rate_limit_exceeded", "rate_limit_exceeded"
	case status == 401:
		typ, cod = "invalid_request_error", "invalid_api_key"
	case status == 403:
		typ, cod = "invalid_request_error", "permission_denied"
	case status == 404:
		typ, cod = "invalid_request_error", "model_not_found"
	case status >= 500:
		typ, cod = "server_error", "server_error"
	default:
		typ, cod = "invalid_request_error", "invalid_request_error"
	}
	if code != "" {
		cod = code
	}
	return typ, cod
}

// anthropicErrorType returns the Anthropic error "type" for a status.
func anthropicErrorType(status int, code string) string {
	if code != "" {
		return code
	}
	return apierror.AnthropicType(status)
}

// appendOpenAIErrorObject renders {"message":…,"type":…,"code":…,"param":null}.
func appendOpenAIErrorObject(dst []byte, e errInfo) []byte {
	typ, code := openAIErrorKind(e.status, e.code)
	dst = append(dst, `{"message":`...)
	dst = appendJSONString(dst, e.msg)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, typ)
	dst = append(dst, `,"code":`...)
	dst = appendJSONString(dst, code)
	if e.param == "" {
		return append(dst, `,"param":null}`...)
	}
	dst = append(dst, `,"param":`...)
	dst = appendJSONString(dst, e.param)
	return append(dst, '}')
}

// appendErrorBody renders a whole error response body for the family.
func appendErrorBody(dst []byte, f family, e errInfo) []byte {
	if f == familyAnthropic {
		return appendAnthropicError(dst, e)
	}
	dst = append(dst, `{"error":`...)
	dst = appendOpenAIErrorObject(dst, e)
	return append(dst, '}')
}

// appendAnthropicError renders {"type":"error","error":{"type":…,"message":…}},
// which is both the HTTP error body and the data of an SSE "error" event.
func appendAnthropicError(dst []byte, e errInfo) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = appendJSONString(dst, anthropicErrorType(e.status, e.code))
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.msg)
	return append(dst, `}}`...)
}

// statusMessage is the human-readable message of an injected error.
func statusMessage(status int) string {
	switch status {
	case 429:
		return "mockprovider: rate limit reached (injected)"
	case 529:
		return "mockprovider: overloaded (injected)"
	default:
		return "mockprovider: injected failure with status " + strconv.Itoa(status)
	}
}
