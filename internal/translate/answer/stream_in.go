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
	doneData     = []byte("[DONE]")
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

// streamMeta reads the upstream answer's id, model and creation time
// (kept from before the caller's stream starts, which announces them)
// when k names one, reporting whether it consumed the value.
func (t *Converter) streamMeta(k []byte) bool {
	c := &t.cur
	s := &t.st
	switch string(k) {
	case "id", "model":
		v := ir.StrRS(c)
		if v == nil {
			return false
		}
		if !s.started {
			if k[0] == 'i' {
				s.id = append(s.id[:0], v...)
			} else {
				s.model = append(s.model[:0], v...)
			}
		}
		return true
	case "created", "created_at":
		if n, _ := c.Int(); !s.started {
			s.created = n
		}
		return true
	}
	return false
}

// Chat Completions upstream.

func (t *Converter) decodeChat(w *ir.Writer, ev *sse.Event) error {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneData) {
		t.complete(w)
		return nil
	}
	s := &t.st
	c := &t.cur
	c.Reset(data)
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.streamMeta(k) {
			continue
		}
		switch string(k) {
		case "choices":
			if c.Peek() == '[' {
				if err := t.chatStreamChoices(w); err != nil {
					return err
				}
				continue
			}
		case "usage":
			if c.Peek() == '{' {
				dialect.Of(dialect.Chat).ParseUsage(c.Skip(), &s.usage)
				continue
			}
		case "error":
			if c.Peek() != 'n' {
				c.Skip()
				e := dialect.Of(dialect.Chat).ParseError(0, data)
				e.Status = inbandStatus(e.Type, e.Code)
				t.fail(w, e)
				return nil
			}
		}
		c.Skip()
	}
	return c.Err()
}

func (t *Converter) chatStreamChoices(w *ir.Writer) error {
	c := &t.cur
	c.Array()
	for c.Next() {
		if !c.Object() {
			return shapeErr(c)
		}
		var finish []byte
		first := true
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			switch string(k) {
			case "index":
				n, _ := c.Int()
				first = n == 0
				continue
			case "delta":
				if c.Peek() == '{' && first {
					if err := t.chatStreamDelta(w); err != nil {
						return err
					}
					continue
				}
			case "finish_reason":
				if finish = ir.StrRS(c); finish != nil {
					continue
				}
			}
			c.Skip()
		}
		if finish != nil && first {
			t.finish(w, chatStop(finish), nil)
		}
	}
	return nil
}

func (t *Converter) chatStreamDelta(w *ir.Writer) error {
	c := &t.cur
	c.Object()
	t.start(w)
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "content", "refusal":
			if v := ir.StrRS(c); v != nil {
				t.delta(w, ir.KindText, v)
				continue
			}
		case "reasoning_content", "reasoning":
			if v := ir.StrRS(c); v != nil {
				t.delta(w, ir.KindReasoning, v)
				continue
			}
		case "tool_calls":
			if c.Peek() == '[' {
				c.Array()
				for c.Next() {
					if err := t.chatStreamCall(w); err != nil {
						return err
					}
				}
				continue
			}
		}
		c.Skip()
	}
	return nil
}

// chatStreamCall reads one tool_calls entry of a delta. A call with a new
// id (or, without ids, a new index) starts a part; the rest are argument
// deltas of the open call.
func (t *Converter) chatStreamCall(w *ir.Writer) error {
	c := &t.cur
	s := &t.st
	if !c.Object() {
		return shapeErr(c)
	}
	var m members
	idx := t.chatCallMembers(&m)
	id, name, args, custom := m.id, m.name, m.args, m.typ != nil
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
	c := &t.cur
	c.Reset(ev.Data)
	switch string(eventType(ev)) {
	case "message_start":
		if !c.Object() {
			return shapeErr(c)
		}
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if string(k) != "message" || c.Peek() != '{' {
				c.Skip()
				continue
			}
			c.Object()
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				if t.streamMeta(k2) {
					continue
				}
				switch string(k2) {
				case "usage":
					if c.Peek() == '{' {
						dialect.Of(dialect.Messages).ParseUsage(c.Skip(), &s.usage)
						continue
					}
				}
				c.Skip()
			}
		}
		t.start(w)
	case "content_block_start":
		return t.anthropicStreamBlock(w)
	case "content_block_delta":
		return t.anthropicStreamDelta(w)
	case "content_block_stop":
		if s.skipBlock {
			s.skipBlock = false
			return nil
		}
		t.partStop(w)
	case "message_delta":
		if !c.Object() {
			return shapeErr(c)
		}
		var stop, seq []byte
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			switch string(k) {
			case "delta":
				if c.Peek() == '{' {
					c.Object()
					for k2, ok := c.Key(); ok; k2, ok = c.Key() {
						switch string(k2) {
						case "stop_reason":
							if stop = ir.StrRS(c); stop != nil {
								continue
							}
						case "stop_sequence":
							if seq = ir.StrRS(c); seq != nil {
								continue
							}
						}
						c.Skip()
					}
					continue
				}
			case "usage":
				if c.Peek() == '{' {
					dialect.Of(dialect.Messages).ParseUsage(c.Skip(), &s.usage)
					continue
				}
			}
			c.Skip()
		}
		if stop != nil {
			t.finish(w, anthropicStop(stop), seq)
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

func (t *Converter) anthropicStreamBlock(w *ir.Writer) error {
	c := &t.cur
	s := &t.st
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if string(k) != "content_block" || c.Peek() != '{' {
			c.Skip()
			continue
		}
		var m members
		c.Object()
		for k2, ok := c.Key(); ok; k2, ok = c.Key() {
			if !t.strMember(k2, &m) {
				c.Skip()
			}
		}
		typ, id, name, text, sig := m.typ, m.id, m.name, m.text, m.sig
		switch string(typ) {
		case "text":
			t.partStart(w, ir.KindText, nil, nil, false)
			t.delta(w, ir.KindText, text)
		case "tool_use":
			t.partStart(w, ir.KindToolCall, id, name, false)
		case "thinking", "redacted_thinking":
			t.partStart(w, ir.KindReasoning, nil, nil, false)
			s.redacted = typ[0] == 'r'
			t.delta(w, ir.KindReasoning, text)
			t.signature(sig)
		default:
			// Server tool use and results run on Anthropic's side; the
			// caller's dialect has no block for them.
			s.skipBlock = true
		}
	}
	return nil
}

