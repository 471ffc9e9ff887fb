package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Writers of non-stream answers, and the pieces streams share with them.

func chatUsage(w *writer, u *dialect.Usage) {
	w.obj()
	w.key("prompt_tokens")
	w.int(u.Input)
	w.key("completion_tokens")
	w.int(u.Output)
	w.key("total_tokens")
	w.int(u.Input + u.Output)
	w.key("prompt_tokens_details")
	w.obj()
	w.key("cached_tokens")
	w.int(u.CacheRead)
	w.end('}')
	w.key("completion_tokens_details")
	w.obj()
	w.key("reasoning_tokens")
	w.int(u.Reasoning)
	w.end('}')
	w.end('}')
}

func anthropicUsage(w *writer, u *dialect.Usage) {
	w.obj()
	w.key("input_tokens")
	w.int(max(u.Input-u.CacheRead-u.CacheWrite, 0))
	w.key("cache_creation_input_tokens")
	w.int(u.CacheWrite)
	w.key("cache_read_input_tokens")
	w.int(u.CacheRead)
	w.key("output_tokens")
	w.int(u.Output)
	w.end('}')
}

func responsesUsage(w *writer, u *dialect.Usage) {
	w.obj()
	w.key("input_tokens")
	w.int(u.Input)
	w.key("input_tokens_details")
	w.obj()
	w.key("cached_tokens")
	w.int(u.CacheRead)
	w.end('}')
	w.key("output_tokens")
	w.int(u.Output)
	w.key("output_tokens_details")
	w.obj()
	w.key("reasoning_tokens")
	w.int(u.Reasoning)
	w.end('}')
	w.key("total_tokens")
	w.int(u.Input + u.Output)
	w.end('}')
}

// finalStop is the stop reason to report: a turn that ends normally with
// tool calls in it stopped to use them (some OpenAI-compatible servers
// say "stop" there).
func finalStop(s StopReason, hasCalls bool) StopReason {
	if s == StopUnset || (s == StopEnd && hasCalls) {
		if hasCalls {
			return StopToolUse
		}
		return StopEnd
	}
	return s
}

func chatFinish(s StopReason) string {
	switch s {
	case StopMaxTokens, StopContextWindow:
		return `"length"`
	case StopToolUse:
		return `"tool_calls"`
	case StopRefusal:
		return `"content_filter"`
	}
	return `"stop"`
}

func anthropicStopName(s StopReason) string {
	switch s {
	case StopMaxTokens:
		return `"max_tokens"`
	case StopSequence:
		return `"stop_sequence"`
	case StopToolUse:
		return `"tool_use"`
	case StopRefusal:
		return `"refusal"`
	case StopPause:
		return `"pause_turn"`
	case StopContextWindow:
		return `"model_context_window_exceeded"`
	}
	return `"end_turn"`
}

// responsesStatus is a Responses answer's status and incomplete reason.
func responsesStatus(s StopReason) (status, reason string) {
	switch s {
	case StopMaxTokens, StopContextWindow:
		return `"incomplete"`, `"max_output_tokens"`
	case StopRefusal:
		return `"incomplete"`, `"content_filter"`
	}
	return `"completed"`, ""
}

// outputText writes a Responses output_text content part.
func outputText(w *writer, text []byte) {
	w.obj()
	w.key("type")
	w.lit(`"output_text"`)
	w.key("text")
	w.rs(text)
	w.key("annotations")
	w.lit("[]")
	w.end('}')
}

// summary writes a Responses reasoning item's summary: one summary_text
// part holding text, or none.
func summary(w *writer, text []byte) {
	w.key("summary")
	w.arr()
	if len(text) > 0 {
		w.obj()
		w.key("type")
		w.lit(`"summary_text"`)
		w.key("text")
		w.rs(text)
		w.end('}')
	}
	w.end(']')
}

// envelope writes the string prefix+a[+":"+b]: reasoning state tagged
// with the dialect that can read it (see read_messages.go).
func envelope(w *writer, prefix string, a, b []byte) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, prefix...)
	w.b = append(w.b, a...)
	if b != nil {
		w.b = append(w.b, ':')
		w.b = append(w.b, b...)
	}
	w.b = append(w.b, '"')
	w.comma = true
}

