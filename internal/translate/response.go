package translate

import (
	"errors"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Response converts a non-stream upstream answer into the caller's
// dialect, appending it to dst. An answer that is not the upstream
// dialect's shape is an *UpstreamError (502).
func (t *Translator) Response(dst, body []byte) ([]byte, error) {
	t.resp.reset()
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
		return dst, &UpstreamError{Msg: "the " + t.to.String() + " upstream answered with a body the gateway cannot read (" + err.Error() + ")"}
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

// Readers of non-stream answers.

// members are the string members of an answer's objects (blocks, items,
// tool calls) that the answer and stream readers look at. strMember fills
// one when k names it and the value is a string.
type members struct {
	typ, id, callID, name, args, text, sig, enc []byte
}

func (t *Translator) strMember(k []byte, m *members) bool {
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
	*dst = strRS(&t.cur)
	return *dst != nil
}

// answerMeta reads the answer's id, model and creation time when k names
// one of them, reporting whether it consumed the value.
func (t *Translator) answerMeta(k []byte) bool {
	c := &t.cur
	rp := &t.resp
	switch string(k) {
	case "id":
		rp.ID = strRS(c)
		return rp.ID != nil
	case "model":
		rp.Model = strRS(c)
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

func (t *Translator) readChatResponse() error {
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

func (t *Translator) chatChoice() error {
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
					if s := strRS(c); s != nil {
						rp.Parts = append(rp.Parts, Part{Kind: KindText, Text: s})
						continue
					}
				case "reasoning_content", "reasoning":
					if s := strRS(c); s != nil {
						// reasoning text some OpenAI-compatible servers add
						rp.Parts = append(rp.Parts, Part{Kind: KindReasoning, Text: s, Origin: dialect.Chat})
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
			orderAssistant(rp.Parts)
			continue
		case "finish_reason":
			if s := strRS(c); s != nil {
				rp.Stop = chatStop(s)
				continue
			}
		}
		c.Skip()
	}
	return nil
}

func (t *Translator) chatResponseCalls() error {
	c := &t.cur
	rp := &t.resp
	c.Array()
	for c.Next() {
		if !c.Object() {
			return shapeErr(c)
		}
		var m members
		t.chatCallMembers(&m)
		p := Part{Kind: KindToolCall, ArgsEscaped: true, ID: m.id, Name: m.name, Args: m.args}
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
func (t *Translator) chatCallMembers(m *members) int {
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
			if m.id = strRS(c); m.id != nil {
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

func chatStop(s []byte) StopReason {
	switch string(s) {
	case "stop":
		return StopEnd
	case "length":
		return StopMaxTokens
	case "tool_calls", "function_call":
		return StopToolUse
	case "content_filter":
		return StopRefusal
	}
	return StopEnd
}

func (t *Translator) readMessagesResponse() error {
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
			if s := strRS(c); s != nil {
				rp.Stop = anthropicStop(s)
				continue
			}
		case "stop_sequence":
			if rp.StopSeq = strRS(c); rp.StopSeq != nil {
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
func (t *Translator) anthropicOutBlock() error {
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
	p := Part{Text: m.text, ID: m.id, Name: m.name, Sig: m.sig, Args: input}
	switch string(typ) {
	case "text":
		p.Kind = KindText
	case "tool_use":
		p.Kind = KindToolCall
		if p.Args == nil {
			p.Args = []byte("{}")
		}
	case "thinking", "redacted_thinking":
		p.Kind, p.Origin, p.Redacted = KindReasoning, dialect.Messages, typ[0] == 'r'
	default:
		return nil
	}
	rp.Parts = append(rp.Parts, p)
	return nil
}

func anthropicStop(s []byte) StopReason {
	switch string(s) {
	case "end_turn":
		return StopEnd
	case "max_tokens":
		return StopMaxTokens
	case "stop_sequence":
		return StopSequence
	case "tool_use":
		return StopToolUse
	case "refusal":
		return StopRefusal
	case "pause_turn":
		return StopPause
	case "model_context_window_exceeded":
		return StopContextWindow
	}
	return StopEnd
}

func (t *Translator) readResponsesResponse() error {
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
			if status = strRS(c); status != nil {
				continue
			}
		case "incomplete_details":
			if c.Peek() == '{' {
				c.Object()
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					if string(k2) == "reason" {
						if incomplete = strRS(c); incomplete != nil {
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

func responsesStop(status, incomplete []byte, parts []Part) StopReason {
	if string(status) == "incomplete" {
		if string(incomplete) == "content_filter" {
			return StopRefusal
		}
		return StopMaxTokens
	}
	for i := range parts {
		if parts[i].Kind == KindToolCall {
			return StopToolUse
		}
	}
	return StopEnd
}

// respOutItem reads one output item of a Responses answer. Hosted tool
// calls (web search, code interpreter…) ran on the provider and have no
// counterpart in the caller's dialect; they are left out.
func (t *Translator) respOutItem() error {
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
							if s := strRS(c); s != nil {
								rp.Parts = append(rp.Parts, Part{Kind: KindText, Text: s})
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
							if s := strRS(c); s != nil {
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
		rp.Parts = append(rp.Parts[:lo], Part{Kind: KindToolCall, ID: m.callID, Name: m.name, Args: m.args, ArgsEscaped: true, Custom: m.typ[0] == 'c'})
	case "reasoning":
		rp.Parts = append(rp.Parts[:lo], Part{Kind: KindReasoning, ID: m.id, Text: summary, Sig: m.enc, Origin: dialect.Responses})
	default:
		rp.Parts = rp.Parts[:lo]
	}
	return nil
}
