// Package answer converts what an upstream answers, a whole answer or a
// stream of events, from the upstream's dialect into the caller's through
// the IR (internal/translate/ir): a reader per upstream dialect, a writer
// per caller dialect. internal/translate, which converts the request the
// other way, serves callers one Translator that holds a Converter for the
// answer; this package is its half going down.
package answer

import (
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Options are what an answer's writer needs of the request.
type Options struct {
	// Model is the upstream model name, written when the upstream's
	// answer names none.
	Model string
	// Created is the Unix time written where the caller's dialect needs a
	// creation time the upstream did not give.
	Created int64
	// ReplyModel, when not empty, is the model name answers carry
	// instead of the upstream's (see translate.Options).
	ReplyModel []byte
}

// Converter converts one request's answer. The zero value is not usable;
// Reset it first. It keeps its buffers across Resets, so a stream event
// costs a constant handful of allocations or none.
type Converter struct {
	from, to dialect.ID
	opts     Options
	// custom names the caller's custom (free-form) tools, which an
	// upstream without them saw as functions (set by SetRequest).
	custom [][]byte

	cur  jsonscan.Cursor
	resp ir.Response
	// arena holds text the readers build (joined summaries); IR values
	// may point into it. tmp is the writers' scratch.
	arena []byte
	tmp   []byte

	st stream
}

// Reset prepares c for the answer of a request from caller dialect from
// to upstream dialect to, keeping its buffers.
func (t *Converter) Reset(from, to dialect.ID, opts Options) {
	t.from, t.to, t.opts = from, to, opts
	t.custom = nil
	t.resp.Reset()
	t.st.reset()
}

// SetRequest tells the converter what of the request its answer depends
// on: the names of the caller's custom tools (raw strings; the slice is
// kept, not copied) and whether a chat caller asked for the usage chunk.
func (t *Converter) SetRequest(custom [][]byte, includeUsage bool) {
	t.custom = custom
	t.st.includeUsage = includeUsage
}

// IsCustom reports whether name (a raw string) is one of the caller's
// custom tools.
func (t *Converter) IsCustom(name []byte) bool {
	for _, n := range t.custom {
		if string(n) == string(name) {
			return true
		}
	}
	return false
}

func (t *Converter) isCustom(name []byte) bool { return t.IsCustom(name) }

// customArgs is the JSON text of a custom call's free-form input as the
// function arguments the upstream saw (see ir.CustomArgs).
func (t *Converter) customArgs(p *ir.Part) []byte {
	t.tmp = ir.CustomArgs(t.tmp[:0], p.Args)
	return t.tmp
}

// argsString writes a tool call's arguments as an OpenAI arguments string.
func (t *Converter) argsString(w *ir.Writer, p *ir.Part) { t.tmp = ir.ArgsString(w, p, t.tmp) }
