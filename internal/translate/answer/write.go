package answer

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Writers of non-stream answers, and the pieces streams share with them.

func chatUsage(w *ir.Writer, u *dialect.Usage) {
	w.Obj()
	w.Key("prompt_tokens")
	w.Int(u.Input)
	w.Key("completion_tokens")
	w.Int(u.Output)
	w.Key("total_tokens")
	w.Int(u.Input + u.Output)
	tokenDetails(w, "prompt_tokens_details", "cached_tokens", u.Cached)
	tokenDetails(w, "completion_tokens_details", "reasoning_tokens", u.Reasoning)
	w.End('}')
}

// tokenDetails writes key: {field: n}, the shape of OpenAI's
// *_tokens_details objects.
func tokenDetails(w *ir.Writer, key, field string, n int64) {
	w.Key(key)
	w.Obj()
	w.Key(field)
	w.Int(n)
	w.End('}')
}

func anthropicUsage(w *ir.Writer, u *dialect.Usage) {
	w.Obj()
	w.Key("input_tokens")
	w.Int(max(u.Input-u.Cached-u.CacheWrite, 0))
	w.Key("cache_creation_input_tokens")
	w.Int(u.CacheWrite)
	w.Key("cache_read_input_tokens")
	w.Int(u.Cached)
	w.Key("output_tokens")
	w.Int(u.Output)
	w.End('}')
}

func responsesUsage(w *ir.Writer, u *dialect.Usage) {
	w.Obj()
	w.Key("input_tokens")
	w.Int(u.Input)
	tokenDetails(w, "input_tokens_details", "cached_tokens", u.Cached)
	w.Key("output_tokens")
	w.Int(u.Output)
	tokenDetails(w, "output_tokens_details", "reasoning_tokens", u.Reasoning)
	w.Key("total_tokens")
	w.Int(u.Input + u.Output)
	w.End('}')
}

// finalStop is the stop reason to report: a turn that ends normally with
// tool calls in it stopped to use them (some OpenAI-compatible servers
// say "stop" there).
func finalStop(s ir.StopReason, hasCalls bool) ir.StopReason {
	if s == ir.StopUnset || (s == ir.StopEnd && hasCalls) {
		if hasCalls {
			return ir.StopToolUse
		}
		return ir.StopEnd
	}
	return s
}

func chatFinish(s ir.StopReason) string {
	switch s {
	case ir.StopMaxTokens, ir.StopContextWindow:
		return `"length"`
	case ir.StopToolUse:
		return `"tool_calls"`
	case ir.StopRefusal:
		return `"content_filter"`
	}
	return `"stop"`
}

// anthropicStopWords is Anthropic's word for each stop reason, as the
// writers emit it (a JSON string); the readers' anthropicStops is its
// inverse, so both directions read the one list.
var anthropicStopWords = [...]string{
	ir.StopUnset: `"end_turn"`, ir.StopEnd: `"end_turn"`, ir.StopMaxTokens: `"max_tokens"`,
	ir.StopSequence: `"stop_sequence"`, ir.StopToolUse: `"tool_use"`, ir.StopRefusal: `"refusal"`,
	ir.StopPause: `"pause_turn"`, ir.StopContextWindow: `"model_context_window_exceeded"`,
}

func anthropicStopName(s ir.StopReason) string {
	if int(s) < len(anthropicStopWords) {
		return anthropicStopWords[s]
	}
	return anthropicStopWords[ir.StopEnd]
}

// responsesStatus is a Responses answer's status and incomplete reason.
func responsesStatus(s ir.StopReason) (status, reason string) {
	switch s {
	case ir.StopMaxTokens, ir.StopContextWindow:
		return `"incomplete"`, `"max_output_tokens"`
	case ir.StopRefusal:
		return `"incomplete"`, `"content_filter"`
	}
	return `"completed"`, ""
}

