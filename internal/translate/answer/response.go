package answer

import (
	"errors"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Response converts a non-stream upstream answer into the caller's
// dialect, appending it to dst. The error says what of the answer the
// reader could not read.
func (t *Converter) Response(dst, body []byte) ([]byte, error) {
	t.resp.Reset()
	t.arena = t.arena[:0]
	t.cur.Reset(body)
	var err error
	switch t.to {
	case dialect.Chat:
		err = t.readChatResponse()
	case dialect.Messages:
		err = t.readMessagesResponse()
	default:
		err = t.readResponsesResponse()
	}
	if err == nil {
		err = t.cur.End()
	}
	if err != nil {
		return dst, err
	}
	switch t.from {
	case dialect.Chat:
		return t.writeChatResponse(dst), nil
	case dialect.Messages:
		return t.writeMessagesResponse(dst), nil
	default:
		return t.writeResponsesResponse(dst), nil
	}
}

// Readers of non-stream answers.

// members are the string members of an answer's objects (blocks, items,
// tool calls) that the answer and stream readers look at. strMember fills
// one when k names it and the value is a string.
type members struct {
	typ, id, callID, name, args, text, sig, enc []byte
}

func (t *Converter) strMember(k []byte, m *members) bool {
	var dst *[]byte
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
	default:
		return false
	}
	*dst = ir.StrRS(&t.cur)
	return *dst != nil
}

// answerMeta reads the answer's id, model and creation time when k names
// one of them, reporting whether it consumed the value.
func (t *Converter) answerMeta(k []byte) bool {
	c := &t.cur
	rp := &t.resp
	switch string(k) {
	case "id":
		rp.ID = ir.StrRS(c)
		return rp.ID != nil
	case "model":
		rp.Model = ir.StrRS(c)
		return rp.Model != nil
	case "created", "created_at":
		rp.Created, _ = c.Int()
		return true
	}
	return false
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

func (t *Converter) readChatResponse() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.answerMeta(k) {
			continue
		}
		switch string(k) {
		case "choices":
			if !c.Array() {
				return shapeErr(c)
			}
			for i := 0; c.Next(); i++ {
				if i > 0 {
					c.Skip() // n > 1 was refused; extra choices are not the caller's
					continue
				}
				if err := t.chatChoice(); err != nil {
					return err
				}
			}
			continue
		case "usage":
			if c.Peek() == '{' {
				dialect.Of(dialect.Chat).ParseUsage(c.Skip(), &rp.Usage)
				continue
			}
		}
		c.Skip()
	}
	return c.Err()
}

func (t *Converter) chatChoice() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "message", "delta":
			if c.Peek() != '{' {
				c.Skip()
				continue
			}
			c.Object()
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				switch string(k2) {
				case "content", "refusal":
					if s := ir.StrRS(c); s != nil {
						rp.Parts = append(rp.Parts, ir.Part{Kind: ir.KindText, Text: s})
						continue
					}
				case "reasoning_content", "reasoning":
					if s := ir.StrRS(c); s != nil {
						// reasoning text some OpenAI-compatible servers add
						rp.Parts = append(rp.Parts, ir.Part{Kind: ir.KindReasoning, Text: s, Origin: dialect.Chat})
						continue
					}
				case "tool_calls":
					if c.Peek() == '[' {
						if err := t.chatResponseCalls(); err != nil {
							return err
						}
						continue
					}
				}
				c.Skip()
			}
			ir.OrderAssistant(rp.Parts)
			continue
		case "finish_reason":
			if s := ir.StrRS(c); s != nil {
				rp.Stop = chatStop(s)
				continue
			}
		}
		c.Skip()
	}
	return nil
}

func (t *Converter) chatResponseCalls() error {
	c := &t.cur
	rp := &t.resp
	c.Array()
	for c.Next() {
		if !c.Object() {
			return shapeErr(c)
		}
		var m members
		t.chatCallMembers(&m)
		p := ir.Part{Kind: ir.KindToolCall, ArgsEscaped: true, ID: m.id, Name: m.name, Args: m.args}
		if p.Name == nil {
			continue
		}
		if p.Args == nil {
			p.Args = p.Name[:0]
		}
		rp.Parts = append(rp.Parts, p)
	}
	return nil
}

// chatCallMembers reads a chat tool call object (an answer's or a stream
// delta's): its id and index, and the name and arguments of its function
// (or custom input); m.typ is set to "custom" for a custom call. It
// returns the index, -1 when absent.
func (t *Converter) chatCallMembers(m *members) int {
	c := &t.cur
	idx := -1
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "index":
			if n, ok := c.Int(); ok {
				idx = int(n)
			}
			continue
		case "id":
			if m.id = ir.StrRS(c); m.id != nil {
				continue
			}
		case "function", "custom":
			if c.Peek() == '{' {
				if k[0] == 'c' {
					m.typ = k
				}
				c.Object()
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					if !t.strMember(k2, m) {
						c.Skip()
					}
				}
				continue
			}
		}
		c.Skip()
	}
	return idx
}

func chatStop(s []byte) ir.StopReason {
	switch string(s) {
	case "stop":
		return ir.StopEnd
	case "length":
		return ir.StopMaxTokens
	case "tool_calls", "function_call":
		return ir.StopToolUse
	case "content_filter":
		return ir.StopRefusal
	}
	return ir.StopEnd
}

