package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
)

// Stream encoders: IR stream events written in the caller's dialect.

// event opens an SSE frame ("event:" line when name is not "") and its
// JSON data object; with typ it writes the object's "type" member too.
func event(w *writer, name, typ string) {
	if name != "" {
		w.b = append(w.b, "event: "...)
		w.b = append(w.b, name...)
		w.b = append(w.b, '\n')
	}
	w.b = append(w.b, "data: "...)
	w.comma = false
	w.obj()
	if typ != "" {
		w.key("type")
		w.sep()
		w.b = append(w.b, '"')
		w.b = append(w.b, typ...)
		w.b = append(w.b, '"')
		w.comma = true
	}
}

// endEvent closes the data object and the frame.
func endEvent(w *writer) {
	w.end('}')
	w.b = append(w.b, "\n\n"...)
	w.comma = false
}

func (t *Translator) streamModel(w *writer) {
	if len(t.opts.ReplyModel) > 0 {
		w.strBytes(t.opts.ReplyModel)
	} else if len(t.st.model) > 0 {
		w.rs(t.st.model)
	} else {
		w.str(t.opts.Model)
	}
}

func (t *Translator) streamID(w *writer, fallback string) {
	if len(t.st.id) > 0 {
		w.rs(t.st.id)
	} else {
		w.lit(fallback)
	}
}

func (t *Translator) streamCreated() int64 {
	if t.st.created > 0 {
		return t.st.created
	}
	return t.opts.Created
}

// Chat Completions caller.

func (t *Translator) chatChunk(w *writer) {
	event(w, "", "")
	w.key("id")
	t.streamID(w, `"chatcmpl-omniroute"`)
	w.key("object")
	w.lit(`"chat.completion.chunk"`)
	w.key("created")
	w.int(t.streamCreated())
	w.key("model")
	t.streamModel(w)
	w.key("choices")
	w.arr()
}

// chunkChoice opens choices[0] and its delta.
func (t *Translator) chunkChoice(w *writer) {
	t.chatChunk(w)
	w.obj()
	w.key("index")
	w.lit("0")
	w.key("delta")
	w.obj()
}

// chunkChoiceEnd closes the delta, choices[0] (with finish_reason) and the
// chunk.
func (t *Translator) chunkChoiceEnd(w *writer, finish string) {
	w.end('}')
	w.key("finish_reason")
	w.lit(finish)
	w.end('}')
	w.end(']')
	if t.st.includeUsage {
		w.key("usage")
		w.lit("null")
	}
	endEvent(w)
	t.st.seq++
}

func (t *Translator) chatStart(w *writer) {
	t.chunkChoice(w)
	w.key("role")
	w.lit(`"assistant"`)
	w.key("content")
	w.lit(`""`)
	t.chunkChoiceEnd(w, "null")
}

func (t *Translator) chatPartStart(w *writer) {
	s := &t.st
	if s.open != KindToolCall {
		return
	}
	s.chatCall++
	if s.custom {
		return // sent whole at partStop
	}
	t.chunkChoice(w)
	w.key("tool_calls")
	w.arr()
	w.obj()
	w.key("index")
	w.int(int64(s.chatCall))
	w.key("id")
	w.rs(s.callID)
	w.key("type")
	w.lit(`"function"`)
	w.key("function")
	w.obj()
	w.key("name")
	w.rs(s.name)
	w.key("arguments")
	w.lit(`""`)
	w.end('}')
	w.end('}')
	w.end(']')
	t.chunkChoiceEnd(w, "null")
}

func (t *Translator) chatDelta(w *writer, d []byte) {
	s := &t.st
	switch s.open {
	case KindText:
		t.chunkChoice(w)
		w.key("content")
		w.rs(d)
	case KindReasoning:
		t.chunkChoice(w)
		w.key("reasoning_content")
		w.rs(d)
	case KindToolCall:
		if s.custom {
			s.acc = append(s.acc, d...)
			return
		}
		t.chunkChoice(w)
		w.key("tool_calls")
		w.arr()
		w.obj()
		w.key("index")
		w.int(int64(s.chatCall))
		w.key("function")
		w.obj()
		w.key("arguments")
		w.rs(d)
		w.end('}')
		w.end('}')
		w.end(']')
	default:
		return
	}
	t.chunkChoiceEnd(w, "null")
}

