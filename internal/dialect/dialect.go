// Package dialect describes the inference API dialects the gateway speaks
// (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses) in one
// table: their paths, default auth style, error shapes and status mapping,
// stream grammar, in-band interrupt frame and usage reports. Everything
// that used to be a switch over the API surface in several files reads
// this table instead, so adding a dialect is one entry here plus its
// converters in internal/translate.
//
// A request has a caller dialect (the path it came in on) and each attempt
// an upstream dialect (what the provider speaks); the two differ when the
// gateway translates.
package dialect

import (
	"github.com/omniroute/gateway/internal/apierror"
)

// ID names a dialect. The values equal catalog.Surface's (a test holds
// them together), so catalog can switch to this table without renumbering.
type ID uint8

// The dialects.
const (
	Chat ID = iota + 1
	Messages
	Responses
	Embeddings
	numIDs
)

// All lists every dialect in table order.
var All = [...]ID{Chat, Messages, Responses, Embeddings}

// Translated lists the dialects internal/translate converts between, in
// table order (those whose entry sets Translated).
var Translated = func() []ID {
	var out []ID
	for _, id := range All {
		if table[id].Translated {
			out = append(out, id)
		}
	}
	return out
}()

// Family groups dialects of one vendor: fields such as reasoning effort
// pass between dialects of a family unchanged.
type Family uint8

// The families.
const (
	OpenAI Family = iota + 1
	Anthropic
)

// Auth styles a provider may expect (catalog.Provider.Auth spells them the
// same way).
const (
	AuthBearer  = "bearer"
	AuthXAPIKey = "x-api-key"
)

// Dialect is one API dialect.
type Dialect struct {
	ID ID
	// Name is the config name (providers.*.apis), the metric label and the
	// name in error messages.
	Name   string
	Family Family
	// Path is the request path under a provider's base URL; Route is the
	// gateway's own path for it.
	Path  string
	Route string
	// CountTokensPath is the token-counting endpoint under the base URL, ""
	// when the dialect has none.
	CountTokensPath string
	// Auth is the default auth header style of a provider that speaks only
	// this dialect.
	Auth string
	// Headers are request headers the dialect requires; the gateway adds
	// them to a translated request whose caller did not send them.
	Headers [][2]string
	// RequestIDHeader is where this dialect's SDK reads the request id.
	RequestIDHeader string
	// ErrorFormat is the shape of error bodies.
	ErrorFormat apierror.Format
	// Translated: internal/translate converts from and to the dialect, so
	// a call in it may go to a provider speaking another translated
	// dialect. A dialect without converters (embeddings: no other API has
	// them) is routed only to providers that speak it.
	Translated bool
	// Streams: the dialect has a streaming form, described by the grammar
	// below (unused when false).
	Streams bool

	// Stream grammar.
	//
	// NamedEvents: every frame carries an "event:" line (anthropic-sdk-go
	// skips frames without one). DoneSentinel: "data: [DONE]" ends the
	// stream. Terminal: event names that complete it. ErrorEvents: event
	// names that carry an error in-band (chat marks errors with a top-level
	// "error" key instead). Startup: content-free opening events a relay
	// may hold back to fail over on an error that follows them. UsageEvents:
	// events whose data carries a usage report.
	NamedEvents  bool
	DoneSentinel bool
	Terminal     []string
	ErrorEvents  []string
	Startup      []string
	UsageEvents  []string

	// Params are the top-level request fields the dialect's official API
	// reference documents (betas included), model and the message list
	// among them. A provider that validates its input (OpenAI,
	// Anthropic) refuses any other; internal/fit drops the others for
	// such a model, and the mock provider's strict mode refuses them.
	Params []string
}

