package answer

import (
	"bytes"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Stream encoders: IR stream events written in the caller's dialect.

// event opens an SSE frame ("event:" line when name is not "") and its
// JSON data object; with typ it writes the object's "type" member too.
func event(w *ir.Writer, name, typ string) {
	if name != "" {
		w.B = append(w.B, "event: "...)
		w.B = append(w.B, name...)
		w.B = append(w.B, '\n')
	}
	w.B = append(w.B, "data: "...)
	w.Comma = false
	w.Obj()
	if typ != "" {
		w.Key("type")
		w.Sep()
		w.B = append(w.B, '"')
		w.B = append(w.B, typ...)
		w.B = append(w.B, '"')
		w.Comma = true
	}
}

// endEvent closes the data object and the frame.
func endEvent(w *ir.Writer) {
	w.End('}')
	w.B = append(w.B, "\n\n"...)
	w.Comma = false
}

// Chat Completions caller.

func (t *Converter) chatChunk(w *ir.Writer) {
	event(w, "", "")
	t.chatHead(w, t.streamAbout(), `"chatcmpl-omniroute"`, `"chat.completion.chunk"`)
}

// chunkChoice opens choices[0] and its delta.
func (t *Converter) chunkChoice(w *ir.Writer) {
	t.chatChunk(w)
	w.Obj()
	w.Key("index")
	w.Lit("0")
	w.Key("delta")
	w.Obj()
}

// chunkChoiceEnd closes the delta, choices[0] (with finish_reason) and the
// chunk.
func (t *Converter) chunkChoiceEnd(w *ir.Writer, finish string) {
	w.End('}')
	w.Key("finish_reason")
	w.Lit(finish)
	w.End('}')
	w.End(']')
	if t.st.includeUsage {
		w.Key("usage")
		w.Lit("null")
	}
	endEvent(w)
	t.st.seq++
}

func (t *Converter) chatStart(w *ir.Writer) {
	t.chunkChoice(w)
	w.Key("role")
	w.Lit(`"assistant"`)
	w.Key("content")
	w.Lit(`""`)
	t.chunkChoiceEnd(w, "null")
}

func (t *Converter) chatPartStart(w *ir.Writer) {
	s := &t.st
	if s.open != ir.KindToolCall {
		return
	}
	s.chatCall++
	if s.custom {
		return // sent whole at partStop
	}
	t.chunkChoice(w)
	w.Key("tool_calls")
	w.Arr()
	ir.ChatCall(w, s.chatCall, s.callID, s.name, false, func() { w.Lit(`""`) })
	w.End(']')
	t.chunkChoiceEnd(w, "null")
}

func (t *Converter) chatDelta(w *ir.Writer, d []byte) {
	s := &t.st
	switch s.open {
	case ir.KindText:
		t.chunkChoice(w)
		w.Key("content")
		w.RS(d)
	case ir.KindReasoning:
		t.chunkChoice(w)
		w.Key("reasoning_content")
		w.RS(d)
	case ir.KindToolCall:
		if s.custom {
			s.acc = append(s.acc, d...)
			return
		}
		t.chunkChoice(w)
		w.Key("tool_calls")
		w.Arr()
		w.Obj()
		w.Key("index")
		w.Int(int64(s.chatCall))
		w.Key("function")
		w.Obj()
		w.Key("arguments")
		w.RS(d)
		w.End('}')
		w.End('}')
		w.End(']')
	default:
		return
	}
	t.chunkChoiceEnd(w, "null")
}

func (t *Converter) chatPartStop(w *ir.Writer) {
	s := &t.st
	if s.open != ir.KindToolCall || !s.custom {
		return
	}
	t.chunkChoice(w)
	w.Key("tool_calls")
	w.Arr()
	t.chatCallOut(w, &ir.Part{ID: s.callID, Name: s.name, Args: s.acc, ArgsEscaped: true}, s.chatCall)
	w.End(']')
	t.chunkChoiceEnd(w, "null")
}

func (t *Converter) chatFinish(w *ir.Writer) {
	t.chunkChoice(w)
	t.chunkChoiceEnd(w, chatFinish(t.st.stop))
}

func (t *Converter) chatComplete(w *ir.Writer) {
	if t.st.includeUsage {
		t.chatChunk(w)
		w.End(']')
		w.Key("usage")
		chatUsage(w, &t.st.usage)
		endEvent(w)
		t.st.seq++
	}
	w.B = append(w.B, dialect.DoneFrame...)
	t.st.seq++
}

// Anthropic Messages caller.

func (t *Converter) anthropicStart(w *ir.Writer) {
	event(w, "message_start", "message_start")
	w.Key("message")
	t.anthropicMessage(w, t.streamAbout(), `"msg_omniroute"`, nil, "null", nil, &t.st.usage)
	endEvent(w)
	t.st.seq++
}

func (t *Converter) anthropicBlockIndex(w *ir.Writer) {
	w.Key("index")
	w.Int(int64(t.st.nParts - 1))
}

func (t *Converter) anthropicPartStart(w *ir.Writer) {
	s := &t.st
	event(w, "content_block_start", "content_block_start")
	t.anthropicBlockIndex(w)
	w.Key("content_block")
	switch s.open {
	case ir.KindToolCall:
		w.Obj()
		w.Key("type")
		ir.ToolUseHead(w, s.callID, s.name)
		w.Lit("{}")
		w.End('}')
	case ir.KindReasoning:
		w.Lit(`{"type":"thinking","thinking":"","signature":""}`)
	default:
		w.Lit(`{"type":"text","text":""}`)
	}
	endEvent(w)
	s.seq++
}

// anthropicBlockDelta opens a content_block_delta of the open block.
func (t *Converter) anthropicBlockDelta(w *ir.Writer, typ string) {
	event(w, "content_block_delta", "content_block_delta")
	w.Key("index")
	w.Int(int64(t.st.nParts - 1))
	w.Key("delta")
	w.Obj()
	w.Key("type")
	w.Lit(typ)
}

func (t *Converter) anthropicDelta(w *ir.Writer, d []byte) {
	s := &t.st
	switch s.open {
	case ir.KindText:
		t.anthropicBlockDelta(w, `"text_delta"`)
		w.Key("text")
	case ir.KindReasoning:
		t.anthropicBlockDelta(w, `"thinking_delta"`)
		w.Key("thinking")
	case ir.KindToolCall:
		if s.custom {
			s.acc = append(s.acc, d...)
			return
		}
		t.anthropicBlockDelta(w, `"input_json_delta"`)
		w.Key("partial_json")
	default:
		return
	}
	w.RS(d)
	w.End('}')
	endEvent(w)
	s.seq++
}

func (t *Converter) anthropicPartStop(w *ir.Writer) {
	s := &t.st
	switch {
	case s.open == ir.KindToolCall && s.custom:
		t.anthropicBlockDelta(w, `"input_json_delta"`)
		w.Key("partial_json")
		w.StrBytes(t.customArgs(&ir.Part{Args: s.acc}))
		w.End('}')
		endEvent(w)
		s.seq++
	case s.open == ir.KindReasoning && len(s.sig) > 0 && len(s.partID) > 0:
		t.anthropicBlockDelta(w, `"signature_delta"`)
		w.Key("signature")
		envelope(w, ir.EnvResponses, s.partID, s.sig)
		w.End('}')
		endEvent(w)
		s.seq++
	}
	event(w, "content_block_stop", "content_block_stop")
	w.Key("index")
	w.Int(int64(s.nParts - 1))
	endEvent(w)
	s.seq++
}

func (t *Converter) anthropicComplete(w *ir.Writer) {
	s := &t.st
	event(w, "message_delta", "message_delta")
	w.Key("delta")
	w.Obj()
	w.Key("stop_reason")
	w.Lit(anthropicStopName(s.stop))
	w.Key("stop_sequence")
	if len(s.stopSeq) > 0 {
		w.RS(s.stopSeq)
	} else {
		w.Lit("null")
	}
	w.End('}')
	w.Key("usage")
	anthropicUsage(w, &s.usage)
	endEvent(w)
	event(w, "message_stop", "message_stop")
	endEvent(w)
	s.seq += 2
}

// Responses caller.

func (t *Converter) respEvent(w *ir.Writer, typ string) {
	event(w, typ, typ)
	w.Key("sequence_number")
	w.Int(int64(t.st.seq))
	t.st.seq++
}

// streamResponse writes the response object of the opening and closing
// events (final: with the items done and the usage).
func (t *Converter) streamResponse(w *ir.Writer, status, reason string, final bool) {
	s := &t.st
	var u *dialect.Usage
	if final {
		u = &s.usage
	}
	t.responseObject(w, t.streamAbout(), s.respID, status, reason, func() {
		if final {
			w.Raw(s.items)
		}
	}, u)
}

func (t *Converter) responsesStart(w *ir.Writer) {
	s := &t.st
	if len(s.id) == 0 {
		s.respID = append(s.respID[:0], "resp_omniroute"...)
	} else if bytes.HasPrefix(s.id, []byte("resp_")) {
		s.respID = append(s.respID[:0], s.id...)
	} else {
		s.respID = append(append(s.respID[:0], "resp_"...), s.id...)
	}
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		t.respEvent(w, typ)
		w.Key("response")
		t.streamResponse(w, `"in_progress"`, "", false)
		endEvent(w)
	}
}