func (t *Translator) chatPartStop(w *writer) {
	s := &t.st
	if s.open != KindToolCall || !s.custom {
		return
	}
	t.chunkChoice(w)
	w.key("tool_calls")
	w.arr()
	t.chatCallOut(w, &Part{ID: s.callID, Name: s.name, Args: s.acc, ArgsEscaped: true}, s.chatCall)
	w.end(']')
	t.chunkChoiceEnd(w, "null")
}

func (t *Translator) chatFinish(w *writer) {
	t.chunkChoice(w)
	t.chunkChoiceEnd(w, chatFinish(t.st.stop))
}

func (t *Translator) chatComplete(w *writer) {
	if t.st.includeUsage {
		t.chatChunk(w)
		w.end(']')
		w.key("usage")
		chatUsage(w, &t.st.usage)
		endEvent(w)
		t.st.seq++
	}
	w.b = append(w.b, dialect.DoneFrame...)
	t.st.seq++
}

// Anthropic Messages caller.

func (t *Translator) anthropicStart(w *writer) {
	event(w, "message_start", "message_start")
	w.key("message")
	w.obj()
	w.key("id")
	t.streamID(w, `"msg_omniroute"`)
	w.key("type")
	w.lit(`"message"`)
	w.key("role")
	w.lit(`"assistant"`)
	w.key("model")
	t.streamModel(w)
	w.key("content")
	w.lit("[]")
	w.key("stop_reason")
	w.lit("null")
	w.key("stop_sequence")
	w.lit("null")
	w.key("usage")
	anthropicUsage(w, &t.st.usage)
	w.end('}')
	endEvent(w)
	t.st.seq++
}

func (t *Translator) anthropicBlockIndex(w *writer) {
	w.key("index")
	w.int(int64(t.st.nParts - 1))
}

func (t *Translator) anthropicPartStart(w *writer) {
	s := &t.st
	event(w, "content_block_start", "content_block_start")
	t.anthropicBlockIndex(w)
	w.key("content_block")
	switch s.open {
	case KindToolCall:
		w.obj()
		w.key("type")
		w.lit(`"tool_use"`)
		w.key("id")
		toolID(w, s.callID)
		w.key("name")
		w.rs(s.name)
		w.key("input")
		w.lit("{}")
		w.end('}')
	case KindReasoning:
		w.lit(`{"type":"thinking","thinking":"","signature":""}`)
	default:
		w.lit(`{"type":"text","text":""}`)
	}
	endEvent(w)
	s.seq++
}

// anthropicBlockDelta opens a content_block_delta of the open block.
func (t *Translator) anthropicBlockDelta(w *writer, typ string) {
	event(w, "content_block_delta", "content_block_delta")
	w.key("index")
	w.int(int64(t.st.nParts - 1))
	w.key("delta")
	w.obj()
	w.key("type")
	w.lit(typ)
}

func (t *Translator) anthropicDelta(w *writer, d []byte) {
	s := &t.st
	switch s.open {
	case KindText:
		t.anthropicBlockDelta(w, `"text_delta"`)
		w.key("text")
	case KindReasoning:
		t.anthropicBlockDelta(w, `"thinking_delta"`)
		w.key("thinking")
	case KindToolCall:
		if s.custom {
			s.acc = append(s.acc, d...)
			return
		}
		t.anthropicBlockDelta(w, `"input_json_delta"`)
		w.key("partial_json")
	default:
		return
	}
	w.rs(d)
	w.end('}')
	endEvent(w)
	s.seq++
}

func (t *Translator) anthropicPartStop(w *writer) {
	s := &t.st
	switch {
	case s.open == KindToolCall && s.custom:
		t.anthropicBlockDelta(w, `"input_json_delta"`)
		w.key("partial_json")
		w.strBytes(t.customArgs(&Part{Args: s.acc}))
		w.end('}')
		endEvent(w)
		s.seq++
	case s.open == KindReasoning && len(s.sig) > 0 && len(s.partID) > 0:
		t.anthropicBlockDelta(w, `"signature_delta"`)
		w.key("signature")
		envelope(w, envResponses, s.partID, s.sig)
		w.end('}')
		endEvent(w)
		s.seq++
	}
	event(w, "content_block_stop", "content_block_stop")
	w.key("index")
	w.int(int64(s.nParts - 1))
	endEvent(w)
	s.seq++
}