var table = [numIDs]Dialect{
	Chat: {
		ID: Chat, Name: "chat", Family: OpenAI,
		Path: "/chat/completions", Route: "/v1/chat/completions",
		Auth: AuthBearer, RequestIDHeader: "x-request-id", ErrorFormat: apierror.OpenAI,
		Translated: true, Streams: true,
		DoneSentinel: true,
		// platform.openai.com/docs/api-reference/chat/create
		Params: []string{"model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
			"logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls",
			"prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort",
			"response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream", "stream_options",
			"temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options"},
	},
	Messages: {
		ID: Messages, Name: "messages", Family: Anthropic,
		Path: "/messages", Route: "/v1/messages", CountTokensPath: "/messages/count_tokens",
		Auth: AuthXAPIKey, Headers: [][2]string{{"anthropic-version", "2023-06-01"}},
		RequestIDHeader: "request-id", ErrorFormat: apierror.Anthropic,
		Translated: true, Streams: true,
		NamedEvents: true,
		Terminal:    []string{"message_stop"},
		ErrorEvents: []string{"error"},
		Startup:     []string{"message_start", "ping", "content_block_start"},
		UsageEvents: []string{"message_start", "message_delta"},
		// docs.anthropic.com/en/api/messages, with the fields of the betas
		// Claude Code sends (context management, MCP connectors, effort,
		// structured outputs, fast mode).
		Params: []string{"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
			"temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "service_tier", "container",
			"context_management", "mcp_servers", "output_config", "output_format", "inference_geo", "speed"},
	},
	Responses: {
		ID: Responses, Name: "responses", Family: OpenAI,
		Path: "/responses", Route: "/v1/responses", CountTokensPath: "/responses/input_tokens",
		Auth: AuthBearer, RequestIDHeader: "x-request-id", ErrorFormat: apierror.OpenAI,
		Translated: true, Streams: true,
		NamedEvents: true,
		Terminal:    []string{"response.completed", "response.incomplete"},
		ErrorEvents: []string{"error", "response.failed"},
		Startup: []string{"response.created", "response.in_progress", "response.queued",
			"response.output_item.added", "response.content_part.added"},
		UsageEvents: []string{"response.completed", "response.incomplete", "response.failed"},
		// platform.openai.com/docs/api-reference/responses/create, and
		// client_metadata, which Codex sends every turn.
		Params: []string{"model", "input", "background", "client_metadata", "conversation", "include", "instructions", "max_output_tokens",
			"max_tool_calls", "metadata", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
			"prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options",
			"temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user"},
	},
	// OpenAI embeddings (POST /v1/embeddings): passed through to providers
	// that list "embeddings" in their apis; never translated or streamed.
	Embeddings: {
		ID: Embeddings, Name: "embeddings", Family: OpenAI,
		Path: "/embeddings", Route: "/v1/embeddings",
		Auth: AuthBearer, RequestIDHeader: "x-request-id", ErrorFormat: apierror.OpenAI,
		Params: []string{"model", "input", "dimensions", "encoding_format", "user"},
	},
}

// Of returns the dialect id names. It panics on an id outside the table,
// which is a programming error.
func Of(id ID) *Dialect {
	if id == 0 || id >= numIDs {
		panic("dialect: unknown id")
	}
	return &table[id]
}

// Valid reports whether id names a dialect.
func (id ID) Valid() bool { return id > 0 && id < numIDs }

// String returns the dialect's name.
func (id ID) String() string {
	if !id.Valid() {
		return "unknown"
	}
	return table[id].Name
}

// ByName finds a dialect by its config name.
func ByName(name string) (ID, bool) {
	for _, id := range All {
		if table[id].Name == name {
			return id, true
		}
	}
	return 0, false
}

// ByRoute finds the dialect whose gateway route is path.
func ByRoute(path []byte) (ID, bool) {
	for _, id := range All {
		if table[id].Route == string(path) {
			return id, true
		}
	}
	return 0, false
}

// Accepts reports whether the dialect's API documents the top-level
// request field name.
func (d *Dialect) Accepts(name []byte) bool {
	for _, p := range d.Params {
		if p == string(name) {
			return true
		}
	}
	return false
}

// Efforts is the reasoning effort scale, lowest first: OpenAI's
// reasoning_effort values and Anthropic's output_config.effort values
// merged into one ordered list (internal/translate's Effort counts along
// it; model tables name the levels a model takes from it).
var Efforts = [...]string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// SameFamily reports whether a and b are dialects of one vendor.
func SameFamily(a, b ID) bool { return Of(a).Family == Of(b).Family }