// anthropicSignature writes the signature an Anthropic caller keeps for
// reasoning another dialect made: OpenAI's encrypted reasoning in an
// envelope, or "" when there is nothing to carry.
func anthropicSignature(w *writer, p *Part) {
	if p.Origin == dialect.Responses && p.ID != nil && p.Sig != nil {
		envelope(w, envResponses, p.ID, p.Sig)
		return
	}
	if p.Origin == dialect.Messages {
		w.rsOrEmpty(p.Sig)
		return
	}
	w.lit(`""`)
}

// encryptedContent writes the encrypted_content a Responses caller keeps
// for reasoning: Anthropic's signature in an envelope, OpenAI's own as is.
func encryptedContent(w *writer, p *Part) {
	switch {
	case p.Sig == nil:
	case p.Origin == dialect.Messages && p.Redacted:
		w.key("encrypted_content")
		envelope(w, envRedacted, p.Sig, nil)
	case p.Origin == dialect.Messages:
		w.key("encrypted_content")
		envelope(w, envMessages, p.Sig, nil)
	case p.Origin == dialect.Responses:
		w.key("encrypted_content")
		w.rs(p.Sig)
	}
}

// idWith writes "prefix" + base + "_" + n as an id: item ids a Responses
// caller needs that the upstream did not make.
func idWith(w *writer, prefix string, base []byte, n int) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, prefix...)
	w.b = append(w.b, base...)
	w.b = append(w.b, '_')
	w.b = appendUint(w.b, n)
	w.b = append(w.b, '"')
	w.comma = true
}

func appendUint(b []byte, n int) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// customInput writes the free-form input of a call to a caller's custom
// tool, which the upstream saw as a function taking {"input": string}.
// Arguments of another shape are passed whole as the input text.
func (t *Translator) customInput(w *writer, p *Part) {
	text := p.Args
	if p.ArgsEscaped {
		var ok bool
		if t.tmp, ok = unescapeRS(t.tmp[:0], p.Args); ok {
			text = t.tmp
		}
	}
	var c jsonscan.Cursor
	c.Reset(text)
	if c.Peek() == '{' {
		c.Object()
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if string(k) == "input" {
				if s := strRS(&c); s != nil {
					w.rs(s)
					return
				}
			}
			c.Skip()
		}
	}
	w.strBytes(text)
}

// toolInput writes a tool call's arguments as an Anthropic input object
// in an answer. A model that wrote arguments that are not a JSON object
// cannot be refused after the fact; its text is kept under one key so the
// tool reports the mistake instead of running on made-up input.
func (t *Translator) toolInput(w *writer, p *Part) {
	if !p.ArgsEscaped {
		w.raw(p.Args)
		return
	}
	var ok bool
	t.tmp, ok = unescapeRS(t.tmp[:0], p.Args)
	text := bytes.TrimSpace(t.tmp)
	switch {
	case ok && len(text) == 0:
		w.lit("{}")
	case ok && isObject(text):
		w.raw(text)
	default:
		w.obj()
		w.key(InvalidArgumentsKey)
		w.rs(p.Args)
		w.end('}')
	}
}

// InvalidArgumentsKey holds, in an Anthropic tool_use input, arguments an
// upstream model wrote that are not a JSON object.
const InvalidArgumentsKey = "_invalid_arguments"

func (t *Translator) respModel(w *writer) {
	if len(t.opts.ReplyModel) > 0 {
		w.strBytes(t.opts.ReplyModel)
	} else if t.resp.Model != nil {
		w.rs(t.resp.Model)
	} else {
		w.str(t.opts.Model)
	}
}

func (t *Translator) respCreated() int64 {
	if t.resp.Created > 0 {
		return t.resp.Created
	}
	return t.opts.Created
}

func hasCalls(parts []Part) bool {
	for i := range parts {
		if parts[i].Kind == KindToolCall {
			return true
		}
	}
	return false
}

// respID is the upstream's answer id, or a fixed one.
func (t *Translator) respID() []byte {
	if t.resp.ID != nil {
		return t.resp.ID
	}
	return []byte("omniroute")
}