func (t *Translator) anthropicComplete(w *writer) {
	s := &t.st
	event(w, "message_delta", "message_delta")
	w.key("delta")
	w.obj()
	w.key("stop_reason")
	w.lit(anthropicStopName(s.stop))
	w.key("stop_sequence")
	if len(s.stopSeq) > 0 {
		w.rs(s.stopSeq)
	} else {
		w.lit("null")
	}
	w.end('}')
	w.key("usage")
	anthropicUsage(w, &s.usage)
	endEvent(w)
	event(w, "message_stop", "message_stop")
	endEvent(w)
	s.seq += 2
}

// Responses caller.

func (t *Translator) respEvent(w *writer, typ string) {
	event(w, typ, typ)
	w.key("sequence_number")
	w.int(int64(t.st.seq))
	t.st.seq++
}

// responseObject writes the response object of the opening and closing
// events.
func (t *Translator) responseObject(w *writer, status, reason string, final bool) {
	s := &t.st
	w.obj()
	w.key("id")
	w.rs(s.respID)
	w.key("object")
	w.lit(`"response"`)
	w.key("created_at")
	w.int(t.streamCreated())
	w.key("status")
	w.lit(status)
	w.key("error")
	w.lit("null")
	w.key("incomplete_details")
	if reason != "" {
		w.obj()
		w.key("reason")
		w.lit(reason)
		w.end('}')
	} else {
		w.lit("null")
	}
	w.key("model")
	t.streamModel(w)
	w.key("output")
	w.arr()
	if final {
		w.raw(s.items)
	}
	w.end(']')
	w.key("parallel_tool_calls")
	w.lit("true")
	w.key("store")
	w.lit("false")
	w.key("usage")
	if final {
		responsesUsage(w, &s.usage)
	} else {
		w.lit("null")
	}
	w.end('}')
}

func (t *Translator) responsesStart(w *writer) {
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
		w.key("response")
		t.responseObject(w, `"in_progress"`, "", false)
		endEvent(w)
	}
}

// itemRef writes the item_id and output_index of the open part.
func (t *Translator) itemRef(w *writer) {
	w.key("item_id")
	t.itemID(w)
	w.key("output_index")
	w.int(int64(t.st.nParts - 1))
}

// itemID writes the open part's item id.
func (t *Translator) itemID(w *writer) {
	s := &t.st
	prefix := "msg_"
	switch s.open {
	case KindToolCall:
		prefix = "fc_"
	case KindReasoning:
		prefix = "rs_"
	}
	idWith(w, prefix, s.respID, s.nParts-1)
}

// streamItem writes the open part's output item (done: completed, with its
// accumulated content).
func (t *Translator) streamItem(w *writer, done bool) {
	s := &t.st
	w.obj()
	w.key("id")
	t.itemID(w)
	switch s.open {
	case KindText:
		w.key("type")
		w.lit(`"message"`)
		w.key("status")
		w.lit(doneStatus(done))
		w.key("role")
		w.lit(`"assistant"`)
		w.key("content")
		w.arr()
		if done {
			outputText(w, s.acc)
		}
		w.end(']')
	case KindToolCall:
		w.key("type")
		if s.custom {
			w.lit(`"custom_tool_call"`)
		} else {
			w.lit(`"function_call"`)
		}
		w.key("status")
		w.lit(doneStatus(done))
		w.key("call_id")
		w.rs(s.callID)
		w.key("name")
		w.rs(s.name)
		if s.custom {
			w.key("input")
			if done {
				w.raw(s.sig) // the extracted input, see responsesPartStop
			} else {
				w.lit(`""`)
			}
		} else {
			w.key("arguments")
			if done {
				w.rs(s.acc)
			} else {
				w.lit(`""`)
			}
		}
	case KindReasoning:
		w.key("type")
		w.lit(`"reasoning"`)
		if done {
			summary(w, s.acc)
		} else {
			summary(w, nil)
		}
		if done && len(s.sig) > 0 {
			encryptedContent(w, &Part{Sig: s.sig, Origin: dialect.Messages, Redacted: s.redacted})
		}
	}
	w.end('}')
}

func doneStatus(done bool) string {
	if done {
		return `"completed"`
	}
	return `"in_progress"`
}

func (t *Translator) responsesPartStart(w *writer) {
	s := &t.st
	t.respEvent(w, "response.output_item.added")
	w.key("output_index")
	w.int(int64(s.nParts - 1))
	w.key("item")
	t.streamItem(w, false)
	endEvent(w)
	switch s.open {
	case KindText:
		t.respEvent(w, "response.content_part.added")
		t.itemRef(w)
		w.key("content_index")
		w.lit("0")
		w.key("part")
		w.lit(`{"type":"output_text","text":"","annotations":[]}`)
		endEvent(w)
	case KindReasoning:
		t.respEvent(w, "response.reasoning_summary_part.added")
		t.itemRef(w)
		w.key("summary_index")
		w.lit("0")
		w.key("part")
		w.lit(`{"type":"summary_text","text":""}`)
		endEvent(w)
	}
}

