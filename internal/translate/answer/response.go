package answer

import (
	"github.com/omniroute/gateway/internal/dialect"
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

// Readers of non-stream answers, one per upstream dialect (see read.go).

// answerHead keeps what the answer says about itself.
func (t *Converter) answerHead(m *members) {
	t.resp.ID, t.resp.Model, t.resp.Created = m.id, m.model, m.created
}

func (t *Converter) readChatResponse() error {
	var m members
	err := t.scan(&m, &t.resp.Usage, func(k []byte) (bool, error) {
		if string(k) != "choices" {
			return false, nil
		}
		ok, err := t.items(func(i int) error {
			if i > 0 {
				t.cur.Skip() // n > 1 was refused; extra choices are not the caller's
				return nil
			}
			return t.chatChoice()
		})
		if !ok {
			return true, shapeErr(&t.cur)
		}
		return true, err
	})
	t.answerHead(&m)
	return err
}

func (t *Converter) chatChoice() error {
	rp := &t.resp
	var m members
	err := t.scan(&m, &rp.Usage, func(k []byte) (bool, error) {
		if (string(k) != "message" && string(k) != "delta") || t.cur.Peek() != '{' {
			return false, nil
		}
		err := t.chatMessage(func(k ir.Kind, v []byte) {
			p := ir.Part{Kind: k, Text: v}
			if k == ir.KindReasoning {
				p.Origin = dialect.Chat
			}
			rp.Parts = append(rp.Parts, p)
		}, t.chatResponseCall)
		ir.OrderAssistant(rp.Parts)
		return true, err
	})
	if m.stop != nil {
		rp.Stop = stopOf(chatStops, m.stop)
	}
	return err
}

// chatMessage reads a chat answer's message or a chunk's delta: its
// text and reasoning go to text in order (reasoning_content: the
// reasoning text some OpenAI-compatible servers add), each tool call to
// call.
func (t *Converter) chatMessage(text func(ir.Kind, []byte), call func() error) error {
	return t.scan(nil, nil, func(k []byte) (bool, error) {
		kind := ir.KindText
		switch string(k) {
		case "tool_calls":
			return t.items(func(int) error { return call() })
		case "reasoning_content", "reasoning":
			kind = ir.KindReasoning
		case "content", "refusal":
		default:
			return false, nil
		}
		s := ir.StrRS(&t.cur)
		if s != nil {
			text(kind, s)
		}
		return s != nil, nil
	})
}

func (t *Converter) chatResponseCall() error {
	var m members
	custom, err := t.chatCall(&m)
	if err != nil || m.name == nil {
		return err
	}
	p := ir.Part{Kind: ir.KindToolCall, ArgsEscaped: true, ID: m.id, Name: m.name, Args: m.args, Custom: custom}
	if p.Args == nil {
		p.Args = p.Name[:0]
	}
	t.resp.Parts = append(t.resp.Parts, p)
	return nil
}

// chatCall reads a chat tool call object (an answer's or a stream
// delta's): its id and index, and the name and arguments of its function
// (or custom input), reporting whether it is a custom call.
func (t *Converter) chatCall(m *members) (custom bool, err error) {
	m.index = -1
	err = t.scan(m, nil, func(k []byte) (bool, error) {
		if string(k) == "custom" && t.cur.Peek() == '{' {
			custom = true
		}
		return false, nil
	})
	return custom, err
}

// readAnswer reads an answer object into t.resp: its head and usage, and
// each element of the array under parts (Anthropic's content, Responses'
// output) by item; m gets the members the dialect reads its stop from.
func (t *Converter) readAnswer(m *members, parts string, item func() error) error {
	err := t.scan(m, &t.resp.Usage, func(k []byte) (bool, error) {
		if string(k) != parts {
			return false, nil
		}
		return t.items(func(int) error { return item() })
	})
	t.answerHead(m)
	return err
}

func (t *Converter) readMessagesResponse() error {
	rp := &t.resp
	var m members
	err := t.readAnswer(&m, "content", t.anthropicOutBlock)
	if m.stop != nil {
		rp.Stop = stopOf(anthropicStops, m.stop)
	}
	rp.StopSeq = m.stopSeq
	return err
}

// anthropicOutBlock reads one content block of an answer.
func (t *Converter) anthropicOutBlock() error {
	var m members
	var input []byte
	err := t.scan(&m, nil, func(k []byte) (bool, error) {
		if string(k) == "input" && t.cur.Peek() == '{' {
			input = t.cur.Skip()
			return true, nil
		}
		return false, nil
	})
	pk, ok := anthropicBlocks[string(m.typ)]
	if err != nil || !ok {
		return err
	}
	p := ir.Part{Kind: pk.kind, Text: m.text, ID: m.id, Name: m.name, Sig: m.sig, Args: input}
	switch pk.kind {
	case ir.KindToolCall:
		if p.Args == nil {
			p.Args = []byte("{}")
		}
	case ir.KindReasoning:
		p.Origin, p.Redacted = dialect.Messages, pk.alt
	}
	t.resp.Parts = append(t.resp.Parts, p)
	return nil
}

func (t *Converter) readResponsesResponse() error {
	rp := &t.resp
	var m members
	err := t.readAnswer(&m, "output", t.respOutItem)
	rp.Stop = responsesStop(m.status, m.reason, hasCalls(rp.Parts))
	return err
}

// respOutItem reads one output item of a Responses answer.
func (t *Converter) respOutItem() error {
	rp := &t.resp
	var m members
	lo := len(rp.Parts)
	summary := []byte(nil)
	err := t.scan(&m, nil, func(k []byte) (bool, error) {
		switch string(k) {
		case "content":
			return t.items(func(int) error {
				var part members
				err := t.scan(&part, nil, nil)
				if part.text != nil {
					rp.Parts = append(rp.Parts, ir.Part{Kind: ir.KindText, Text: part.text})
				}
				return err
			})
		case "summary":
			start, n := len(t.arena), 0
			ok, err := t.items(func(int) error {
				var part members
				err := t.scan(&part, nil, nil)
				if part.text != nil {
					if n > 0 {
						t.arena = append(t.arena, `\n\n`...)
					}
					t.arena = append(t.arena, part.text...)
					n++
				}
				return err
			})
			if n > 0 {
				summary = t.arena[start:len(t.arena):len(t.arena)]
			}
			return ok, err
		}
		return false, nil
	})
	pk, ok := responsesItems[string(m.typ)]
	switch {
	case err != nil:
		return err
	case !ok:
		rp.Parts = rp.Parts[:lo]
	case pk.kind == ir.KindToolCall:
		rp.Parts = append(rp.Parts[:lo], ir.Part{Kind: ir.KindToolCall, ID: m.callID, Name: m.name, Args: m.args, ArgsEscaped: true, Custom: pk.alt})
	case pk.kind == ir.KindReasoning:
		rp.Parts = append(rp.Parts[:lo], ir.Part{Kind: ir.KindReasoning, ID: m.id, Text: summary, Sig: m.enc, Origin: dialect.Responses})
	}
	return nil
}
