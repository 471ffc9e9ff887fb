package transport

import (
	"strconv"

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

// The pipeline's own errors (the edge's are in edge/errors.go).
// Messages say what failed and what to do.
var (
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
