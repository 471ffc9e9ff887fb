package apierror

import "fmt"

// Code names one error the gateway makes. It indexes the code table
// (table), which holds everything an answer of that error is made of but
// the values of one request: the HTTP status, the OpenAI error type, the
// machine-readable code and the message (or its template). Every error
// the gateway answers with is built from a Code (New, Make), so an error
// cannot be sent without its row, and the README's list of codes is
// checked against the table (TestReadmeListsEveryCode).
type Code uint8

// The codes, in the order of the README's list.
const (
	codeNone Code = iota

	// Requests the gateway cannot take as sent.
	CodeInvalidJSON
	CodeEmptyBody
	CodeMissingModel
	CodeDuplicateField
	CodeInvalidField
	CodeUnsupportedAPIFormat
	CodeUnsupportedField
	CodeUnsupportedParameter
	CodeInvalidStrict
	CodeContextLengthExceeded
	CodeToolsNotSupported
	CodePreviousResponseNotSupported
	CodeUpstreamProtocolError
	CodeIncompleteBody
	CodeBadRequest
	CodeInvalidPriority
	CodeInvalidTimeout
	CodeInvalidRequest
	CodeMissingAPIKey
	CodeInvalidAPIKey
	CodeBudgetExceeded
	CodeModelNotAllowed
	CodeRateLimitExceeded
	CodeModelNotFound
	CodeNotFound
	CodeMethodNotAllowed
	CodeHostNotAllowed
	CodeOriginNotAllowed
	CodeRequestTimeout
	CodePayloadTooLarge

	// Operator APIs.
	CodeInvalidRoutePreview
	CodeMissingManagementKey
	CodeInvalidManagementKey
	CodeManagementKeyRequired
	CodeTooManyKeyAttempts
	CodeManagementLoopbackOnly
	CodeInvalidPolicy
	CodeInvalidKeyName
	CodeDuplicateKeyName
	CodeInvalidQuery
	CodeKeyNotFound
	CodeKeyRevoked
	CodeReadOnlyTenant
	CodeKeyStoreUnavailable
	CodeRequestLogUnavailable
	CodeServiceNotFound
	CodeNotInstalled
	CodeNotInstallable
	CodeServiceRunning
	CodeInvalidBody
	CodeInvalidTail
	CodeInvalidFilter
	CodeInvalidConfig
	CodeConfigNeedsRestart
	CodeConfigUnreadable

	// Admission, routing and the upstream.
	CodeBodyExceedsBudget
	CodeChatHistoryTooLarge
	CodeUnsupportedMediaType
	CodeTargetsExhausted
	CodeTargetsUnavailable
	CodeHeadersTooLarge
	CodeClientClosedRequest
	CodeInternalError
	CodeUpstreamUnavailable
	CodeStreamInterrupted
	CodeShuttingDown
	CodeServiceUnavailable
	CodeUpstreamBusy
	CodeChatAdmissionBusy
	CodeResourcePressure
	CodeAdmissionQueueFull
	CodeAdmissionDeadline
	CodeAdmissionOverloaded
	CodeAdmissionGlobalLimit
	CodeAdmissionLaneEvicted
	CodeAdmissionShutdown
	CodeAdmissionUnavailable
	CodeFusionQuorumNotMet
	CodeUpstreamTimeout

	// The relay route.
	CodeRelayNotEnabled
	CodeMissingRelayToken
	CodeRelayTokenExpired
	CodeBifrostUnavailable
	CodeBifrostStreamingDisabled
	CodeBadGateway

	numCodes
)

// Def is one row of the code table.
type Def struct {
	Code   string // machine-readable code (OpenAI "code", Anthropic error.code)
	Status int    // HTTP status
	// Type is the OpenAI error.type. Anthropic callers get the type of
	// the status (AnthropicType); management answers the management
	// vocabulary of the status (ManagementType).
	Type string
	// Message is the message, or its fmt template when the answer names
	// values of the request ("%s" alone: the code is used by several
	// sites, each of which says what failed in its own words).
	Message string
}