// outputText writes a Responses output_text content part.
func outputText(w *ir.Writer, text []byte) {
	w.Obj()
	w.Key("type")
	w.Lit(`"output_text"`)
	w.Key("text")
	w.RS(text)
	w.Key("annotations")
	w.Lit("[]")
	w.End('}')
}

// envelope writes the string prefix+a[+":"+b]: reasoning state tagged
// with the dialect that can read it (see ir.EnvResponses).
func envelope(w *ir.Writer, prefix string, a, b []byte) {
	w.Sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, prefix...)
	w.B = append(w.B, a...)
	if b != nil {
		w.B = append(w.B, ':')
		w.B = append(w.B, b...)
	}
	w.B = append(w.B, '"')
	w.Comma = true
}

// anthropicSignature writes the signature an Anthropic caller keeps for
// reasoning another dialect made: OpenAI's encrypted reasoning in an
// envelope, or "" when there is nothing to carry.
func anthropicSignature(w *ir.Writer, p *ir.Part) {
	if p.Origin == dialect.Responses && p.ID != nil && p.Sig != nil {
		envelope(w, ir.EnvResponses, p.ID, p.Sig)
		return
	}
	if p.Origin == dialect.Messages {
		w.RSOrEmpty(p.Sig)
		return
	}
	w.Lit(`""`)
}

// encryptedContent writes the encrypted_content a Responses caller keeps
// for reasoning: Anthropic's signature in an envelope, OpenAI's own as is.
func encryptedContent(w *ir.Writer, p *ir.Part) {
	switch {
	case p.Sig == nil:
	case p.Origin == dialect.Messages && p.Redacted:
		w.Key("encrypted_content")
		envelope(w, ir.EnvRedacted, p.Sig, nil)
	case p.Origin == dialect.Messages:
		w.Key("encrypted_content")
		envelope(w, ir.EnvMessages, p.Sig, nil)
	case p.Origin == dialect.Responses:
		w.Key("encrypted_content")
		w.RS(p.Sig)
	}
}

// idWith writes "prefix" + base + "_" + n as an id: item ids a Responses
// caller needs that the upstream did not make.
func idWith(w *ir.Writer, prefix string, base []byte, n int) {
	w.Sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, prefix...)
	w.B = append(w.B, base...)
	w.B = append(w.B, '_')
	w.B = ir.AppendUint(w.B, n)
	w.B = append(w.B, '"')
	w.Comma = true
}

// customInput writes the free-form input of a call to a caller's custom
// tool, which the upstream saw as a function taking {"input": string}.
// Arguments of another shape are passed whole as the input text.
func (t *Converter) customInput(w *ir.Writer, p *ir.Part) {
	text := p.Args
	if p.ArgsEscaped {
		var ok bool
		if t.tmp, ok = ir.UnescapeRS(t.tmp[:0], p.Args); ok {
			text = t.tmp
		}
	}
	var c jsonscan.Cursor
	c.Reset(text)
	if c.Peek() == '{' {
		c.Object()
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if string(k) == "input" {
				if s := ir.StrRS(&c); s != nil {
					w.RS(s)
					return
				}
			}
			c.Skip()
		}
	}
	w.StrBytes(text)
}

// toolInput writes a tool call's arguments as an Anthropic input object
// in an answer. A model that wrote arguments that are not a JSON object
// cannot be refused after the fact; its text is kept under one key so the
// tool reports the mistake instead of running on made-up input.
func (t *Converter) toolInput(w *ir.Writer, p *ir.Part) {
	if !p.ArgsEscaped {
		w.Raw(p.Args)
		return
	}
	var ok bool
	t.tmp, ok = ir.UnescapeRS(t.tmp[:0], p.Args)
	text := bytes.TrimSpace(t.tmp)
	switch {
	case ok && len(text) == 0:
		w.Lit("{}")
	case ok && ir.IsObject(text):
		w.Raw(text)
	default:
		w.Obj()
		w.Key(InvalidArgumentsKey)
		w.RS(p.Args)
		w.End('}')
	}
}

