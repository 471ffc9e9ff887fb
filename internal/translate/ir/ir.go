// Package ir is the internal representation (IR) the translators of
// internal/translate read every dialect into and write every dialect out
// of, so three dialects need a reader and a writer each (for requests in
// internal/translate, for answers and streams in internal/translate/answer)
// instead of one converter per pair. It also holds the JSON writer both
// sides write with and the encodings by which one dialect's state rides
// in another's fields (carry.go).
//
// String values are kept as "raw strings": the bytes between the quotes of
// a JSON string literal as received, escapes intact. Copying one into
// output needs only the quotes back, never an unescape and re-escape, and
// it is valid JSON because the walk that found it validated it. nil means
// absent; a non-nil empty slice is the empty string. Raw values (schemas,
// numbers, cache_control objects) alias the caller's body too.
package ir

import (
	"strings"

	"github.com/omniroute/gateway/internal/dialect"
)

// Kind is the kind of a content part.
type Kind uint8

// The part kinds.
const (
	KindText       Kind = iota + 1 // Text
	KindImage                      // Src, MediaType, Data, Detail
	KindDocument                   // Src, MediaType, Data, Filename
	KindToolCall                   // ID, Name, Args
	KindToolResult                 // ID, Result (nested parts), IsError
	KindReasoning                  // Text, Sig, Origin, ID, Redacted
)

// Source says where a media part's bytes are.
type Source uint8

// The sources.
const (
	SrcURL    Source = iota + 1 // Data is a URL
	SrcBase64                   // Data is the base64 payload, MediaType its type
	SrcFile                     // Data is a provider's file id
	SrcText                     // Data is the document's plain text
)

// Span is a range of Request.Parts (or Response.Parts).
type Span struct{ Lo, Hi int32 }

// Len is the number of parts in the span.
func (s Span) Len() int { return int(s.Hi - s.Lo) }

// Part is one piece of content.
type Part struct {
	Kind Kind
	// Text is the text of a text part or the thinking text (or joined
	// reasoning summary) of a reasoning part.
	Text []byte
	// Cache is an Anthropic cache_control object, raw.
	Cache []byte

	Src       Source
	MediaType []byte
	Data      []byte
	Detail    []byte // OpenAI image detail
	Filename  []byte

	// ID is a tool call's id (the id a result refers back to) or a
	// Responses reasoning item's id.
	ID   []byte
	Name []byte
	// Args are a tool call's arguments: JSON text when ArgsEscaped is
	// false (an Anthropic input object), else the raw string of a JSON
	// string whose value is the JSON text (OpenAI's "arguments"). For a
	// Custom call they are the raw string of the free-form input.
	Args        []byte
	ArgsEscaped bool
	Custom      bool // a Responses custom (free-form) tool call or its result

	Result  Span // a tool result's content parts, in Request.Inner
	IsError bool

	// Sig is a reasoning part's opaque state: an Anthropic signature or
	// redacted_thinking data, or a Responses encrypted_content. Origin is
	// the dialect that produced it; only that dialect can read it back.
	Sig      []byte
	Origin   dialect.ID
	Redacted bool
}

// Role is a message's author. System text lives in Request.System; tool
// results are parts of user messages (as in Anthropic Messages).
type Role uint8

// The roles.
const (
	RoleUser Role = iota + 1
	RoleAssistant
)

// Message is one conversation turn.
type Message struct {
	Role  Role
	Parts Span
}

// ToolKind is the kind of a tool definition.
type ToolKind uint8

// The tool kinds.
const (
	ToolFunction ToolKind = iota + 1 // JSON-schema arguments
	ToolCustom                       // Responses free-form input
)

// Tool is a tool the model may call.
type Tool struct {
	Kind        ToolKind
	Name        []byte
	Description []byte
	Schema      []byte // raw JSON schema object of the arguments
	Strict      []byte // raw true/false
	Cache       []byte
}

// ChoiceMode is how the model must use tools.
type ChoiceMode uint8

// The tool choice modes.
const (
	ChoiceUnset    ChoiceMode = iota
	ChoiceAuto                // may call tools
	ChoiceNone                // must not call tools
	ChoiceRequired            // must call some tool
	ChoiceTool                // must call Name
)

// ToolChoice is the tool_choice setting.
type ToolChoice struct {
	Mode ChoiceMode
	Name []byte
}

// Tri is an optional boolean.
type Tri uint8

// The Tri values.
const (
	Unset Tri = iota
	False
	True
)

// FormatKind is the requested output format.
type FormatKind uint8

// The output formats.
const (
	FormatUnset FormatKind = iota
	FormatText
	FormatJSONObject
	FormatJSONSchema
)

// OutputFormat is structured-output configuration.
type OutputFormat struct {
	Kind        FormatKind
	Name        []byte
	Description []byte
	Schema      []byte
	Strict      []byte
}

// Effort is a reasoning effort level; the OpenAI and Anthropic scales are
// merged into one ordered scale.
type Effort uint8

