// Package translate converts requests, answers and streams between the
// gateway's API dialects (internal/dialect) through one internal
// representation (package ir): each dialect has a reader into the IR and a
// writer out of it. This package holds the request's way up (the readers
// of the caller's request, read.go and a table file per dialect; the
// writers of the upstream's, write_*.go) and the Translator callers use;
// package answer holds the way down (non-stream answers and stream
// events).
//
// A Translator serves one request: Request converts the caller's body for
// the upstream, then Response (a non-stream answer), Event and End (a
// stream) or Error (an upstream error answer) convert what comes back.
// Translators are pooled (Get, Put) and keep their buffers, so a stream
// event costs a constant handful of allocations or none.
//
// What maps how, and what is dropped or refused, is in docs/translation.md;
// the rules are implemented here and held by the tests.
package translate

import (
	"fmt"
	"sync"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/translate/answer"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// DefaultMaxTokens is the max_tokens written to an Anthropic upstream,
// which requires one, when the caller set no limit and Options.MaxTokens
// is 0.
const DefaultMaxTokens = 4096

// Options configure a translation.
type Options struct {
	// Model is the upstream model name written into the request.
	Model string
	// MaxTokens is the output limit sent to an Anthropic upstream when the
	// caller set none; 0 means DefaultMaxTokens.
	MaxTokens int64
	// NoAutoCache turns off the cache_control breakpoints added to a
	// request translated to an Anthropic upstream (see docs). The model's
	// own limits (its output limit, max_completion_tokens) are not the
	// translator's: internal/fit fits the translated request to them.
	NoAutoCache bool
	// Created is the Unix time written where the caller's dialect needs a
	// creation time the upstream did not give (chat chunks, Responses
	// objects). The caller injects its clock here.
	Created int64
	// ReplyModel, when not empty, is the model name answers carry
	// instead of the upstream's: the name the caller asked for, when the
	// gateway sent another one upstream. It may alias the caller's body
	// (it is read while the translator serves the request).
	ReplyModel []byte
}

// Error codes of translation refusals (rows of the table of error codes).
const (
	CodeUnsupported      = apierror.CodeUnsupportedField
	CodeInvalid          = apierror.CodeInvalidField
	CodePreviousResponse = apierror.CodePreviousResponseNotSupported
	CodeInvalidJSON      = apierror.CodeInvalidJSON
)

// Error is a request the translator refuses: a field the upstream dialect
// cannot carry, or a value it cannot map. The HTTP layer answers it with
// 400 (APIError) in the caller's dialect.
type Error struct {
	Field   string // JSON path in the caller's body, e.g. "messages[2].content[0].type"
	Code    apierror.Code
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

// APIError renders the refusal as the gateway's 400.
func (e *Error) APIError() *apierror.Error {
	return apierror.New(e.Code, e.Error())
}

// UpstreamError is an upstream answer the translator cannot read (not the
// upstream dialect's shape). The HTTP layer answers it with 502.
type UpstreamError struct{ Msg string }

func (e *UpstreamError) Error() string { return e.Msg }

// APIError renders it as the gateway's 502.
func (e *UpstreamError) APIError() *apierror.Error {
	return apierror.New(apierror.CodeUpstreamProtocolError, e.Msg)
}

// Translator converts one request and its answer. The zero value is not
// usable; use New or Get.
type Translator struct {
	from, to dialect.ID
	opts     Options

	req ir.Request
	cur jsonscan.Cursor
	// dropped lists the caller's fields dropped by a documented rule.
	dropped []string
	// arena holds text the readers build (joined summaries); IR values
	// may point into it. tmp is the writers' scratch.
	arena []byte
	tmp   []byte
	// custom holds the names of the caller's custom (free-form) tools,
	// which an upstream without them sees as functions.
	custom  [][]byte
	nameBuf []byte

	// recs are the records of the objects being read, by depth (read.go).
	recs  [6]record
	depth int

	// ans converts the answer (package answer).
	ans answer.Converter
}

// New returns a translator from caller dialect from to upstream dialect to.
func New(from, to dialect.ID, opts Options) *Translator {
	t := &Translator{}
	t.Reset(from, to, opts)
	return t
}

var pool = sync.Pool{New: func() any { return &Translator{} }}

// Get returns a pooled translator, reset for the pair.
func Get(from, to dialect.ID, opts Options) *Translator {
	t := pool.Get().(*Translator)
	t.Reset(from, to, opts)
	return t
}

// Put returns t to the pool; nothing it returned may be used afterwards.
func Put(t *Translator) { pool.Put(t) }

// Reset prepares t for a new request, keeping its buffers.
func (t *Translator) Reset(from, to dialect.ID, opts Options) {
	if !from.Valid() || !to.Valid() {
		panic("translate: unknown dialect")
	}
	t.from, t.to, t.opts = from, to, opts
	t.req.Reset()
	t.dropped = t.dropped[:0]
	t.custom = t.custom[:0]
	t.nameBuf = t.nameBuf[:0]
	t.ans.Reset(from, to, answer.Options{Model: opts.Model, Created: opts.Created, ReplyModel: opts.ReplyModel})
}

// From and To are the caller's and the upstream's dialects.
func (t *Translator) From() dialect.ID { return t.from }

// To is the upstream dialect.
func (t *Translator) To() dialect.ID { return t.to }

// Dropped lists the caller's fields the last Request dropped by a
// documented rule (so the HTTP layer can tell the caller in a header).
func (t *Translator) Dropped() []string { return t.dropped }

// IR returns the request as last read (valid until the next Request; its
// raw values alias the caller's body).
func (t *Translator) IR() *ir.Request { return &t.req }

func (t *Translator) drop(field string) {
	for _, f := range t.dropped {
		if f == field {
			return
		}
	}
	t.dropped = append(t.dropped, field)
}

func (t *Translator) refuse(code apierror.Code, field loc, format string, args ...any) error {
	return &Error{Field: field.String(), Code: code, Message: fmt.Sprintf(format, args...)}
}

// unsupported refuses a field the upstream dialect has no equivalent for.
func (t *Translator) unsupported(field loc, what string) error {
	return t.refuse(CodeUnsupported, field, "%s cannot be sent to this model's provider, which speaks the %s API; remove it, or use a model whose provider speaks %s",
		what, t.to, t.from)
}

func (t *Translator) invalid(field loc, format string, args ...any) error {
	return t.refuse(CodeInvalid, field, format, args...)
}

// syntax wraps a JSON error of the caller's body.
func (t *Translator) syntax(err error) error {
	return &Error{Field: "body", Code: CodeInvalidJSON, Message: apierror.InvalidJSONPrefix + err.Error()}
}

// Request converts the caller's request body into the upstream dialect,
// appending it to dst. A refusal is an *Error (400).
func (t *Translator) Request(dst, body []byte) ([]byte, error) {
	if err := t.Read(body); err != nil {
		return dst, err
	}
	// Every dialect's request is one object that names the model first.
	w := ir.Writer{B: dst}
	w.Obj()
	w.Key("model")
	w.Str(t.opts.Model)
	var err error
	switch t.to {
	case dialect.Chat:
		err = t.writeChat(&w)
	case dialect.Messages:
		err = t.writeMessages(&w)
	default:
		err = t.writeResponses(&w)
	}
	if err != nil {
		return dst, err
	}
	w.End('}')
	return w.B, nil
}

// Read parses a request of the caller's dialect into the IR (see IR)
// without writing anything: for callers that need to know what a request
// asks (a token estimate, the mock provider's scripts). A refusal of the
// body itself is an *Error; refusals that depend on the upstream dialect
// come from Request.
func (t *Translator) Read(body []byte) error {
	t.req.Reset()
	t.dropped = t.dropped[:0]
	t.custom = t.custom[:0]
	t.nameBuf = t.nameBuf[:0]
	t.arena = t.arena[:0]
	t.depth = 0
	t.cur.Reset(body)
	err := t.request(requestTable(t.from))
	if cerr := t.cur.Err(); cerr != nil {
		return t.syntax(cerr) // a broken body, whatever the reader made of it
	}
	if err == nil {
		if err = t.cur.End(); err != nil {
			err = t.syntax(err)
		}
	}
	if err != nil {
		return err
	}
	t.req.Normalize()
	t.noteCustomTools()
	t.ans.SetRequest(t.custom, t.req.IncludeUsage)
	return nil
}

// noteCustomTools copies the custom tools' names, which the answer needs
// after the caller's body may be gone.
func (t *Translator) noteCustomTools() {
	for i := range t.req.Tools {
		if tl := &t.req.Tools[i]; tl.Kind == ir.ToolCustom {
			start := len(t.nameBuf)
			t.nameBuf = append(t.nameBuf, tl.Name...)
			t.custom = append(t.custom, t.nameBuf[start:len(t.nameBuf):len(t.nameBuf)])
		}
	}
}

// isCustom reports whether name (a raw string) is one of the caller's
// custom tools.
func (t *Translator) isCustom(name []byte) bool { return t.ans.IsCustom(name) }

// maxTokens is the output limit to write; def is used when the caller
// set none (≤ 0: write none).
func (t *Translator) maxTokens(def int64) int64 {
	if n := t.req.MaxTokens; n >= 0 {
		return n
	}
	return def
}

// Response converts a non-stream upstream answer into the caller's
// dialect, appending it to dst. An answer that is not the upstream
// dialect's shape is an *UpstreamError (502).
func (t *Translator) Response(dst, body []byte) ([]byte, error) {
	out, err := t.ans.Response(dst, body)
	if err != nil {
		return dst, &UpstreamError{Msg: "the " + t.to.String() + " upstream answered with a body the gateway cannot read (" + err.Error() + ")"}
	}
	return out, nil
}

// Event translates one upstream stream event, appending the caller's
// frames (often exactly one, sometimes none or a few) to dst. An event the
// translator cannot read is an *UpstreamError; the caller then ends the
// stream with Interrupt. An upstream error event becomes the caller's
// in-band error and ends the stream (Done reports true).
func (t *Translator) Event(dst []byte, ev *sse.Event) ([]byte, error) {
	out, err := t.ans.Event(dst, ev)
	if err != nil {
		return dst, &UpstreamError{Msg: "the " + t.to.String() + " upstream sent a stream event the gateway cannot read (" + err.Error() + ")"}
	}
	return out, nil
}

// End handles the upstream stream ending without its terminal event. A
// chat upstream that already gave its finish_reason is complete (some
// OpenAI-compatible servers omit [DONE]): the caller's closing frames are
// appended and ok is true. Otherwise ok is false and the caller must end
// the stream with Interrupt.
func (t *Translator) End(dst []byte) (out []byte, ok bool) { return t.ans.End(dst) }

// Done reports whether the caller's stream is complete (terminal event or
// in-band error written).
func (t *Translator) Done() bool { return t.ans.Done() }

// Started reports whether the caller has been sent any frame.
func (t *Translator) Started() bool { return t.ans.Started() }

// Usage is the usage reported by the upstream so far.
func (t *Translator) Usage() dialect.Usage { return t.ans.Usage() }

// Interrupt appends the caller's in-band error frames that end a stream
// broken after its first byte (the gateway's own failure: upstream cut,
// idle timeout, unreadable event). rid is the gateway's request id.
func (t *Translator) Interrupt(dst []byte, e *apierror.Error, rid string) []byte {
	return t.ans.Interrupt(dst, e, rid)
}

// Error converts an upstream error answer (status and body in the
// upstream dialect) into the caller's: the status to answer and the body,
// appended to dst. rid is the gateway's request id.
func (t *Translator) Error(dst []byte, status int, body []byte, rid string) (int, []byte) {
	return ConvertError(dst, t.from, t.to, status, body, rid)
}

// ConvertError is Error for any pair of dialects, without a Translator:
// after failover across dialects the error answered may be an earlier
// attempt's, of another upstream dialect than the translator's now.
func ConvertError(dst []byte, caller, upstream dialect.ID, status int, body []byte, rid string) (int, []byte) {
	e := mapError(caller, upstream, status, body)
	return e.Status, dialect.Of(caller).AppendError(dst, e, rid)
}

// MapError reads an upstream error answer into the caller's vocabulary.
func (t *Translator) MapError(status int, body []byte) *apierror.Error {
	return mapError(t.from, t.to, status, body)
}

func mapError(caller, upstream dialect.ID, status int, body []byte) *apierror.Error {
	return dialect.Of(caller).MapError(upstream, dialect.Of(upstream).ParseError(status, body))
}
