package answer

import (
	"errors"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// The answer readers and the stream decoders read the same objects (an
// answer, its choices, blocks, items and tool calls; a stream event and
// the answer objects it carries) with one permissive walk: a member of a
// type the reader does not expect is skipped, never refused (an answer is
// the provider's, and what the caller's dialect cannot use is left out).
// What differs per object is the few members it makes parts of, handed to
// the walk as a function.

// members are what the walk keeps of an object: its string members, raw,
// and its creation time and index.
type members struct {
	typ, id, callID, name, args, text, sig, enc []byte
	model, stop, stopSeq, status, reason        []byte
	code, msg, delta                            []byte
	created                                     int64
	index                                       int // a chat choice's or call's; its readers start it at -1
}

// scan reads the object at the cursor into m: each member is offered to
// other first (nil: none), which reports whether it consumed it; then
// the members above go to m, usage is parsed into u in the upstream's
// dialect, the objects below are read into m too, and the rest is
// skipped (all of it when m is nil: an object only other reads). The
// error is other's, or the shape error when the value is no object.
func (t *Converter) scan(m *members, u *dialect.Usage, other func(k []byte) (bool, error)) error {
	c := &t.cur
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if other != nil {
			done, err := other(k)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		if m == nil {
			c.Skip()
			continue
		}
		// dst: a string member, by every dialect's name for it; flat: an
		// object whose members count as this one's (the answer inside a
		// stream event, Anthropic's message and Responses' response; a
		// message_delta's delta; a Responses answer's incomplete_details
		// and error; a chat tool call's function).
		var dst *[]byte
		flat := false
		switch string(k) {
		case "type":
			dst = &m.typ
		case "id":
			dst = &m.id
		case "call_id":
			dst = &m.callID
		case "name":
			dst = &m.name
		case "arguments", "input", "partial_json":
			dst = &m.args
		case "text", "thinking", "refusal":
			dst = &m.text
		case "signature", "data":
			dst = &m.sig
		case "encrypted_content":
			dst = &m.enc
		case "model":
			dst = &m.model
		case "stop_reason", "finish_reason":
			dst = &m.stop
		case "stop_sequence":
			dst = &m.stopSeq
		case "status":
			dst = &m.status
		case "reason":
			dst = &m.reason
		case "code":
			dst = &m.code
		case "message":
			dst, flat = &m.msg, true
		case "delta":
			dst, flat = &m.delta, true
		case "response", "incomplete_details", "error", "function", "custom":
			flat = true
		case "created", "created_at":
			m.created, _ = c.Int()
			continue
		case "index":
			if n, ok := c.Int(); ok {
				m.index = int(n)
			}
			continue
		case "usage":
			if c.Peek() == '{' && u != nil {
				dialect.Of(t.to).ParseUsage(c.Skip(), u)
				continue
			}
		}
		if dst != nil {
			if s := ir.StrRS(c); s != nil {
				*dst = s
				continue
			}
		}
		if flat && c.Peek() == '{' {
			if err := t.scan(m, u, nil); err != nil {
				return err
			}
			continue
		}
		c.Skip()
	}
	return c.Err()
}

// items reads the array at the cursor, each element by elem (its index
// given), reporting false (and consuming nothing) when the value is no
// array.
func (t *Converter) items(elem func(i int) error) (bool, error) {
	c := &t.cur
	if c.Peek() != '[' {
		return false, nil
	}
	c.Array()
	for i := 0; c.Next(); i++ {
		if err := elem(i); err != nil {
			return true, err
		}
	}
	return true, nil
}

var errShape = errors.New("a value has the wrong JSON type")

// shapeErr is the error for a value of the wrong type where an object or
// array must be: the syntax error the cursor met, if any.
func shapeErr(c *jsonscan.Cursor) error {
	if err := c.Err(); err != nil {
		return err
	}
	return errShape
}

// What an answer's blocks and items make, by type: the same words in an
// answer and in a stream.

// partKind is a block or item type's part.
type partKind struct {
	kind ir.Kind
	// alt: a redacted thinking block, a Responses custom tool call.
	alt bool
}

// anthropicBlocks are the Anthropic content blocks the caller's dialect
// has a place for; server-tool blocks (web search results and the like)
// are left out.
var anthropicBlocks = map[string]partKind{
	"text":              {kind: ir.KindText},
	"tool_use":          {kind: ir.KindToolCall},
	"thinking":          {kind: ir.KindReasoning},
	"redacted_thinking": {kind: ir.KindReasoning, alt: true},
}

// responsesItems are the Responses output items the caller's dialect has
// a place for (a message's parts are its text); hosted tool calls (web
// search, code interpreter, …) ran on the provider and are left out.
var responsesItems = map[string]partKind{
	"message":          {kind: ir.KindText},
	"function_call":    {kind: ir.KindToolCall},
	"custom_tool_call": {kind: ir.KindToolCall, alt: true},
	"reasoning":        {kind: ir.KindReasoning},
}

// Stop reasons, by each dialect's words.

var chatStops = map[string]ir.StopReason{"stop": ir.StopEnd, "length": ir.StopMaxTokens,
	"tool_calls": ir.StopToolUse, "function_call": ir.StopToolUse, "content_filter": ir.StopRefusal}

var anthropicStops = func() map[string]ir.StopReason {
	m := make(map[string]ir.StopReason, len(anthropicStopWords))
	for r := ir.StopEnd; int(r) < len(anthropicStopWords); r++ {
		w := anthropicStopWords[r]
		m[w[1:len(w)-1]] = r
	}
	return m
}()

// stopOf reads a stop word of a table; an unknown word is a normal end.
func stopOf(words map[string]ir.StopReason, s []byte) ir.StopReason {
	if r, ok := words[string(s)]; ok {
		return r
	}
	return ir.StopEnd
}

// responsesStop is a Responses answer's stop: its status and incomplete
// reason, or tool use when it made calls.
func responsesStop(status, incomplete []byte, calls bool) ir.StopReason {
	if string(status) == "incomplete" {
		if string(incomplete) == "content_filter" {
			return ir.StopRefusal
		}
		return ir.StopMaxTokens
	}
	if calls {
		return ir.StopToolUse
	}
	return ir.StopEnd
}