// The effort levels.
const (
	EffortUnset Effort = iota
	EffortNone
	EffortMinimal
	EffortLow
	EffortMedium
	EffortHigh
	EffortXHigh
	EffortMax
)

var effortNames = [...]string{"", "none", "minimal", "low", "medium", "high", "xhigh", "max"}

func (e Effort) String() string { return effortNames[e] }

// EffortList names the efforts from least to most, comma-separated, for
// an error message that lists a dialect's scale.
func EffortList(least, most Effort) string {
	return strings.Join(effortNames[least:most+1], ", ")
}

// ParseEffort reads an effort word of the merged scale.
func ParseEffort(b []byte) Effort {
	for i, n := range effortNames {
		if i > 0 && n == string(b) {
			return Effort(i)
		}
	}
	return EffortUnset
}

// Reasoning is the reasoning/thinking request.
type Reasoning struct {
	Effort   Effort
	Budget   int64 // Anthropic budget_tokens (0: unset)
	Adaptive bool  // Anthropic adaptive thinking
	Disabled bool  // explicitly off
	Summary  []byte
}

// Request is a request in IR form.
type Request struct {
	// System holds the system prompt's text parts, in order, wherever the
	// caller's dialect put them.
	System   []Part
	Messages []Message
	// Parts holds the messages' parts; Inner the content of tool results
	// (Part.Result spans index it).
	Parts    []Part
	Inner    []Part
	Tools    []Tool
	Choice   ToolChoice
	Parallel Tri

	MaxTokens   int64 // -1: unset
	Temperature []byte
	TopP        []byte
	TopK        []byte
	Stop        [][]byte
	Stream      bool
	// IncludeUsage is a chat caller's stream_options.include_usage.
	IncludeUsage bool
	Format       OutputFormat
	Reasoning    Reasoning

	User           []byte
	PromptCacheKey []byte
	// Fields only the OpenAI family has, passed between chat and responses.
	Metadata    []byte
	ServiceTier []byte
	SafetyID    []byte
	Verbosity   []byte
	// WantEncrypted: a Responses caller asked for reasoning.encrypted_content.
	WantEncrypted bool
}

func (r *Request) Reset() {
	*r = Request{System: r.System[:0], Messages: r.Messages[:0], Parts: r.Parts[:0], Inner: r.Inner[:0], Tools: r.Tools[:0], Stop: r.Stop[:0], MaxTokens: -1}
}

// Add appends a part and returns its index.
func (r *Request) Add(p Part) int32 {
	r.Parts = append(r.Parts, p)
	return int32(len(r.Parts) - 1)
}

// MoveInner moves the parts from lo on (a tool result's content, just
// read) to Inner and returns their span there.
func (r *Request) MoveInner(lo int32) Span {
	start := int32(len(r.Inner))
	r.Inner = append(r.Inner, r.Parts[lo:]...)
	r.Parts = r.Parts[:lo]
	return Span{start, int32(len(r.Inner))}
}

// Push appends the parts from lo on as a message of role, merging it
// into the previous message when that has the same role and ends at lo
// (Responses lists a turn's text, calls and results as separate items;
// chat needs one assistant message per turn with all its tool calls). An
// empty message is not added.
func (r *Request) Push(role Role, lo int32) {
	hi := int32(len(r.Parts))
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && r.Messages[n-1].Parts.Hi == lo {
		r.Messages[n-1].Parts.Hi = hi
		return
	}
	if hi > lo {
		r.Messages = append(r.Messages, Message{Role: role, Parts: Span{lo, hi}})
	}
}

// Normalize puts each assistant turn in the order every dialect accepts:
// reasoning first, then text and media, then tool calls.
func (r *Request) Normalize() {
	for _, m := range r.Messages {
		if m.Role == RoleAssistant {
			OrderAssistant(r.Parts[m.Parts.Lo:m.Parts.Hi])
		}
	}
}

// ResultParts returns a tool result's content.
func (r *Request) ResultParts(p *Part) []Part { return r.Inner[p.Result.Lo:p.Result.Hi] }

// StopReason is why the model stopped.
type StopReason uint8

// The stop reasons.
const (
	StopUnset StopReason = iota
	StopEnd
	StopMaxTokens
	StopSequence
	StopToolUse
	StopRefusal
	StopPause
	StopContextWindow
)

// Response is a non-stream answer in IR form.
type Response struct {
	ID      []byte
	Model   []byte
	Created int64
	Parts   []Part
	Stop    StopReason
	StopSeq []byte
	Usage   dialect.Usage
}

func (r *Response) Reset() {
	*r = Response{Parts: r.Parts[:0]}
}

// OrderAssistant stably sorts an assistant turn's parts into reasoning,
// content, tool calls. Turns are short; insertion sort allocates nothing.
func OrderAssistant(parts []Part) {
	rank := func(k Kind) int {
		switch k {
		case KindReasoning:
			return 0
		case KindToolCall:
			return 2
		}
		return 1
	}
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && rank(parts[j].Kind) < rank(parts[j-1].Kind); j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
}