// itemRef writes the item_id and output_index of the open part.
func (t *Converter) itemRef(w *ir.Writer) {
	w.Key("item_id")
	t.itemID(w)
	w.Key("output_index")
	w.Int(int64(t.st.nParts - 1))
}

// itemID writes the open part's item id.
func (t *Converter) itemID(w *ir.Writer) {
	s := &t.st
	prefix := "msg_"
	switch s.open {
	case ir.KindToolCall:
		prefix = "fc_"
	case ir.KindReasoning:
		prefix = "rs_"
	}
	idWith(w, prefix, s.respID, s.nParts-1)
}

// streamItem writes the open part's output item (done: completed, with its
// accumulated content) as a whole answer's item is written.
func (t *Converter) streamItem(w *ir.Writer, done bool) {
	s := &t.st
	var input []byte
	p := ir.Part{Kind: s.open}
	switch s.open {
	case ir.KindText:
		texts := [1]ir.Part{{Kind: ir.KindText, Text: s.acc}}
		t.responsesMessageItem(w, s.respID, s.nParts-1, texts[:], done)
		return
	case ir.KindToolCall:
		p.ID, p.Name, p.Args, p.ArgsEscaped, p.Custom = s.callID, s.name, s.acc, true, s.custom
		if s.custom && done {
			input = s.sig // the extracted input, see responsesPartStop
		}
	case ir.KindReasoning:
		p.Text, p.Origin, p.Redacted = s.acc, dialect.Messages, s.redacted
		if len(s.sig) > 0 {
			p.Sig = s.sig
		}
	}
	t.responsesItem(w, s.respID, s.nParts-1, &p, done, input)
}