func (t *Translator) writeChatResponse(dst []byte) []byte {
	rp := &t.resp
	w := writer{b: dst}
	w.obj()
	w.key("id")
	w.rs(t.respID())
	w.key("object")
	w.lit(`"chat.completion"`)
	w.key("created")
	w.int(t.respCreated())
	w.key("model")
	t.respModel(&w)
	w.key("choices")
	w.arr()
	w.obj()
	w.key("index")
	w.lit("0")
	w.key("message")
	w.obj()
	w.key("role")
	w.lit(`"assistant"`)
	w.key("content")
	texts := 0
	for i := range rp.Parts {
		if rp.Parts[i].Kind == KindText {
			texts++
		}
	}
	if texts == 0 {
		w.lit("null")
	} else {
		joinText(&w, rp.Parts)
	}
	w.key("refusal")
	w.lit("null")
	for i := range rp.Parts {
		if p := &rp.Parts[i]; p.Kind == KindReasoning && len(p.Text) > 0 {
			// reasoning_content: the field OpenAI-compatible clients read
			// reasoning text from; chat has no standard one.
			w.key("reasoning_content")
			w.rs(p.Text)
			break
		}
	}
	if hasCalls(rp.Parts) {
		w.key("tool_calls")
		w.arr()
		for i := range rp.Parts {
			if p := &rp.Parts[i]; p.Kind == KindToolCall {
				t.chatCallOut(&w, p, -1)
			}
		}
		w.end(']')
	}
	w.end('}')
	w.key("finish_reason")
	w.lit(chatFinish(finalStop(rp.Stop, hasCalls(rp.Parts))))
	w.key("logprobs")
	w.lit("null")
	w.end('}')
	w.end(']')
	w.key("usage")
	chatUsage(&w, &rp.Usage)
	w.end('}')
	return w.b
}

// chatCallOut writes one tool call of a chat answer (index ≥ 0: a stream
// delta's tool_calls entry).
func (t *Translator) chatCallOut(w *writer, p *Part, index int) {
	w.obj()
	if index >= 0 {
		w.key("index")
		w.int(int64(index))
	}
	w.key("id")
	w.rs(p.ID)
	custom := p.Custom || t.isCustom(p.Name)
	w.key("type")
	if custom {
		w.lit(`"custom"`)
		w.key("custom")
		w.obj()
		w.key("name")
		w.rs(p.Name)
		w.key("input")
		if p.Custom {
			w.rs(p.Args)
		} else {
			t.customInput(w, p)
		}
	} else {
		w.lit(`"function"`)
		w.key("function")
		w.obj()
		w.key("name")
		w.rs(p.Name)
		w.key("arguments")
		t.argsString(w, p)
	}
	w.end('}')
	w.end('}')
}

func (t *Translator) writeMessagesResponse(dst []byte) []byte {
	rp := &t.resp
	w := writer{b: dst}
	w.obj()
	w.key("id")
	w.rs(t.respID())
	w.key("type")
	w.lit(`"message"`)
	w.key("role")
	w.lit(`"assistant"`)
	w.key("model")
	t.respModel(&w)
	w.key("content")
	w.arr()
	for i := range rp.Parts {
		p := &rp.Parts[i]
		switch p.Kind {
		case KindText:
			if len(p.Text) == 0 {
				continue
			}
			w.obj()
			w.key("type")
			w.lit(`"text"`)
			w.key("text")
			w.rs(p.Text)
			w.end('}')
		case KindToolCall:
			w.obj()
			w.key("type")
			w.lit(`"tool_use"`)
			w.key("id")
			toolID(&w, p.ID)
			w.key("name")
			w.rs(p.Name)
			w.key("input")
			if p.Custom {
				w.raw(t.customArgs(p))
			} else {
				t.toolInput(&w, p)
			}
			w.end('}')
		case KindReasoning:
			w.obj()
			w.key("type")
			w.lit(`"thinking"`)
			w.key("thinking")
			w.rsOrEmpty(p.Text)
			w.key("signature")
			anthropicSignature(&w, p)
			w.end('}')
		}
	}
	w.end(']')
	w.key("stop_reason")
	w.lit(anthropicStopName(finalStop(rp.Stop, hasCalls(rp.Parts))))
	w.key("stop_sequence")
	if rp.StopSeq != nil {
		w.rs(rp.StopSeq)
	} else {
		w.lit("null")
	}
	w.key("usage")
	anthropicUsage(&w, &rp.Usage)
	w.end('}')
	return w.b
}

