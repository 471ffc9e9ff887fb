package answer

import (
	"bytes"
	"errors"
	"strings"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Stream decoders: one upstream event read into IR stream events.

var (
	errToolOrder = errors.New("a tool call's arguments arrived after the next call began; interleaved parallel tool calls cannot be relayed incrementally")
)

// inbandStatus gives an in-band error (which has no HTTP status) the
// status its type or code implies, so it maps into the caller's vocabulary
// like an error answer would.
func inbandStatus(typ, code string) int {
	s := typ + " " + code
	switch {
	case strings.Contains(s, "overloaded"):
		return 529
	case strings.Contains(s, "rate_limit"), strings.Contains(s, "insufficient_quota"):
		return 429
	case strings.Contains(s, "invalid_request"), strings.Contains(s, "context_length"), strings.Contains(s, "invalid_prompt"):
		return 400
	case strings.Contains(s, "authentication"):
		return 401
	case strings.Contains(s, "permission"):
		return 403
	case strings.Contains(s, "not_found"):
		return 404
	case strings.Contains(s, "timeout"):
		return 504
	}
	return 502
}

// eventType is the event's name, or its data's "type" for a provider that
// leaves the event line out.
func eventType(ev *sse.Event) []byte {
	if len(ev.Name) > 0 {
		return ev.Name
	}
	return ir.RawString(jsonscan.Get(ev.Data, "type"))
}

// streamHead keeps what an event says about the answer (its id, model
// and creation time) until the caller's stream, which announces them,
// has started.
func (t *Converter) streamHead(m *members) {
	s := &t.st
	if s.started {
		return
	}
	if m.id != nil {
		s.id = append(s.id[:0], m.id...)
	}
	if m.model != nil {
		s.model = append(s.model[:0], m.model...)
	}
	if m.created != 0 {
		s.created = m.created
	}
}

// errStop ends a walk early: the event ended the stream.
var errStop = errors.New("stream ended")

// Chat Completions upstream.

func (t *Converter) decodeChat(w *ir.Writer, ev *sse.Event) error {
	if dialect.Of(dialect.Chat).IsTerminal(ev) { // the table's done marker
		t.complete(w)
		return nil
	}
	data := bytes.TrimSpace(ev.Data)
	t.cur.Reset(data)
	var m members
	err := t.scan(&m, &t.st.usage, func(k []byte) (bool, error) {
		switch string(k) {
		case "choices":
			t.streamHead(&m) // before the first delta starts the caller's stream
			return t.items(func(int) error { return t.chatStreamChoice(w) })
		case "error":
			if t.cur.Peek() != 'n' {
				t.cur.Skip()
				e := dialect.Of(dialect.Chat).ParseError(0, data)
				e.Status = inbandStatus(e.Type, e.Code)
				t.fail(w, e)
				return true, errStop
			}
		}
		return false, nil
	})
	if err == errStop {
		return nil
	}
	t.streamHead(&m)
	return err
}

// chatStreamChoice reads a choice of a chunk; only the first is the
// caller's.
func (t *Converter) chatStreamChoice(w *ir.Writer) error {
	m := members{index: -1}
	err := t.scan(&m, &t.st.usage, func(k []byte) (bool, error) {
		if string(k) != "delta" || t.cur.Peek() != '{' || m.index > 0 {
			return false, nil
		}
		t.start(w)
		return true, t.chatMessage(
			func(k ir.Kind, v []byte) { t.delta(w, k, v) },
			func() error { return t.chatStreamCall(w) })
	})
	if err == nil && m.stop != nil && m.index <= 0 {
		t.finish(w, stopOf(chatStops, m.stop), nil)
	}
	return err
}

// chatStreamCall reads one tool_calls entry of a delta. A call with a new
// id (or, without ids, a new index) starts a part; the rest are argument
// deltas of the open call.
func (t *Converter) chatStreamCall(w *ir.Writer) error {
	s := &t.st
	var m members
	custom, err := t.chatCall(&m)
	if err != nil {
		return err
	}
	idx, id, name, args := m.index, m.id, m.name, m.args
	open := s.open == ir.KindToolCall
	switch {
	case id != nil && (!open || !bytes.Equal(id, s.callID)):
	case id == nil && (!open || (idx >= 0 && idx > s.chatTool)):
		if name == nil {
			return errToolOrder
		}
		// A server that sends no ids: make one the result can refer to.
		s.genID = append(s.genID[:0], "call_omniroute_"...)
		s.genID = ir.AppendUint(s.genID, s.nParts)
		id = s.genID
	case idx >= 0 && idx < s.chatTool:
		return errToolOrder
	default:
		t.delta(w, ir.KindToolCall, args)
		return nil
	}
	if idx < 0 {
		idx = s.chatTool + 1
	}
	if name == nil {
		name = id[:0]
	}
	t.partStart(w, ir.KindToolCall, id, name, custom)
	s.chatTool = idx
	t.delta(w, ir.KindToolCall, args)
	return nil
}

// Anthropic Messages upstream.

func (t *Converter) decodeMessages(w *ir.Writer, ev *sse.Event) error {
	s := &t.st
	t.cur.Reset(ev.Data)
	switch string(eventType(ev)) {
	case "message_start":
		var m members
		if err := t.scan(&m, &s.usage, nil); err != nil { // the message's id, model, usage
			return err
		}
		t.streamHead(&m)
		t.start(w)
	case "content_block_start":
		var block members
		found := false
		err := t.scan(nil, nil, func(k []byte) (bool, error) {
			if string(k) != "content_block" || t.cur.Peek() != '{' {
				return false, nil
			}
			found = true
			return true, t.scan(&block, nil, nil)
		})
		if err != nil || !found {
			return err
		}
		pk, ok := anthropicBlocks[string(block.typ)]
		switch {
		case !ok:
			// Server tool use and results run on Anthropic's side; the
			// caller's dialect has no block for them.
			s.skipBlock = true
		case pk.kind == ir.KindToolCall:
			t.partStart(w, ir.KindToolCall, block.id, block.name, false)
		default:
			t.partStart(w, pk.kind, nil, nil, false)
			s.redacted = pk.alt
			t.delta(w, pk.kind, block.text)
			t.signature(block.sig)
		}
	case "content_block_delta":
		if s.skipBlock {
			return nil
		}
		return t.scan(nil, nil, func(k []byte) (bool, error) {
			if string(k) != "delta" || t.cur.Peek() != '{' {
				return false, nil
			}
			return true, t.scan(nil, nil, func(k []byte) (bool, error) {
				kind := anthropicDelta(k)
				if kind == 0 {
					return false, nil // type, citations
				}
				v := ir.StrRS(&t.cur)
				switch {
				case v == nil:
					return false, nil
				case kind == kindSignature:
					t.signature(v)
				default:
					t.delta(w, kind, v)
				}
				return true, nil
			})
		})
	case "content_block_stop":
		if s.skipBlock {
			s.skipBlock = false
			return nil
		}
		t.partStop(w)
	case "message_delta":
		var m members
		if err := t.scan(&m, &s.usage, nil); err != nil { // the delta's stop_reason and stop_sequence
			return err
		}
		if m.stop != nil {
			t.finish(w, stopOf(anthropicStops, m.stop), m.stopSeq)
		}
	case "message_stop":
		t.complete(w)
	case "error":
		e := dialect.Of(dialect.Messages).ParseError(0, ev.Data)
		e.Status = inbandStatus(e.AnthropicType, e.Code)
		t.fail(w, e)
	}
	return nil // ping and events newer than this converter
}

// kindSignature marks a signature delta (see anthropicDelta).
const kindSignature ir.Kind = 255

// anthropicDelta is the part a member of a content_block_delta's delta
// adds to (0: none of them).
func anthropicDelta(k []byte) ir.Kind {
	switch string(k) {
	case "text":
		return ir.KindText
	case "partial_json":
		return ir.KindToolCall
	case "thinking":
		return ir.KindReasoning
	case "signature":
		return kindSignature
	}
	return 0
}

// Responses upstream.

func (t *Converter) decodeResponses(w *ir.Writer, ev *sse.Event) error {
	s := &t.st
	t.cur.Reset(ev.Data)
	typ := eventType(ev)
	// The event's members, with its response object's (id, model, status,
	// usage, incomplete_details, error) flattened in; the item or part
	// it names apart.
	var m, item members
	err := t.scan(&m, &s.usage, func(k []byte) (bool, error) {
		if (string(k) != "item" && string(k) != "part") || t.cur.Peek() != '{' {
			return false, nil
		}
		return true, t.scan(&item, nil, nil)
	})
	if err != nil {
		return err
	}
	t.streamHead(&m)
	switch string(typ) {
	case "response.created", "response.in_progress", "response.queued":
		t.start(w)
	case "response.output_item.added":
		pk, known := responsesItems[string(item.typ)]
		switch {
		case !known:
			// Hosted tool calls (web search, code interpreter, …) ran on
			// the provider; the caller's dialect has no item for them.
			s.skipItem = true
		case pk.kind == ir.KindToolCall:
			t.partStart(w, ir.KindToolCall, item.callID, item.name, pk.alt)
		case pk.kind == ir.KindReasoning:
			t.partStart(w, ir.KindReasoning, item.id, nil, false)
			s.summaryParts = 0
		}
	case "response.content_part.added":
		if !s.skipItem && (string(item.typ) == "output_text" || string(item.typ) == "refusal") {
			t.partStart(w, ir.KindText, nil, nil, false)
		}
	case "response.output_text.delta", "response.refusal.delta":
		t.delta(w, ir.KindText, m.delta)
	case "response.content_part.done":
		if s.open == ir.KindText {
			t.partStop(w)
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		if s.open == ir.KindToolCall {
			t.delta(w, ir.KindToolCall, m.delta)
		}
	case "response.reasoning_summary_part.added":
		if s.open == ir.KindReasoning {
			if s.summaryParts > 0 {
				t.delta(w, ir.KindReasoning, []byte(`\n\n`))
			}
			s.summaryParts++
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if s.open == ir.KindReasoning {
			t.delta(w, ir.KindReasoning, m.delta)
		}
	case "response.output_item.done":
		if s.skipItem {
			s.skipItem = false
			return nil
		}
		if s.open == ir.KindReasoning {
			t.signature(item.enc)
		}
		t.partStop(w)
	case "response.completed", "response.incomplete":
		t.start(w)
		t.finish(w, responsesStop(m.status, m.reason, false), nil)
		t.complete(w)
	case "response.failed", "error":
		var msg []byte
		if m.msg != nil {
			msg, _ = ir.UnescapeRS(nil, m.msg)
		}
		e := &apierror.Error{Code: string(m.code), Message: sanitize.Message(string(msg), "the upstream provider reported a failure without a message")}
		e.Status = inbandStatus("", e.Code)
		t.fail(w, e)
	}
	return nil
}