// InvalidArgumentsKey holds, in an Anthropic tool_use input, arguments an
// upstream model wrote that are not a JSON object.
const InvalidArgumentsKey = "_invalid_arguments"

// about is what an answer says about itself: the upstream's id, model
// and creation time (empty, 0: it said none). A whole answer has them
// from its body, a stream from its first events.
type about struct {
	id, model []byte
	created   int64
}

func (t *Converter) answerAbout() about { return about{t.resp.ID, t.resp.Model, t.resp.Created} }
func (t *Converter) streamAbout() about { return about{t.st.id, t.st.model, t.st.created} }

// writeID writes the upstream's answer id, or fallback (a literal).
func writeID(w *ir.Writer, id []byte, fallback string) {
	if len(id) > 0 {
		w.RS(id)
	} else {
		w.Lit(fallback)
	}
}

// writeModel writes the model an answer names: the caller's own name for
// it, else the upstream's, else the one the gateway sent.
func (t *Converter) writeModel(w *ir.Writer, a *about) {
	if len(t.opts.ReplyModel) > 0 {
		w.StrBytes(t.opts.ReplyModel)
	} else if len(a.model) > 0 {
		w.RS(a.model)
	} else {
		w.Str(t.opts.Model)
	}
}

// created is an answer's creation time: the upstream's, else the
// gateway's clock's.
func (t *Converter) created(a *about) int64 {
	if a.created > 0 {
		return a.created
	}
	return t.opts.Created
}

// chatHead opens a chat completion or chunk (object) up to its choices.
func (t *Converter) chatHead(w *ir.Writer, a about, fallbackID, object string) {
	w.Key("id")
	writeID(w, a.id, fallbackID)
	w.Key("object")
	w.Lit(object)
	w.Key("created")
	w.Int(t.created(&a))
	w.Key("model")
	t.writeModel(w, &a)
	w.Key("choices")
	w.Arr()
}

// anthropicMessage writes an Anthropic message object: the answer whole,
// or the one a stream's message_start announces (content empty, stop
// "null", usage so far).
func (t *Converter) anthropicMessage(w *ir.Writer, a about, fallbackID string, content func(), stop string, stopSeq []byte, u *dialect.Usage) {
	w.Obj()
	w.Key("id")
	writeID(w, a.id, fallbackID)
	w.Key("type")
	w.Lit(`"message"`)
	w.Key("role")
	w.Lit(`"assistant"`)
	w.Key("model")
	t.writeModel(w, &a)
	w.Key("content")
	w.Arr()
	if content != nil {
		content()
	}
	w.End(']')
	w.Key("stop_reason")
	w.Lit(stop)
	w.Key("stop_sequence")
	if stopSeq != nil {
		w.RS(stopSeq)
	} else {
		w.Lit("null")
	}
	w.Key("usage")
	anthropicUsage(w, u)
	w.End('}')
}

// responseObject writes a Responses response object: the answer whole,
// or the one a stream's opening (usage nil: null) and closing events
// carry. id is the upstream's answer id; output writes the items.
func (t *Converter) responseObject(w *ir.Writer, a about, id []byte, status, reason string, output func(), u *dialect.Usage) {
	w.Obj()
	w.Key("id")
	responseID(w, id)
	w.Key("object")
	w.Lit(`"response"`)
	w.Key("created_at")
	w.Int(t.created(&a))
	w.Key("status")
	w.Lit(status)
	w.Key("error")
	w.Lit("null")
	w.Key("incomplete_details")
	if reason != "" {
		w.Obj()
		w.Key("reason")
		w.Lit(reason)
		w.End('}')
	} else {
		w.Lit("null")
	}
	w.Key("model")
	t.writeModel(w, &a)
	w.Key("output")
	w.Arr()
	output()
	w.End(']')
	w.Key("parallel_tool_calls")
	w.Lit("true")
	w.Key("store")
	w.Lit("false")
	w.Key("usage")
	if u != nil {
		responsesUsage(w, u)
	} else {
		w.Lit("null")
	}
	w.End('}')
}