func (t *Converter) responsesPartStart(w *ir.Writer) {
	s := &t.st
	t.respEvent(w, "response.output_item.added")
	w.Key("output_index")
	w.Int(int64(s.nParts - 1))
	w.Key("item")
	t.streamItem(w, false)
	endEvent(w)
	switch s.open {
	case ir.KindText:
		t.partEvent(w, "response.content_part.added", "content_index")
		w.Key("part")
		w.Lit(`{"type":"output_text","text":"","annotations":[]}`)
		endEvent(w)
	case ir.KindReasoning:
		t.partEvent(w, "response.reasoning_summary_part.added", "summary_index")
		w.Key("part")
		w.Lit(`{"type":"summary_text","text":""}`)
		endEvent(w)
	}
}

func (t *Converter) responsesDelta(w *ir.Writer, d []byte) {
	s := &t.st
	s.acc = append(s.acc, d...)
	switch s.open {
	case ir.KindText:
		t.partEvent(w, "response.output_text.delta", "content_index")
		w.Key("delta")
		w.RS(d)
		w.Key("logprobs")
		w.Lit("[]")
	case ir.KindToolCall:
		if s.custom {
			return // the input is extracted whole at the end
		}
		t.respEvent(w, "response.function_call_arguments.delta")
		t.itemRef(w)
		w.Key("delta")
		w.RS(d)
	case ir.KindReasoning:
		t.partEvent(w, "response.reasoning_summary_text.delta", "summary_index")
		w.Key("delta")
		w.RS(d)
	default:
		return
	}
	endEvent(w)
}

