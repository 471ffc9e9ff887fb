package mockprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Behavior describes how the mock answers requests for one model (or, as the
// default, for every model without its own entry). The zero value answers
// immediately with the default text in 5 stream chunks. JSON field names are
// snake_case so behaviours can be written by hand on the command line.
type Behavior struct {
	// LatencyMS delays a non-stream response, or the first event of a stream
	// (time to first token). The wait notices departed clients.
	LatencyMS int `json:"latency_ms,omitempty"`
	// ChunkCount is the number of content deltas in a stream (default 5).
	ChunkCount int `json:"chunk_count,omitempty"`
	// ChunkGapMS is slept before every content delta but the first and before
	// the closing events, so a stream lasts about LatencyMS+ChunkCount*ChunkGapMS.
	ChunkGapMS int `json:"chunk_gap_ms,omitempty"`
	// Text is the reply, split across the chunks by runes; empty means a
	// deterministic default sentence.
	Text string `json:"text,omitempty"`
	// CompletionTokens is the reported completion usage; 0 means ChunkCount.
	CompletionTokens int `json:"completion_tokens,omitempty"`
	// CachedTokens is how many of the prompt tokens the OpenAI answers
	// report as cached (prompt_tokens_details.cached_tokens, or the
	// Responses API's input_tokens_details.cached_tokens); at most the
	// prompt tokens.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// Slots caps the requests of one model served at once; 0 is unlimited.
	Slots int `json:"slots,omitempty"`
	// OverSlots is what happens to a request that finds every slot taken:
	// "queue" (default; wait for a slot, which gives a sharp latency knee) or
	// "reject" (429 with Retry-After: 1).
	OverSlots string `json:"over_slots,omitempty"`
	// Fail injects a failure; see FailSpec.
	Fail FailSpec `json:"fail,omitzero"`
	// RateLimit emits rate-limit headers in one provider's style.
	RateLimit RateLimitSpec `json:"rate_limit,omitzero"`
	// LatencyJitterMS adds a uniformly random 0..LatencyJitterMS to each
	// request's latency, so completions of a saturated model spread out as
	// real answers of varying length do, instead of arriving in lockstep.
	LatencyJitterMS int `json:"latency_jitter_ms,omitempty"`
	// Tool scripts a tool loop (tools.go): a call to the named tool, then
	// a reply quoting its result.
	Tool *ToolScript `json:"tool,omitempty"`
	// Strict refuses what the real provider of the requested model
	// refuses (strict.go), with its status and error; a model the model
	// table does not know is not checked.
	Strict bool `json:"strict,omitempty"`
}

// Fail modes. The stream-only modes answer a non-stream request as Mode
// "status" (error_event) or with a body cut short by a closed connection
// (truncate), so a misconfigured test still sees a failure.
const (
	FailNone       = ""
	FailStatus     = "status"      // answer Status with an error body of the endpoint's family
	FailHang       = "hang"        // never answer; ends when the client leaves or the server closes
	FailReset      = "reset"       // abort the TCP connection with RST (SO_LINGER 0)
	FailErrorEvent = "error_event" // stream: 200, AfterChunks deltas, then an in-band error event
	FailTruncate   = "truncate"    // stream: AfterChunks deltas, then a clean end with no terminal event
)

// FailSpec injects one failure mode.
type FailSpec struct {
	Mode string `json:"mode,omitempty"`
	// Status is the HTTP status for "status" (default 500) and picks the error
	// type of "error_event" (default 529: overloaded/server error).
	Status int `json:"status,omitempty"`
	// RetryAfter is sent verbatim as Retry-After ("5", or an HTTP date).
	RetryAfter string `json:"retry_after,omitempty"`
	// RetryAfterMS is sent as retry-after-ms when > 0.
	RetryAfterMS int `json:"retry_after_ms,omitempty"`
	// Code overrides the error code (OpenAI "code", and "type" on a 429 such
	// as insufficient_quota) or the Anthropic error type.
	Code string `json:"code,omitempty"`
	// Body replaces the generated error body verbatim (status mode).
	Body string `json:"body,omitempty"`
	// Headers are added to the failing response.
	Headers map[string]string `json:"headers,omitempty"`
	// AfterChunks is how many content deltas a stream delivers before a
	// reset, error_event or truncate. The content-free opening events (role
	// delta, message_start…, response.created…) always go first; a negative
	// value fails before them: reset before the headers, error_event as the
	// first event, truncate with an empty body.
	AfterChunks int `json:"after_chunks,omitempty"`
	// Times fails only the first N requests that use this behaviour, then
	// behaves normally; 0 fails every request. Setting a behaviour restarts
	// the count.
	Times int `json:"times,omitempty"`
}

// Rate-limit header families.
const (
	FamilyOpenAI    = "openai"
	FamilyGroq      = "groq"
	FamilyAzure     = "azure"
	FamilyAnthropic = "anthropic"
	FamilyTogether  = "together"
	FamilyMistral   = "mistral"
)

// RateLimitSpec emits rate-limit headers in one provider family's style on
// every response of the model, success or error. Remaining counts go down by
// one request and by P+C tokens (P for an error) per request inside a window
// that refills WindowMS after its first request.
type RateLimitSpec struct {
	Family        string `json:"family,omitempty"`
	LimitRequests int    `json:"limit_requests,omitempty"` // default 1000
	LimitTokens   int    `json:"limit_tokens,omitempty"`   // default 100000
	WindowMS      int    `json:"window_ms,omitempty"`      // default 60000
	// RemainingRequests and RemainingTokens pin the remaining values (e.g. 0,
	// or -1 to emit "-1" as Azure sometimes does) instead of counting down.
	RemainingRequests *int `json:"remaining_requests,omitempty"`
	RemainingTokens   *int `json:"remaining_tokens,omitempty"`
	// Enforce answers 429 (with Retry-After until the window refills) once a
	// window's requests or tokens are used up, instead of only reporting.
	Enforce bool `json:"enforce,omitempty"`
}

// BehaviorUpdate is the body of POST /_mock/behavior. Without Replace, Models
// are merged over the existing per-model entries; with Replace they replace
// them. A nil Default keeps the current default.
type BehaviorUpdate struct {
	Default *Behavior           `json:"default,omitempty"`
	Models  map[string]Behavior `json:"models,omitempty"`
	Replace bool                `json:"replace,omitempty"`
	// AfterMS applies the update that many milliseconds from now instead of
	// at once (a capacity or latency step, or the end of an incident, at a
	// planned moment); the call returns when it is scheduled.
	AfterMS int `json:"after_ms,omitempty"`
}

// ParseBehavior decodes a Behavior from JSON, rejecting unknown fields so a
// misspelt knob fails loudly instead of being ignored.
func ParseBehavior(data []byte) (Behavior, error) {
	var b Behavior
	if err := strictUnmarshal(data, &b); err != nil {
		return Behavior{}, fmt.Errorf("parse behavior: %w", err)
	}
	if err := b.Validate(); err != nil {
		return Behavior{}, err
	}
	return b, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

// Validate reports the first setting the mock cannot honour.
func (b Behavior) Validate() error {
	switch {
	case b.LatencyMS < 0, b.ChunkCount < 0, b.ChunkGapMS < 0, b.CompletionTokens < 0, b.CachedTokens < 0, b.Slots < 0, b.LatencyJitterMS < 0:
		return fmt.Errorf("invalid behavior: latency_ms, latency_jitter_ms, chunk_count, chunk_gap_ms, completion_tokens and slots must not be negative")
	case b.ChunkCount > 100000:
		return fmt.Errorf("invalid behavior: chunk_count %d exceeds 100000", b.ChunkCount)
	}
	switch b.OverSlots {
	case "", "queue", "reject":
	default:
		return fmt.Errorf("invalid behavior: over_slots %q (want queue or reject)", b.OverSlots)
	}
	switch b.Fail.Mode {
	case FailNone, FailStatus, FailHang, FailReset, FailErrorEvent, FailTruncate:
	default:
		return fmt.Errorf("invalid behavior: fail.mode %q (want status, hang, reset, error_event or truncate)", b.Fail.Mode)
	}
	if b.Fail.Status != 0 && (b.Fail.Status < 200 || b.Fail.Status > 599) {
		return fmt.Errorf("invalid behavior: fail.status %d is not an HTTP status", b.Fail.Status)
	}
	if b.Fail.Times < 0 || b.Fail.RetryAfterMS < 0 {
		return fmt.Errorf("invalid behavior: fail.times and fail.retry_after_ms must not be negative")
	}
	switch b.RateLimit.Family {
	case "", FamilyOpenAI, FamilyGroq, FamilyAzure, FamilyAnthropic, FamilyTogether, FamilyMistral:
	default:
		return fmt.Errorf("invalid behavior: rate_limit.family %q (want openai, groq, azure, anthropic, together or mistral)", b.RateLimit.Family)
	}
	if b.RateLimit.LimitRequests < 0 || b.RateLimit.LimitTokens < 0 || b.RateLimit.WindowMS < 0 {
		return fmt.Errorf("invalid behavior: rate_limit limits and window_ms must not be negative")
	}
	if b.Tool != nil {
		return b.Tool.validate()
	}
	return nil
}

// maxAfterMS bounds BehaviorUpdate.AfterMS (one hour).
const maxAfterMS = 3_600_000

// Validate checks every behaviour in the update.
func (u BehaviorUpdate) Validate() error {
	if u.AfterMS < 0 || u.AfterMS > maxAfterMS {
		return fmt.Errorf("invalid behavior update: after_ms %d must be between 0 and %d", u.AfterMS, maxAfterMS)
	}
	if u.Default != nil {
		if err := u.Default.Validate(); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	for name, b := range u.Models {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("model %q: %w", name, err)
		}
	}
	return nil
}