func (t *Translator) responsesDelta(w *writer, d []byte) {
	s := &t.st
	s.acc = append(s.acc, d...)
	switch s.open {
	case KindText:
		t.respEvent(w, "response.output_text.delta")
		t.itemRef(w)
		w.key("content_index")
		w.lit("0")
		w.key("delta")
		w.rs(d)
		w.key("logprobs")
		w.lit("[]")
	case KindToolCall:
		if s.custom {
			return // the input is extracted whole at the end
		}
		t.respEvent(w, "response.function_call_arguments.delta")
		t.itemRef(w)
		w.key("delta")
		w.rs(d)
	case KindReasoning:
		t.respEvent(w, "response.reasoning_summary_text.delta")
		t.itemRef(w)
		w.key("summary_index")
		w.lit("0")
		w.key("delta")
		w.rs(d)
	default:
		return
	}
	endEvent(w)
}

func (t *Translator) responsesPartStop(w *writer) {
	s := &t.st
	switch s.open {
	case KindText:
		t.respEvent(w, "response.output_text.done")
		t.itemRef(w)
		w.key("content_index")
		w.lit("0")
		w.key("text")
		w.rs(s.acc)
		w.key("logprobs")
		w.lit("[]")
		endEvent(w)
		t.respEvent(w, "response.content_part.done")
		t.itemRef(w)
		w.key("content_index")
		w.lit("0")
		w.key("part")
		outputText(w, s.acc)
		endEvent(w)
	case KindToolCall:
		if s.custom {
			// The upstream saw a function taking {"input": …}; the caller
			// gets its free-form input back. s.sig holds it as a literal.
			iw := writer{b: s.sig[:0]}
			t.customInput(&iw, &Part{Args: s.acc, ArgsEscaped: true})
			s.sig = iw.b
			t.respEvent(w, "response.custom_tool_call_input.delta")
			t.itemRef(w)
			w.key("delta")
			w.raw(s.sig)
			endEvent(w)
			t.respEvent(w, "response.custom_tool_call_input.done")
			t.itemRef(w)
			w.key("input")
			w.raw(s.sig)
			endEvent(w)
			break
		}
		t.respEvent(w, "response.function_call_arguments.done")
		t.itemRef(w)
		w.key("name")
		w.rs(s.name)
		w.key("arguments")
		w.rs(s.acc)
		endEvent(w)
	case KindReasoning:
		t.respEvent(w, "response.reasoning_summary_text.done")
		t.itemRef(w)
		w.key("summary_index")
		w.lit("0")
		w.key("text")
		w.rs(s.acc)
		endEvent(w)
		t.respEvent(w, "response.reasoning_summary_part.done")
		t.itemRef(w)
		w.key("summary_index")
		w.lit("0")
		w.key("part")
		w.obj()
		w.key("type")
		w.lit(`"summary_text"`)
		w.key("text")
		w.rs(s.acc)
		w.end('}')
		endEvent(w)
	}
	// The done item goes to the caller and into the final output list.
	iw := writer{b: s.items, comma: len(s.items) > 0}
	start := len(iw.b)
	if iw.comma {
		start++
	}
	t.streamItem(&iw, true)
	s.items = iw.b
	t.respEvent(w, "response.output_item.done")
	w.key("output_index")
	w.int(int64(s.nParts - 1))
	w.key("item")
	w.raw(s.items[start:])
	endEvent(w)
}

func (t *Translator) responsesComplete(w *writer) {
	s := &t.st
	status, reason := responsesStatus(s.stop)
	if reason != "" {
		t.respEvent(w, "response.incomplete")
	} else {
		t.respEvent(w, "response.completed")
	}
	w.key("response")
	t.responseObject(w, status, reason, true)
	endEvent(w)
}

func (t *Translator) responsesFail(w *writer, e *apierror.Error) {
	s := &t.st
	w.b = dialect.Of(dialect.Responses).AppendInterrupt(w.b, e, "", dialect.StreamPosition{Seq: s.seq, ResponseID: s.respID})
	s.seq += 2
}