// partEvent opens a Responses event of the open item's one part: the
// event, the item's reference and the part's index, 0 (index is
// content_index for a message's text, summary_index for a reasoning
// item's summary).
func (t *Converter) partEvent(w *ir.Writer, typ, index string) {
	t.respEvent(w, typ)
	t.itemRef(w)
	w.Key(index)
	w.Lit("0")
}

func (t *Converter) responsesPartStop(w *ir.Writer) {
	s := &t.st
	switch s.open {
	case ir.KindText:
		t.partEvent(w, "response.output_text.done", "content_index")
		w.Key("text")
		w.RS(s.acc)
		w.Key("logprobs")
		w.Lit("[]")
		endEvent(w)
		t.partEvent(w, "response.content_part.done", "content_index")
		w.Key("part")
		outputText(w, s.acc)
		endEvent(w)
	case ir.KindToolCall:
		if s.custom {
			// The upstream saw a function taking {"input": …}; the caller
			// gets its free-form input back. s.sig holds it as a literal.
			iw := ir.Writer{B: s.sig[:0]}
			t.customInput(&iw, &ir.Part{Args: s.acc, ArgsEscaped: true})
			s.sig = iw.B
			t.respEvent(w, "response.custom_tool_call_input.delta")
			t.itemRef(w)
			w.Key("delta")
			w.Raw(s.sig)
			endEvent(w)
			t.respEvent(w, "response.custom_tool_call_input.done")
			t.itemRef(w)
			w.Key("input")
			w.Raw(s.sig)
			endEvent(w)
			break
		}
		t.respEvent(w, "response.function_call_arguments.done")
		t.itemRef(w)
		w.Key("name")
		w.RS(s.name)
		w.Key("arguments")
		w.RS(s.acc)
		endEvent(w)
	case ir.KindReasoning:
		t.partEvent(w, "response.reasoning_summary_text.done", "summary_index")
		w.Key("text")
		w.RS(s.acc)
		endEvent(w)
		t.partEvent(w, "response.reasoning_summary_part.done", "summary_index")
		w.Key("part")
		ir.TextPart(w, `"summary_text"`, s.acc)
		endEvent(w)
	}
	// The done item goes to the caller and into the final output list.
	iw := ir.Writer{B: s.items, Comma: len(s.items) > 0}
	start := len(iw.B)
	if iw.Comma {
		start++
	}
	t.streamItem(&iw, true)
	s.items = iw.B
	t.respEvent(w, "response.output_item.done")
	w.Key("output_index")
	w.Int(int64(s.nParts - 1))
	w.Key("item")
	w.Raw(s.items[start:])
	endEvent(w)
}

func (t *Converter) responsesComplete(w *ir.Writer) {
	s := &t.st
	status, reason := responsesStatus(s.stop)
	if reason != "" {
		t.respEvent(w, "response.incomplete")
	} else {
		t.respEvent(w, "response.completed")
	}
	w.Key("response")
	t.streamResponse(w, status, reason, true)
	endEvent(w)
}

func (t *Converter) responsesFail(w *ir.Writer, e *apierror.Error) {
	s := &t.st
	w.B = dialect.Of(dialect.Responses).AppendInterrupt(w.B, e, "", dialect.StreamPosition{Seq: s.seq, ResponseID: s.respID})
	s.seq += 2
}