// table is the one list of the gateway's error codes.
var table = [numCodes]Def{
	CodeInvalidJSON:                  {"invalid_json", 400, "invalid_request_error", "%s"},
	CodeEmptyBody:                    {"empty_body", 400, "invalid_request_error", "request body is empty; send a JSON object with at least \"model\""},
	CodeMissingModel:                 {"missing_model", 400, "invalid_request_error", `request body has no "model" string; set "model" to one of the names listed by GET /v1/models`},
	CodeDuplicateField:               {"duplicate_field", 400, "invalid_request_error", "request body is ambiguous: %s"},
	CodeInvalidField:                 {"invalid_field", 400, "invalid_request_error", "%s"},
	CodeUnsupportedAPIFormat:         {"unsupported_api_format", 400, "invalid_request_error", "%s"},
	CodeUnsupportedField:             {"unsupported_field", 400, "invalid_request_error", "%s"},
	CodeUnsupportedParameter:         {"unsupported_parameter", 400, "invalid_request_error", "%s: %s"},
	CodeInvalidStrict:                {"invalid_strict", 400, "invalid_request_error", "X-OmniRoute-Strict must be true or false, got %q"},
	CodeContextLengthExceeded:        {"context_length_exceeded", 400, "invalid_request_error", "the prompt is about %d tokens (estimated), above the %d-token context window of every target of model %q; shorten the conversation or use a model with a larger window"},
	CodeToolsNotSupported:            {"tools_not_supported", 400, "invalid_request_error", "no target of model %q takes tools (GET /v1/models/%s shows its models); remove tools, or use a model whose targets take them"},
	CodePreviousResponseNotSupported: {"previous_response_not_supported", 400, "invalid_request_error", "%s"},
	CodeUpstreamProtocolError:        {"upstream_protocol_error", 502, "server_error", "%s"},
	CodeIncompleteBody:               {"incomplete_body", 400, "invalid_request_error", "the request body could not be read completely; resend the request"},
	CodeBadRequest:                   {"bad_request", 400, "invalid_request_error", "malformed HTTP request; check the request line and headers"},
	CodeInvalidPriority:              {"invalid_priority", 400, "invalid_request_error", "the x-omniroute-priority header must be interactive or batch"},
	CodeInvalidTimeout:               {"invalid_timeout", 400, "invalid_request_error", "the x-omniroute-timeout-ms header must be a positive whole number of milliseconds, such as 30000"},
	CodeInvalidRequest:               {"invalid_request", 400, "invalid_request_error", "cannot build the fusion judge request: %s"},
	CodeMissingAPIKey:                {"missing_api_key", 401, "authentication_error", "no API key: send Authorization: Bearer <key> or x-api-key: <key>"},
	CodeInvalidAPIKey:                {"invalid_api_key", 401, "authentication_error", "%s"},
	CodeBudgetExceeded:               {"budget_exceeded", 402, "insufficient_quota", "%s"},
	CodeModelNotAllowed:              {"model_not_allowed", 403, "permission_error", "%s"},
	CodeRateLimitExceeded:            {"rate_limit_exceeded", 429, "rate_limit_error", "%s"},
	CodeModelNotFound:                {"model_not_found", 404, "invalid_request_error", "model %q is not configured on this gateway; GET /v1/models lists the available models"},
	CodeNotFound:                     {"not_found", 404, "invalid_request_error", "%s"},
	CodeMethodNotAllowed:             {"method_not_allowed", 405, "invalid_request_error", "%s"},
	CodeHostNotAllowed:               {"host_not_allowed", 403, "permission_error", "the Host header %s is not a name of this gateway (DNS rebinding defence); call it by IP address or localhost, or add the name to OMNIROUTE_ALLOWED_HOSTS"},
	CodeOriginNotAllowed:             {"origin_not_allowed", 403, "permission_error", "requests from %s are not allowed (browser request forgery defence); add the origin to OMNIROUTE_CORS_ORIGINS to let a browser app call the gateway"},
	CodeRequestTimeout:               {"request_timeout", 408, "invalid_request_error", "%s"},
	CodePayloadTooLarge:              {"payload_too_large", 413, "invalid_request_error", "%s"},

	CodeInvalidRoutePreview:    {"invalid_route_preview", 400, "invalid_request_error", "%s"},
	CodeMissingManagementKey:   {"missing_management_key", 401, "authentication_error", "management routes need Authorization: Bearer <OMNIROUTE_MANAGEMENT_KEY>"},
	CodeInvalidManagementKey:   {"invalid_management_key", 401, "authentication_error", "%s"},
	CodeManagementKeyRequired:  {"management_key_required", 401, "authentication_error", "management routes from another machine need a key: set OMNIROUTE_MANAGEMENT_KEY on the gateway and send it as Authorization: Bearer <key>"},
	CodeTooManyKeyAttempts:     {"too_many_key_attempts", 429, "rate_limit_error", "%s"},
	CodeManagementLoopbackOnly: {"management_loopback_only", 403, "permission_error", "management routes answer only loopback callers while OMNIROUTE_MANAGEMENT_KEY is unset; set it and send it as a bearer token"},
	CodeInvalidPolicy:          {"invalid_policy", 400, "invalid_request_error", "%s"},
	CodeInvalidKeyName:         {"invalid_key_name", 400, "invalid_request_error", "name %q: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"},
	CodeDuplicateKeyName:       {"duplicate_key_name", 400, "invalid_request_error", "%s"},
	CodeInvalidQuery:           {"invalid_query", 400, "invalid_request_error", "%s: %s"},
	CodeKeyNotFound:            {"key_not_found", 404, "not_found_error", "%s"},
	CodeKeyRevoked:             {"key_revoked", 409, "invalid_request_error", "%s"},
	CodeReadOnlyTenant:         {"read_only_tenant", 409, "invalid_request_error", "%q is a config-file tenant; change it in the config file and reload it (SIGHUP or POST /api/config/reload)"},
	CodeKeyStoreUnavailable:    {"key_store_unavailable", 503, "server_error", "%s"},
	CodeRequestLogUnavailable:  {"request_log_unavailable", 503, "server_error", "%s; retry"},
	CodeServiceNotFound:        {"service_not_found", 404, "not_found_error", "Service '%s' not found; GET /api/services lists the configured services"},
	CodeNotInstalled:           {"not_installed", 409, "invalid_request_error", "%s is not installed; install its program, then POST /api/services/%s/install"},
	CodeNotInstallable:         {"not_installable", 409, "invalid_request_error", "%s"},
	CodeServiceRunning:         {"service_running", 409, "invalid_request_error", "%s is %s; stop it first"},
	CodeInvalidBody:            {"invalid_body", 400, "invalid_request_error", "%s"},
	CodeInvalidTail:            {"invalid_tail", 400, "invalid_request_error", "tail must be a whole number from 0 to %d (default %d)"},
	CodeInvalidFilter:          {"invalid_filter", 400, "invalid_request_error", "filter exceeds maximum length of %d characters"},
	CodeInvalidConfig:          {"invalid_config", 422, "invalid_request_error", "the config file is invalid; the running config stays. Fix the errors listed and reload again"},
	CodeConfigNeedsRestart:     {"config_needs_restart", 409, "invalid_request_error", "the gateway cannot apply a config without a restart (see errors); the running config stays. Restart the gateway to use it"},
	CodeConfigUnreadable:       {"config_unreadable", 503, "server_error", "the config file cannot be read; the running config stays"},

	CodeBodyExceedsBudget:    {"body_exceeds_budget", 413, "payload_too_large", "Request body exceeds the chat ingest budget (max %d MB)."},
	CodeChatHistoryTooLarge:  {"chat_history_too_large", 413, "payload_too_large", "Chat history exceeds the %d-message limit; compact the conversation and retry."},
	CodeUnsupportedMediaType: {"unsupported_media_type", 415, "invalid_request_error", "%s"},
	CodeTargetsExhausted:     {"targets_exhausted", 429, "rate_limit_error", "every target of model %q is rate limited, out of quota or over its token budget (or failed); the earliest recovers in %ss, retry after that (GET /api/omniroute/quota shows why)"},
	CodeTargetsUnavailable:   {"targets_unavailable", 503, "server_error", "every target of model %q failed at its provider and is cooling down; the earliest is tried again in %ss, retry after that (GET /api/omniroute/quota shows why)"},
	CodeHeadersTooLarge:      {"headers_too_large", 431, "invalid_request_error", "request headers are too large; send fewer or shorter headers"},
	CodeClientClosedRequest:  {"client_closed_request", 499, "invalid_request_error", "the client closed the connection while waiting for admission"},
	CodeInternalError:        {"internal_error", 500, "server_error", "%s"},
	CodeUpstreamUnavailable:  {"upstream_unavailable", 502, "server_error", "no upstream target of model %q could be reached (%s); retry later"},
	CodeStreamInterrupted:    {"stream_interrupted", 502, "server_error", "%s"},
	CodeShuttingDown:         {"shutting_down", 503, "server_error", "%s"},
	CodeServiceUnavailable:   {"service_unavailable", 503, "server_error", "model %q is served by the supervised service %q, which is %s; the gateway sends prompts only to a service it started itself and that passes its health check. Start it (POST /api/services/%s/start) or retry once it is back"},
	CodeUpstreamBusy:         {"upstream_busy", 503, "server_error", "every upstream connection of model %q is busy; retry shortly, or raise OMNIROUTE_UPSTREAM_MAX_CONNS or the connection's max_conns"},
	CodeChatAdmissionBusy:    {"chat_admission_busy", 503, "server_error", "%s"},
	CodeResourcePressure:     {"resource_pressure", 503, "server_error", "Service temporarily unavailable due to resource pressure. Retry shortly."},
	CodeAdmissionQueueFull:   {"admission_queue_full", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeAdmissionDeadline:    {"admission_deadline", 503, "server_error", "%s"},
	CodeAdmissionOverloaded:  {"admission_overloaded", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeAdmissionGlobalLimit: {"admission_global_limit", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeAdmissionLaneEvicted: {"admission_lane_evicted", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeAdmissionShutdown:    {"admission_shutdown", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeAdmissionUnavailable: {"admission_unavailable", 503, "server_error", "Service temporarily unavailable: %s"},
	CodeFusionQuorumNotMet:   {"fusion_quorum_not_met", 503, "server_error", "only %d of %d fusion panel members of model %q answered (%d failed, %d skipped); the quorum is %d; retry after the Retry-After delay"},
	CodeUpstreamTimeout:      {"upstream_timeout", 504, "server_error", "no upstream target of model %q answered in time; retry later or raise OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS"},

	CodeRelayNotEnabled:          {"relay_not_enabled", 404, "invalid_request_error", "the relay route is not enabled on this gateway: add relay.tokens to the config file"},
	CodeMissingRelayToken:        {"missing_relay_token", 401, "authentication_error", "no relay token: send Authorization: Bearer <relay token>"},
	CodeRelayTokenExpired:        {"relay_token_expired", 401, "authentication_error", "relay token %q expired at %s; ask the gateway operator for a new one"},
	CodeBifrostUnavailable:       {"bifrost_unavailable", 503, "server_error", "OMNIROUTE_RELAY_BACKEND forces bifrost but %s"},
	CodeBifrostStreamingDisabled: {"bifrost_streaming_disabled", 503, "server_error", "OMNIROUTE_RELAY_BACKEND forces bifrost but streaming through Bifrost is disabled (BIFROST_STREAMING_ENABLED=0); send stream:false or enable it"},
	CodeBadGateway:               {"bad_gateway", 502, "server_error", "the Bifrost relay failed: %s; retry, or set OMNIROUTE_RELAY_BACKEND=auto to fall back to the native pipeline"},
}

// Codes lists every code in table order, for docs and tests.
func Codes() []Code {
	out := make([]Code, 0, numCodes-1)
	for c := codeNone + 1; c < numCodes; c++ {
		out = append(out, c)
	}
	return out
}

// Def returns c's row.
func (c Code) Def() Def { return table[c] }

// String is the machine-readable code.
func (c Code) String() string { return table[c].Code }

// Status is the HTTP status of c.
func (c Code) Status() int { return table[c].Status }

// InvalidJSONPrefix begins every message about a request body that is not
// valid JSON; the detail (the parser's error) follows it.
const InvalidJSONPrefix = "request body is not valid JSON: "

// InvalidJSON is the 400 invalid_json answer to a request body that is not
// valid JSON, detail saying where (the pipeline's scan, the fitter's
// reader; the translator builds its own error with the same prefix).
func InvalidJSON(detail string) *Error { return New(CodeInvalidJSON, InvalidJSONPrefix+detail) }

// New builds an error of code c. Without args its message is the table's
// message as written; with args the table's message is a fmt template
// they fill in. Set the per-request fields (Retry, WithReason, WithParam)
// on the result.
func New(c Code, args ...any) *Error {
	e := Make(c, table[c].Message)
	if len(args) > 0 {
		if m, ok := args[0].(string); ok && len(args) == 1 && e.Message == "%s" {
			e.Message = m // the site's own words: no formatting, no copy
		} else {
			e.Message = fmt.Sprintf(e.Message, args...)
		}
	}
	return &e
}

// Make is an error value of code c with message msg, built without
// allocating, for a hot path that holds its own messages in a table of
// refusal reasons (tenant limits) and for errors built once.
func Make(c Code, msg string) Error {
	d := &table[c]
	return Error{Status: d.Status, Type: d.Type, Code: d.Code, Message: msg}
}

// Retry sets Retry-After (whole seconds) and returns e.
func (e *Error) Retry(seconds int) *Error {
	e.RetryAfter = seconds
	return e
}

// WithReason sets the machine-readable reason and returns e.
func (e *Error) WithReason(reason string) *Error {
	e.Reason = reason
	return e
}

// WithParam names the request field the error is about and returns e.
func (e *Error) WithParam(param string) *Error {
	e.Param = param
	return e
}

// ManagementType is the error type of the management answers (the
// operator APIs' vocabulary, which the reference gateway's clients read)
// for a status.
func ManagementType(status int) string {
	switch {
	case status >= 500:
		return "server_error"
	case status == 404:
		return "not_found"
	case status == 409:
		return "conflict"
	}
	return "invalid_request"
}
