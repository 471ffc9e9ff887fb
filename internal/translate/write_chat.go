package translate

import "github.com/omniroute/gateway/internal/dialect"

// writeChat writes the IR as an OpenAI Chat Completions request.
func (t *Translator) writeChat(dst []byte) ([]byte, error) {
	r := &t.req
	w := writer{b: dst}
	w.obj()
	w.key("model")
	w.str(t.opts.Model)
	w.key("messages")
	w.arr()
	if len(r.System) > 0 {
		w.obj()
		w.key("role")
		w.lit(`"system"`)
		w.key("content")
		for i := range r.System {
			t.dropCache(&r.System[i])
		}
		joinText(&w, r.System)
		w.end('}')
	}
	for mi := range r.Messages {
		m := &r.Messages[mi]
		parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
		var err error
		if m.Role == RoleAssistant {
			err = t.chatAssistant(&w, parts, mi)
		} else {
			err = t.chatUser(&w, parts, mi)
		}
		if err != nil {
			return dst, err
		}
	}
	w.end(']')
	if len(r.Tools) > 0 {
		w.key("tools")
		w.arr()
		for i := range r.Tools {
			tl := &r.Tools[i]
			if tl.Cache != nil {
				t.drop("cache_control")
			}
			w.obj()
			w.key("type")
			w.lit(`"function"`)
			w.key("function")
			w.obj()
			w.key("name")
			w.rs(tl.Name)
			w.rsField("description", tl.Description)
			w.key("parameters")
			w.raw(toolSchema(tl))
			if tl.Kind == ToolFunction {
				w.rawField("strict", tl.Strict)
			}
			w.end('}')
			w.end('}')
		}
		w.end(']')
		if r.Parallel != Unset {
			w.key("parallel_tool_calls")
			w.bool(r.Parallel == True)
		}
	}
	if len(r.Tools) > 0 && !openAIChoiceWord(&w, r.Choice.Mode) && r.Choice.Mode == ChoiceTool {
		w.key("tool_choice")
		w.obj()
		w.key("type")
		w.lit(`"function"`)
		w.key("function")
		w.obj()
		w.key("name")
		w.rs(r.Choice.Name)
		w.end('}')
		w.end('}')
	}
	if n := t.maxTokens(0); n > 0 {
		// max_tokens, which most OpenAI-compatible servers know; a model
		// that wants max_completion_tokens gets it from internal/fit.
		w.key("max_tokens")
		w.int(n)
	}
	w.rawField("temperature", r.Temperature)
	w.rawField("top_p", r.TopP)
	if r.TopK != nil {
		t.drop("top_k")
	}
	w.rsListField("stop", r.Stop)
	if r.Stream {
		// Always ask for the usage chunk: the caller's dialect reports
		// usage at the end of every stream, and the gateway meters it.
		w.key("stream")
		w.lit("true")
		w.key("stream_options")
		w.lit(`{"include_usage":true}`)
	}
	t.chatFormat(&w)
	if e := t.openAIEffort(); e != EffortUnset {
		w.key("reasoning_effort")
		w.str(e.String())
	}
	if r.Reasoning.Summary != nil {
		t.drop("reasoning.summary")
	}
	t.openAIExtras(&w)
	w.end('}')
	return w.b, nil
}

// openAIChoiceWord writes tool_choice for the modes OpenAI spells as a
// word (chat and responses alike) and reports whether it did.
func openAIChoiceWord(w *writer, m ChoiceMode) bool {
	var word string
	switch m {
	case ChoiceAuto:
		word = `"auto"`
	case ChoiceNone:
		word = `"none"`
	case ChoiceRequired:
		word = `"required"`
	default:
		return false
	}
	w.key("tool_choice")
	w.lit(word)
	return true
}

// openAIExtras writes the fields chat and responses share by name, and
// records the ones that have no OpenAI equivalent.
func (t *Translator) openAIExtras(w *writer) {
	r := &t.req
	w.rsField("user", r.User)
	w.rsField("safety_identifier", r.SafetyID)
	w.rsField("prompt_cache_key", r.PromptCacheKey)
	w.rawField("metadata", r.Metadata)
	w.rsField("service_tier", r.ServiceTier)
	if t.to == dialect.Chat {
		w.rsField("verbosity", r.Verbosity)
	}
}

func (t *Translator) chatFormat(w *writer) {
	f := &t.req.Format
	switch f.Kind {
	case FormatText:
		w.key("response_format")
		w.lit(`{"type":"text"}`)
	case FormatJSONObject:
		w.key("response_format")
		w.lit(`{"type":"json_object"}`)
	case FormatJSONSchema:
		w.key("response_format")
		w.obj()
		w.key("type")
		w.lit(`"json_schema"`)
		w.key("json_schema")
		w.obj()
		w.key("name")
		if f.Name != nil {
			w.rs(f.Name)
		} else {
			w.lit(`"response"`)
		}
		w.rsField("description", f.Description)
		w.key("schema")
		w.raw(f.Schema)
		w.rawField("strict", f.Strict)
		w.end('}')
		w.end('}')
	}
}