func hasCalls(parts []ir.Part) bool {
	for i := range parts {
		if parts[i].Kind == ir.KindToolCall {
			return true
		}
	}
	return false
}

// respID is the upstream's answer id, or a fixed one.
func (t *Converter) respID() []byte {
	if t.resp.ID != nil {
		return t.resp.ID
	}
	return []byte("omniroute")
}

func (t *Converter) writeChatResponse(dst []byte) []byte {
	rp := &t.resp
	w := ir.Writer{B: dst}
	w.Obj()
	t.chatHead(&w, t.answerAbout(), `"omniroute"`, `"chat.completion"`)
	w.Obj()
	w.Key("index")
	w.Lit("0")
	w.Key("message")
	w.Obj()
	w.Key("role")
	w.Lit(`"assistant"`)
	w.Key("content")
	texts := 0
	for i := range rp.Parts {
		if rp.Parts[i].Kind == ir.KindText {
			texts++
		}
	}
	if texts == 0 {
		w.Lit("null")
	} else {
		ir.JoinText(&w, rp.Parts)
	}
	w.Key("refusal")
	w.Lit("null")
	for i := range rp.Parts {
		if p := &rp.Parts[i]; p.Kind == ir.KindReasoning && len(p.Text) > 0 {
			// reasoning_content: the field OpenAI-compatible clients read
			// reasoning text from; chat has no standard one.
			w.Key("reasoning_content")
			w.RS(p.Text)
			break
		}
	}
	if hasCalls(rp.Parts) {
		w.Key("tool_calls")
		w.Arr()
		for i := range rp.Parts {
			if p := &rp.Parts[i]; p.Kind == ir.KindToolCall {
				t.chatCallOut(&w, p, -1)
			}
		}
		w.End(']')
	}
	w.End('}')
	w.Key("finish_reason")
	w.Lit(chatFinish(finalStop(rp.Stop, hasCalls(rp.Parts))))
	w.Key("logprobs")
	w.Lit("null")
	w.End('}')
	w.End(']')
	w.Key("usage")
	chatUsage(&w, &rp.Usage)
	w.End('}')
	return w.B
}

// chatCallOut writes one tool call of a chat answer (index ≥ 0: a stream
// delta's tool_calls entry).
func (t *Converter) chatCallOut(w *ir.Writer, p *ir.Part, index int) {
	custom := p.Custom || t.isCustom(p.Name)
	ir.ChatCall(w, index, p.ID, p.Name, custom, func() {
		switch {
		case p.Custom:
			w.RS(p.Args)
		case custom:
			t.customInput(w, p)
		default:
			t.argsString(w, p)
		}
	})
}

func (t *Converter) writeMessagesResponse(dst []byte) []byte {
	rp := &t.resp
	w := &ir.Writer{B: dst}
	t.anthropicMessage(w, t.answerAbout(), `"omniroute"`, func() {
		for i := range rp.Parts {
			p := &rp.Parts[i]
			switch p.Kind {
			case ir.KindText:
				if len(p.Text) == 0 {
					continue
				}
				ir.TextPart(w, `"text"`, p.Text)
			case ir.KindToolCall:
				w.Obj()
				w.Key("type")
				ir.ToolUseHead(w, p.ID, p.Name)
				if p.Custom {
					w.Raw(t.customArgs(p))
				} else {
					t.toolInput(w, p)
				}
				w.End('}')
			case ir.KindReasoning:
				w.Obj()
				w.Key("type")
				w.Lit(`"thinking"`)
				w.Key("thinking")
				w.RSOrEmpty(p.Text)
				w.Key("signature")
				anthropicSignature(w, p)
				w.End('}')
			}
		}
	}, anthropicStopName(finalStop(rp.Stop, hasCalls(rp.Parts))), rp.StopSeq, &rp.Usage)
	return w.B
}

