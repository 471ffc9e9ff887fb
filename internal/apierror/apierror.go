// Package apierror renders the errors the gateway itself produces in the
// caller's API dialect, so an OpenAI SDK sees {"error":{...}} and an
// Anthropic SDK sees {"type":"error","error":{...}} and each reports the
// message instead of a decoding failure.
//
// Rendering is hand-written (no reflection, no allocation beyond dst) because
// rejections are on the overload path, where the gateway must stay cheap.
package apierror

import (
	"strconv"
	"unicode/utf8"
)

// Format is the error dialect.
type Format uint8

// The dialects.
const (
	OpenAI Format = iota
	Anthropic
)

// Error is one gateway-made error.
type Error struct {
	Status int
	// Type is the OpenAI "type" (invalid_request_error, authentication_error,
	// permission_error, not_found_error, rate_limit_error, server_error).
	Type string
	// AnthropicType is the Anthropic error.type; derived from Status when "".
	AnthropicType string
	// Code is the machine-readable code (OpenAI "code"; also sent to
	// Anthropic callers as error.code).
	Code    string
	Message string
	// RetryAfter, in whole seconds, is sent as Retry-After when > 0.
	RetryAfter int
	// Reason refines Code with a machine-readable reason (for example the
	// admission shed reason); rendered as "reason" when set.
	Reason string
	// Param names the request field the error is about (OpenAI's
	// "param"; Anthropic callers find it in the message).
	Param string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func (e *Error) anthropicType() string {
	if e.AnthropicType != "" {
		return e.AnthropicType
	}
	return AnthropicType(e.Status)
}

// AnthropicType maps a status to the Anthropic error type vocabulary
// (the one table of it: gateway errors, translated upstream errors and the
// mock provider all use it).
func AnthropicType(status int) string { return statusType(status, Anthropic) }

// statusTypes is the one table of both dialects' error types by status,
// side by side; a status not in it takes its class's (statusType).
var statusTypes = [...]struct {
	status            int
	openAI, anthropic string
}{
	{401, "authentication_error", "authentication_error"},
	{402, "invalid_request_error", "billing_error"},
	{403, "permission_error", "permission_error"},
	{404, "not_found_error", "not_found_error"},
	{413, "invalid_request_error", "request_too_large"},
	{429, "rate_limit_error", "rate_limit_error"},
	{503, "server_error", "overloaded_error"},
	{504, "server_error", "timeout_error"},
	{529, "server_error", "overloaded_error"},
}

// statusType is the error type format f gives status: its statusTypes
// entry, else the server or the request class's.
func statusType(status int, f Format) string {
	for _, e := range statusTypes {
		if e.status == status {
			if f == Anthropic {
				return e.anthropic
			}
			return e.openAI
		}
	}
	switch {
	case status < 500:
		return "invalid_request_error"
	case f == Anthropic:
		return "api_error"
	}
	return "server_error"
}

// Append renders e in format f onto dst.
func (e *Error) Append(dst []byte, f Format, requestID string) []byte {
	if f == Anthropic {
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = AppendString(dst, e.anthropicType())
		dst = append(dst, `,"message":`...)
		dst = AppendString(dst, e.Message)
		if e.Code != "" {
			dst = append(dst, `,"code":`...)
			dst = AppendString(dst, e.Code)
		}
		if e.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = AppendString(dst, e.Reason)
		}
		dst = append(dst, '}')
		if requestID != "" {
			dst = append(dst, `,"request_id":`...)
			dst = AppendString(dst, requestID)
		}
		return append(dst, '}')
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = AppendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	t := e.Type
	if t == "" {
		t = statusType(e.Status, OpenAI)
	}
	dst = AppendString(dst, t)
	if e.Param == "" {
		dst = append(dst, `,"param":null,"code":`...)
	} else {
		dst = append(dst, `,"param":`...)
		dst = AppendString(dst, e.Param)
		dst = append(dst, `,"code":`...)
	}
	if e.Code == "" {
		dst = append(dst, "null"...)
	} else {
		dst = AppendString(dst, e.Code)
	}
	if e.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = AppendString(dst, e.Reason)
	}
	return append(dst, "}}"...)
}

// AppendString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD so the output is always valid JSON. It takes bytes as well as
// strings so a caller holding []byte (a tool call's argument JSON, say)
// escapes it without converting, which would copy.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeRune is utf8.DecodeRune for either byte form; the bytes of one rune
// are copied to the stack so neither form is converted.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	var b [utf8.UTFMax]byte
	n := copy(b[:], s[:min(len(s), utf8.UTFMax)])
	return utf8.DecodeRune(b[:n])
}

// AppendInt appends n in decimal.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