func (t *Translator) writeResponsesResponse(dst []byte) []byte {
	rp := &t.resp
	id := t.respID()
	w := writer{b: dst}
	w.obj()
	w.key("id")
	responseID(&w, id)
	w.key("object")
	w.lit(`"response"`)
	w.key("created_at")
	w.int(t.respCreated())
	status, reason := responsesStatus(finalStop(rp.Stop, hasCalls(rp.Parts)))
	w.key("status")
	w.lit(status)
	w.key("error")
	w.lit("null")
	w.key("incomplete_details")
	if reason != "" {
		w.lit(`{"reason":` + reason + `}`)
	} else {
		w.lit("null")
	}
	w.key("model")
	t.respModel(&w)
	w.key("output")
	w.arr()
	for i := 0; i < len(rp.Parts); {
		p := &rp.Parts[i]
		if p.Kind == KindText {
			j := i
			for j < len(rp.Parts) && rp.Parts[j].Kind == KindText {
				j++
			}
			t.responsesMessageItem(&w, id, i, rp.Parts[i:j], true)
			i = j
			continue
		}
		t.responsesItem(&w, id, i, p)
		i++
	}
	w.end(']')
	w.key("parallel_tool_calls")
	w.lit("true")
	w.key("store")
	w.lit("false")
	w.key("usage")
	responsesUsage(&w, &rp.Usage)
	w.end('}')
	return w.b
}

// responseID writes a Responses id for the upstream answer id: kept when
// it is one already, else prefixed.
func responseID(w *writer, id []byte) {
	if bytes.HasPrefix(id, []byte("resp_")) {
		w.rs(id)
		return
	}
	w.sep()
	w.b = append(w.b, `"resp_`...)
	w.b = append(w.b, id...)
	w.b = append(w.b, '"')
	w.comma = true
}

// responsesMessageItem writes an assistant message output item holding
// texts (done: completed, with the text; else the in-progress shell).
func (t *Translator) responsesMessageItem(w *writer, base []byte, n int, texts []Part, done bool) {
	w.obj()
	w.key("id")
	idWith(w, "msg_", base, n)
	w.key("type")
	w.lit(`"message"`)
	w.key("status")
	if done {
		w.lit(`"completed"`)
	} else {
		w.lit(`"in_progress"`)
	}
	w.key("role")
	w.lit(`"assistant"`)
	w.key("content")
	w.arr()
	for i := 0; done && i < len(texts); i++ {
		outputText(w, texts[i].Text)
	}
	w.end(']')
	w.end('}')
}

// responsesItem writes a function call or reasoning output item.
func (t *Translator) responsesItem(w *writer, base []byte, n int, p *Part) {
	w.obj()
	switch p.Kind {
	case KindToolCall:
		custom := p.Custom || t.isCustom(p.Name)
		w.key("id")
		idWith(w, "fc_", base, n)
		w.key("type")
		if custom {
			w.lit(`"custom_tool_call"`)
		} else {
			w.lit(`"function_call"`)
		}
		w.key("status")
		w.lit(`"completed"`)
		w.key("call_id")
		w.rs(p.ID)
		w.key("name")
		w.rs(p.Name)
		if custom {
			w.key("input")
			if p.Custom {
				w.rs(p.Args)
			} else {
				t.customInput(w, p)
			}
		} else {
			w.key("arguments")
			t.argsString(w, p)
		}
	case KindReasoning:
		w.key("id")
		if p.Origin == dialect.Responses && p.ID != nil {
			w.rs(p.ID)
		} else {
			idWith(w, "rs_", base, n)
		}
		w.key("type")
		w.lit(`"reasoning"`)
		summary(w, p.Text)
		encryptedContent(w, p)
	}
	w.end('}')
}