func (t *Converter) writeResponsesResponse(dst []byte) []byte {
	rp := &t.resp
	id := t.respID()
	w := &ir.Writer{B: dst}
	status, reason := responsesStatus(finalStop(rp.Stop, hasCalls(rp.Parts)))
	t.responseObject(w, t.answerAbout(), id, status, reason, func() {
		for i := 0; i < len(rp.Parts); {
			p := &rp.Parts[i]
			if p.Kind == ir.KindText {
				j := i
				for j < len(rp.Parts) && rp.Parts[j].Kind == ir.KindText {
					j++
				}
				t.responsesMessageItem(w, id, i, rp.Parts[i:j], true)
				i = j
				continue
			}
			t.responsesItem(w, id, i, p, true, nil)
			i++
		}
	}, &rp.Usage)
	return w.B
}

// responseID writes a Responses id for the upstream answer id: kept when
// it is one already, else prefixed.
func responseID(w *ir.Writer, id []byte) {
	if bytes.HasPrefix(id, []byte("resp_")) {
		w.RS(id)
		return
	}
	w.Sep()
	w.B = append(w.B, `"resp_`...)
	w.B = append(w.B, id...)
	w.B = append(w.B, '"')
	w.Comma = true
}

// responsesMessageItem writes an assistant message output item holding
// texts (done: completed, with the text; else the in-progress shell).
func (t *Converter) responsesMessageItem(w *ir.Writer, base []byte, n int, texts []ir.Part, done bool) {
	w.Obj()
	w.Key("id")
	idWith(w, "msg_", base, n)
	w.Key("type")
	w.Lit(`"message"`)
	w.Key("status")
	w.Lit(doneStatus(done))
	w.Key("role")
	w.Lit(`"assistant"`)
	w.Key("content")
	w.Arr()
	for i := 0; done && i < len(texts); i++ {
		outputText(w, texts[i].Text)
	}
	w.End(']')
	w.End('}')
}

// responsesItem writes a function call or reasoning output item, for a
// whole answer or a stream's output_item events (not done: in progress,
// without its arguments or summary yet). input, when not nil, is a
// custom call's input as a literal, already extracted.
func (t *Converter) responsesItem(w *ir.Writer, base []byte, n int, p *ir.Part, done bool, input []byte) {
	w.Obj()
	switch p.Kind {
	case ir.KindToolCall:
		custom := p.Custom || t.isCustom(p.Name)
		w.Key("id")
		idWith(w, "fc_", base, n)
		w.Key("type")
		if custom {
			w.Lit(`"custom_tool_call"`)
		} else {
			w.Lit(`"function_call"`)
		}
		w.Key("status")
		w.Lit(doneStatus(done))
		w.Key("call_id")
		w.RS(p.ID)
		w.Key("name")
		w.RS(p.Name)
		if custom {
			w.Key("input")
		} else {
			w.Key("arguments")
		}
		switch {
		case !done:
			w.Lit(`""`)
		case !custom:
			t.argsString(w, p)
		case input != nil:
			w.Raw(input)
		case p.Custom:
			w.RS(p.Args)
		default:
			t.customInput(w, p)
		}
	case ir.KindReasoning:
		w.Key("id")
		if p.Origin == dialect.Responses && p.ID != nil {
			w.RS(p.ID)
		} else {
			idWith(w, "rs_", base, n)
		}
		w.Key("type")
		w.Lit(`"reasoning"`)
		if done {
			ir.Summary(w, p.Text)
			encryptedContent(w, p)
		} else {
			ir.Summary(w, nil)
		}
	}
	w.End('}')
}

func doneStatus(done bool) string {
	if done {
		return `"completed"`
	}
	return `"in_progress"`
}
