// Package dialect describes the inference API dialects the gateway speaks
// (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses,
// embeddings) in one table: their paths and the gateway's routes, auth
// styles and their headers, version and beta headers, error shapes and
// status mapping, stream grammar, in-band interrupt frame and usage
// reports (the gateway's one Usage type and its one parser). Everything
// that used to be a switch over the API surface or a literal in several
// files reads this table instead (TestNoDialectLiteralOutsideTable fails
// on a literal elsewhere), so adding a dialect is one entry here plus its
// converters in internal/translate.
//
// A request has a caller dialect (the path it came in on) and each attempt
// an upstream dialect (what the provider speaks); the two differ when the
// gateway translates.
package dialect

import (
	"slices"

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

// Auth styles a provider may expect (catalog.Provider.Auth and the
// configuration's providers.*.auth spell them the same way). Each but
// AuthNone names the header the key travels in (AuthHeader).
const (
	AuthBearer     = "bearer"
	AuthXAPIKey    = "x-api-key"
	AuthGoogAPIKey = "x-goog-api-key"
	AuthNone       = "none"
)

// AuthStyles lists the auth styles a provider may be configured with, in
// the order a caller's key is looked for (transport's credential).
var AuthStyles = [...]string{AuthBearer, AuthXAPIKey, AuthGoogAPIKey, AuthNone}

// AuthHeader is the request header that carries a key of auth style
// style ("" for none or an unknown style). A bearer key is the value
// "Bearer <key>"; the others carry the key alone.
func AuthHeader(style string) string {
	switch style {
	case AuthBearer:
		return "Authorization"
	case AuthXAPIKey:
		return "X-Api-Key"
	case AuthGoogAPIKey:
		return "X-Goog-Api-Key"
	}
	return ""
}

// The gateway's own routes of the dialects (the table's Route members),
// and the chat path under a base URL (the relay route, /api/v1/relay +
// PathChat, mirrors it). They are constants so the edge's route table
// (transport/edge) can name them in its own constant block and in
// constant expressions.
const (
	PathChat        = "/chat/completions"
	RouteChat       = "/v1" + PathChat
	RouteMessages   = "/v1/messages"
	RouteResponses  = "/v1/responses"
	RouteEmbeddings = "/v1/embeddings"
	// RouteCountTokens is Anthropic's token-counting route (the Messages
	// row's CountTokensRoute).
	RouteCountTokens = RouteMessages + "/count_tokens"
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
	// CountTokensPath is the token-counting endpoint under the base URL
	// and CountTokensRoute the gateway's own path for it, both "" when the
	// gateway counts no tokens in the dialect (only Anthropic's count is
	// served: POST /v1/messages/count_tokens).
	CountTokensPath  string
	CountTokensRoute string
	// Auth is the default auth header style of a provider that speaks only
	// this dialect (catalog fills providers.*.auth from it).
	Auth string
	// VersionHeader and Version: the API version header the dialect
	// requires and the version the gateway sends when the caller sent
	// none (the gateway adds it to every request to a provider of the
	// dialect, translated ones included). A caller that sends the version
	// header is taken to speak the dialect where the path does not say
	// (the edge's 404s, GET /v1/models). "" when the dialect has none.
	VersionHeader string
	Version       string
	// BetaHeader is where the dialect's SDKs name the beta features a
	// request opts into; the gateway passes it on (ForwardsTranslated
	// says when across dialects).
	BetaHeader string
	// RequestIDHeader is where this dialect's SDK reads the request id;
	// the gateway sets it beside its own X-Request-Id on answers in the
	// dialect's error format.
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
	// events whose data carries a usage report. IDEvent: the event that
	// announces the response id a later interrupt frame must repeat
	// (StreamPosition.ResponseID), "" when the frame needs none.
	NamedEvents  bool
	DoneSentinel bool
	Terminal     []string
	ErrorEvents  []string
	Startup      []string
	UsageEvents  []string
	IDEvent      string

	// Params are the top-level request fields the dialect's official API
	// reference documents (betas included), model and the message list
	// among them. A provider that validates its input (OpenAI,
	// Anthropic) refuses any other; internal/fit drops the others for
	// such a model, and the mock provider's strict mode refuses them.
	Params []string
}

// openAIBeta is the OpenAI SDKs' beta header, shared by the OpenAI
// dialects (so its values never cross a translation: ForwardsTranslated).
const openAIBeta = "Openai-Beta"

var table = [numIDs]Dialect{
	Chat: {
		ID: Chat, Name: "chat", Family: OpenAI,
		Path: PathChat, Route: RouteChat,
		Auth: AuthBearer, BetaHeader: openAIBeta, RequestIDHeader: "X-Request-Id", ErrorFormat: apierror.OpenAI,
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
		Path: "/messages", Route: RouteMessages,
		CountTokensPath: "/messages/count_tokens", CountTokensRoute: RouteCountTokens,
		Auth: AuthXAPIKey, VersionHeader: "Anthropic-Version", Version: "2023-06-01", BetaHeader: "Anthropic-Beta",
		RequestIDHeader: "Request-Id", ErrorFormat: apierror.Anthropic,
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
		Path: "/responses", Route: RouteResponses,
		Auth: AuthBearer, BetaHeader: openAIBeta, RequestIDHeader: "X-Request-Id", ErrorFormat: apierror.OpenAI,
		Translated: true, Streams: true,
		NamedEvents: true,
		Terminal:    []string{"response.completed", "response.incomplete"},
		ErrorEvents: []string{"error", "response.failed"},
		Startup: []string{"response.created", "response.in_progress", "response.queued",
			"response.output_item.added", "response.content_part.added"},
		UsageEvents: []string{"response.completed", "response.incomplete", "response.failed"},
		IDEvent:     "response.created",
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
		Path: "/embeddings", Route: RouteEmbeddings,
		Auth: AuthBearer, BetaHeader: openAIBeta, RequestIDHeader: "X-Request-Id", ErrorFormat: apierror.OpenAI,
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

// CallerHeaders are the dialects' version and beta headers (each once, in
// table order): a caller's SDK sends them for the provider, so the gateway
// passes them on (within the rule of ForwardsTranslated).
var CallerHeaders = func() []string {
	var out []string
	for _, id := range All {
		for _, h := range [...]string{table[id].VersionHeader, table[id].BetaHeader} {
			if h != "" && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}()

// ForwardsTranslated reports whether a caller's header name (canonical
// form) goes to a provider of dialect up on a call translated from another
// dialect. A header no dialect owns (User-Agent) always goes; one owned by
// exactly one dialect (Anthropic's version and beta headers) goes only to
// a provider of that dialect; one several dialects share (OpenAI-Beta)
// never, because its values name one API's betas and mean something else,
// or nothing, to the other.
func ForwardsTranslated(name string, up ID) bool {
	owners, own := 0, false
	for _, id := range All {
		d := &table[id]
		if name == d.VersionHeader || name == d.BetaHeader {
			owners++
			own = own || id == up
		}
	}
	return owners == 0 || (owners == 1 && own)
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