// chatUser writes a user turn: its tool results as tool messages first
// (chat answers each call with one), then the rest as a user message. A
// tool message holds only text, so media a tool returned follows in that
// user message.
func (t *Translator) chatUser(w *writer, parts []Part, mi int) error {
	r := &t.req
	rest := 0
	var media bool
	for i := range parts {
		p := &parts[i]
		if p.Kind != KindToolResult {
			rest++
			continue
		}
		res := r.ResultParts(p)
		if p.IsError {
			t.drop("tool_result.is_error")
		}
		w.obj()
		w.key("role")
		w.lit(`"tool"`)
		w.key("tool_call_id")
		w.rs(p.ID)
		w.key("content")
		joinText(w, res)
		w.end('}')
		if !textOnly(res) {
			media = true
		}
	}
	if rest == 0 && !media {
		return nil
	}
	w.obj()
	w.key("role")
	w.lit(`"user"`)
	w.key("content")
	if !media && rest == 1 {
		for i := range parts {
			if p := &parts[i]; p.Kind == KindText {
				t.dropCache(p)
				w.rs(p.Text)
				w.end('}')
				return nil
			}
		}
	}
	w.arr()
	for i := range parts {
		p := &parts[i]
		if p.Kind == KindToolResult {
			continue
		}
		if err := t.chatPartOut(w, p, at("messages").index(mi)); err != nil {
			return err
		}
	}
	for i := range parts {
		if parts[i].Kind != KindToolResult {
			continue
		}
		res := r.ResultParts(&parts[i])
		for j := range res {
			if res[j].Kind != KindText {
				if err := t.chatPartOut(w, &res[j], at("messages").index(mi)); err != nil {
					return err
				}
			}
		}
	}
	w.end(']')
	w.end('}')
	return nil
}

// chatPartOut writes one user content part.
func (t *Translator) chatPartOut(w *writer, p *Part, field loc) error {
	t.dropCache(p)
	switch p.Kind {
	case KindText:
		w.obj()
		w.key("type")
		w.lit(`"text"`)
		w.key("text")
		w.rs(p.Text)
		w.end('}')
	case KindImage:
		if p.Src == SrcFile {
			return t.unsupported(field.at("content"), "an image given by file id")
		}
		w.obj()
		w.key("type")
		w.lit(`"image_url"`)
		w.key("image_url")
		w.obj()
		w.key("url")
		mediaURL(w, p)
		w.rsField("detail", p.Detail)
		w.end('}')
		w.end('}')
	case KindDocument:
		switch p.Src {
		case SrcText:
			w.obj()
			w.key("type")
			w.lit(`"text"`)
			w.key("text")
			w.rs(p.Data)
			w.end('}')
			return nil
		case SrcURL:
			return t.unsupported(field.at("content"), "a document given by URL")
		}
		if err := t.fileIDCrossing(p, field.at("content")); err != nil {
			return err
		}
		w.obj()
		w.key("type")
		w.lit(`"file"`)
		w.key("file")
		w.obj()
		if p.Src == SrcFile {
			w.key("file_id")
			w.rs(p.Data)
		} else {
			w.key("file_data")
			mediaURL(w, p)
		}
		w.rsField("filename", p.Filename)
		w.end('}')
		w.end('}')
	default:
		return t.invalid(field, "a user message cannot hold this part")
	}
	return nil
}

// chatAssistant writes an assistant turn: its text as content, its tool
// calls as tool_calls. Reasoning cannot be sent back to a chat model.
func (t *Translator) chatAssistant(w *writer, parts []Part, mi int) error {
	texts, calls := 0, 0
	for i := range parts {
		switch parts[i].Kind {
		case KindText:
			texts++
		case KindToolCall:
			calls++
		case KindReasoning:
			t.drop("reasoning")
		default:
			return t.invalid(at("messages").index(mi), "an assistant message can hold only text, reasoning and tool calls for a %s upstream", t.to)
		}
		t.dropCache(&parts[i])
	}
	if texts == 0 && calls == 0 {
		return nil
	}
	w.obj()
	w.key("role")
	w.lit(`"assistant"`)
	w.key("content")
	if texts == 0 {
		w.lit("null")
	} else {
		joinText(w, parts)
	}
	if calls > 0 {
		w.key("tool_calls")
		w.arr()
		for i := range parts {
			p := &parts[i]
			if p.Kind != KindToolCall {
				continue
			}
			w.obj()
			w.key("id")
			w.rs(p.ID)
			w.key("type")
			w.lit(`"function"`)
			w.key("function")
			w.obj()
			w.key("name")
			w.rs(p.Name)
			w.key("arguments")
			t.argsString(w, p)
			w.end('}')
			w.end('}')
		}
		w.end(']')
	}
	w.end('}')
	return nil
}