func (t *Converter) anthropicStreamDelta(w *ir.Writer) error {
	c := &t.cur
	if t.st.skipBlock {
		return nil
	}
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if string(k) != "delta" || c.Peek() != '{' {
			c.Skip()
			continue
		}
		c.Object()
		for k2, ok := c.Key(); ok; k2, ok = c.Key() {
			switch string(k2) {
			case "text":
				if v := ir.StrRS(c); v != nil {
					t.delta(w, ir.KindText, v)
					continue
				}
			case "partial_json":
				if v := ir.StrRS(c); v != nil {
					t.delta(w, ir.KindToolCall, v)
					continue
				}
			case "thinking":
				if v := ir.StrRS(c); v != nil {
					t.delta(w, ir.KindReasoning, v)
					continue
				}
			case "signature":
				if v := ir.StrRS(c); v != nil {
					t.signature(v)
					continue
				}
			}
			c.Skip() // type, citations
		}
	}
	return nil
}

// Responses upstream.

// respStreamObject reads the "response" object of a lifecycle event.
func (t *Converter) respStreamObject(status, reason, code, msg *[]byte) {
	c := &t.cur
	s := &t.st
	c.Object()
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.streamMeta(k) {
			continue
		}
		switch string(k) {
		case "status":
			if *status = ir.StrRS(c); *status != nil {
				continue
			}
		case "usage":
			if c.Peek() == '{' {
				dialect.Of(dialect.Responses).ParseUsage(c.Skip(), &s.usage)
				continue
			}
		case "incomplete_details", "error":
			if c.Peek() == '{' {
				isErr := string(k) == "error"
				c.Object()
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					switch {
					case !isErr && string(k2) == "reason":
						if *reason = ir.StrRS(c); *reason != nil {
							continue
						}
					case isErr && string(k2) == "code":
						if *code = ir.StrRS(c); *code != nil {
							continue
						}
					case isErr && string(k2) == "message":
						if *msg = ir.StrRS(c); *msg != nil {
							continue
						}
					}
					c.Skip()
				}
				continue
			}
		}
		c.Skip()
	}
}

func (t *Converter) decodeResponses(w *ir.Writer, ev *sse.Event) error {
	s := &t.st
	c := &t.cur
	c.Reset(ev.Data)
	typ := eventType(ev)
	if !c.Object() {
		return shapeErr(c)
	}
	var status, reason, code, msg, d []byte
	var item members
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "response":
			if c.Peek() == '{' {
				t.respStreamObject(&status, &reason, &code, &msg)
				continue
			}
		case "item", "part":
			if c.Peek() == '{' {
				c.Object()
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					if !t.strMember(k2, &item) {
						c.Skip()
					}
				}
				continue
			}
		case "delta":
			if d = ir.StrRS(c); d != nil {
				continue
			}
		case "code":
			if code = ir.StrRS(c); code != nil {
				continue
			}
		case "message":
			if msg = ir.StrRS(c); msg != nil {
				continue
			}
		}
		c.Skip()
	}
	if err := c.Err(); err != nil {
		return err
	}
	itemType, id, callID, name, enc := item.typ, item.id, item.callID, item.name, item.enc
	switch string(typ) {
	case "response.created", "response.in_progress", "response.queued":
		t.start(w)
	case "response.output_item.added":
		switch string(itemType) {
		case "message":
		case "function_call", "custom_tool_call":
			t.partStart(w, ir.KindToolCall, callID, name, itemType[0] == 'c')
		case "reasoning":
			t.partStart(w, ir.KindReasoning, id, nil, false)
			s.summaryParts = 0
		default:
			// Hosted tool calls (web search, code interpreter, …) ran on
			// the provider; the caller's dialect has no item for them.
			s.skipItem = true
		}
	case "response.content_part.added":
		if !s.skipItem && (string(itemType) == "output_text" || string(itemType) == "refusal") {
			t.partStart(w, ir.KindText, nil, nil, false)
		}
	case "response.output_text.delta", "response.refusal.delta":
		t.delta(w, ir.KindText, d)
	case "response.content_part.done":
		if s.open == ir.KindText {
			t.partStop(w)
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		if s.open == ir.KindToolCall {
			t.delta(w, ir.KindToolCall, d)
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
			t.delta(w, ir.KindReasoning, d)
		}
	case "response.output_item.done":
		if s.skipItem {
			s.skipItem = false
			return nil
		}
		if s.open == ir.KindReasoning {
			t.signature(enc)
		}
		t.partStop(w)
	case "response.completed", "response.incomplete":
		t.start(w)
		t.finish(w, responsesStop(status, reason, nil), nil)
		t.complete(w)
	case "response.failed", "error":
		var m []byte
		if msg != nil {
			m, _ = ir.UnescapeRS(nil, msg)
		}
		e := &apierror.Error{Code: string(code), Message: sanitize.Message(string(m), "the upstream provider reported a failure without a message")}
		e.Status = inbandStatus("", e.Code)
		t.fail(w, e)
	}
	return nil
}