func (t *Converter) readMessagesResponse() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.answerMeta(k) {
			continue
		}
		switch string(k) {
		case "content":
			if c.Peek() == '[' {
				c.Array()
				for c.Next() {
					if err := t.anthropicOutBlock(); err != nil {
						return err
					}
				}
				continue
			}
		case "stop_reason":
			if s := ir.StrRS(c); s != nil {
				rp.Stop = anthropicStop(s)
				continue
			}
		case "stop_sequence":
			if rp.StopSeq = ir.StrRS(c); rp.StopSeq != nil {
				continue
			}
		case "usage":
			if c.Peek() == '{' {
				dialect.Of(dialect.Messages).ParseUsage(c.Skip(), &rp.Usage)
				continue
			}
		}
		c.Skip()
	}
	return nil
}

// anthropicOutBlock reads one content block of an answer. Server-tool
// blocks (web search results and the like) have no counterpart in the
// caller's dialect and are left out.
func (t *Converter) anthropicOutBlock() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	var m members
	var input []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch {
		case t.strMember(k, &m):
		case string(k) == "input" && c.Peek() == '{':
			input = c.Skip()
		default:
			c.Skip()
		}
	}
	typ := m.typ
	p := ir.Part{Text: m.text, ID: m.id, Name: m.name, Sig: m.sig, Args: input}
	switch string(typ) {
	case "text":
		p.Kind = ir.KindText
	case "tool_use":
		p.Kind = ir.KindToolCall
		if p.Args == nil {
			p.Args = []byte("{}")
		}
	case "thinking", "redacted_thinking":
		p.Kind, p.Origin, p.Redacted = ir.KindReasoning, dialect.Messages, typ[0] == 'r'
	default:
		return nil
	}
	rp.Parts = append(rp.Parts, p)
	return nil
}

func anthropicStop(s []byte) ir.StopReason {
	switch string(s) {
	case "end_turn":
		return ir.StopEnd
	case "max_tokens":
		return ir.StopMaxTokens
	case "stop_sequence":
		return ir.StopSequence
	case "tool_use":
		return ir.StopToolUse
	case "refusal":
		return ir.StopRefusal
	case "pause_turn":
		return ir.StopPause
	case "model_context_window_exceeded":
		return ir.StopContextWindow
	}
	return ir.StopEnd
}

func (t *Converter) readResponsesResponse() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	status := []byte(nil)
	incomplete := []byte(nil)
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.answerMeta(k) {
			continue
		}
		switch string(k) {
		case "status":
			if status = ir.StrRS(c); status != nil {
				continue
			}
		case "incomplete_details":
			if c.Peek() == '{' {
				c.Object()
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					if string(k2) == "reason" {
						if incomplete = ir.StrRS(c); incomplete != nil {
							continue
						}
					}
					c.Skip()
				}
				continue
			}
		case "output":
			if c.Peek() == '[' {
				c.Array()
				for c.Next() {
					if err := t.respOutItem(); err != nil {
						return err
					}
				}
				continue
			}
		case "usage":
			if c.Peek() == '{' {
				dialect.Of(dialect.Responses).ParseUsage(c.Skip(), &rp.Usage)
				continue
			}
		}
		c.Skip()
	}
	rp.Stop = responsesStop(status, incomplete, rp.Parts)
	return nil
}

func responsesStop(status, incomplete []byte, parts []ir.Part) ir.StopReason {
	if string(status) == "incomplete" {
		if string(incomplete) == "content_filter" {
			return ir.StopRefusal
		}
		return ir.StopMaxTokens
	}
	for i := range parts {
		if parts[i].Kind == ir.KindToolCall {
			return ir.StopToolUse
		}
	}
	return ir.StopEnd
}

// respOutItem reads one output item of a Responses answer. Hosted tool
// calls (web search, code interpreter…) ran on the provider and have no
// counterpart in the caller's dialect; they are left out.
func (t *Converter) respOutItem() error {
	c := &t.cur
	rp := &t.resp
	if !c.Object() {
		return shapeErr(c)
	}
	var m members
	lo := len(rp.Parts)
	summary := []byte(nil)
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if t.strMember(k, &m) {
			continue
		}
		switch string(k) {
		case "content":
			if c.Peek() == '[' {
				c.Array()
				for c.Next() {
					if !c.Object() {
						return shapeErr(c)
					}
					for k2, ok := c.Key(); ok; k2, ok = c.Key() {
						if string(k2) == "text" || string(k2) == "refusal" {
							if s := ir.StrRS(c); s != nil {
								rp.Parts = append(rp.Parts, ir.Part{Kind: ir.KindText, Text: s})
								continue
							}
						}
						c.Skip()
					}
				}
				continue
			}
		case "summary":
			if c.Peek() == '[' {
				start := len(t.arena)
				n := 0
				c.Array()
				for c.Next() {
					if !c.Object() {
						return shapeErr(c)
					}
					for k2, ok := c.Key(); ok; k2, ok = c.Key() {
						if string(k2) == "text" {
							if s := ir.StrRS(c); s != nil {
								if n > 0 {
									t.arena = append(t.arena, `\n\n`...)
								}
								t.arena = append(t.arena, s...)
								n++
								continue
							}
						}
						c.Skip()
					}
				}
				if n > 0 {
					summary = t.arena[start:len(t.arena):len(t.arena)]
				}
				continue
			}
		}
		c.Skip()
	}
	switch string(m.typ) {
	case "message":
	case "function_call", "custom_tool_call":
		rp.Parts = append(rp.Parts[:lo], ir.Part{Kind: ir.KindToolCall, ID: m.callID, Name: m.name, Args: m.args, ArgsEscaped: true, Custom: m.typ[0] == 'c'})
	case "reasoning":
		rp.Parts = append(rp.Parts[:lo], ir.Part{Kind: ir.KindReasoning, ID: m.id, Text: summary, Sig: m.enc, Origin: dialect.Responses})
	default:
		rp.Parts = rp.Parts[:lo]
	}
	return nil
}
