package translate

import (
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// writeChat writes the IR as an OpenAI Chat Completions request: its
// members after the model (Request opens and closes the object).
func (t *Translator) writeChat(w *ir.Writer) error {
	r := &t.req
	w.Key("messages")
	w.Arr()
	if len(r.System) > 0 {
		w.Obj()
		w.Key("role")
		w.Lit(`"system"`)
		w.Key("content")
		for i := range r.System {
			t.dropCache(&r.System[i])
		}
		ir.JoinText(w, r.System)
		w.End('}')
	}
	for mi := range r.Messages {
		m := &r.Messages[mi]
		parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
		var err error
		if m.Role == ir.RoleAssistant {
			err = t.chatAssistant(w, parts, mi)
		} else {
			err = t.chatUser(w, parts, mi)
		}
		if err != nil {
			return err
		}
	}
	w.End(']')
	t.writeTools(w, &chatTools, -1)
	if len(r.Tools) > 0 && !openAIChoiceWord(w, r.Choice.Mode) && r.Choice.Mode == ir.ChoiceTool {
		w.Key("tool_choice")
		w.Obj()
		w.Key("type")
		w.Lit(`"function"`)
		w.Key("function")
		w.Obj()
		w.Key("name")
		w.RS(r.Choice.Name)
		w.End('}')
		w.End('}')
	}
	// max_tokens, which most OpenAI-compatible servers know; a model that
	// wants max_completion_tokens gets it from internal/fit.
	t.openAISampling(w, "max_tokens")
	w.RSListField("stop", r.Stop)
	if r.Stream {
		// Always ask for the usage chunk: the caller's dialect reports
		// usage at the end of every stream, and the gateway meters it.
		w.Key("stream")
		w.Lit("true")
		w.Key("stream_options")
		w.Lit(`{"include_usage":true}`)
	}
	t.openAIFormat(w, "response_format", "json_schema")
	if e := t.openAIEffort(); e != ir.EffortUnset {
		w.Key("reasoning_effort")
		w.Str(e.String())
	}
	if r.Reasoning.Summary != nil {
		t.drop("reasoning.summary")
	}
	t.openAIExtras(w)
	return nil
}

// openAISampling writes the output bound (under maxKey, the dialect's name
// for it) and the sampling fields OpenAI's dialects take; top_k, which
// neither has, is dropped.
func (t *Translator) openAISampling(w *ir.Writer, maxKey string) {
	r := &t.req
	if n := t.maxTokens(0); n > 0 {
		w.Key(maxKey)
		w.Int(n)
	}
	w.RawField("temperature", r.Temperature)
	w.RawField("top_p", r.TopP)
	if r.TopK != nil {
		t.drop("top_k")
	}
}

// openAIChoiceWord writes tool_choice for the modes OpenAI spells as a
// word (chat and responses alike) and reports whether it did.
func openAIChoiceWord(w *ir.Writer, m ir.ChoiceMode) bool {
	var word string
	switch m {
	case ir.ChoiceAuto:
		word = `"auto"`
	case ir.ChoiceNone:
		word = `"none"`
	case ir.ChoiceRequired:
		word = `"required"`
	default:
		return false
	}
	w.Key("tool_choice")
	w.Lit(word)
	return true
}

// openAIExtras writes the fields chat and responses share by name, and
// records the ones that have no OpenAI equivalent.
func (t *Translator) openAIExtras(w *ir.Writer) {
	r := &t.req
	w.RSField("user", r.User)
	w.RSField("safety_identifier", r.SafetyID)
	w.RSField("prompt_cache_key", r.PromptCacheKey)
	w.RawField("metadata", r.Metadata)
	w.RSField("service_tier", r.ServiceTier)
	if t.to == dialect.Chat {
		w.RSField("verbosity", r.Verbosity)
	}
}

// chatUser writes a user turn: its tool results as tool messages first
// (chat answers each call with one), then the rest as a user message. A
// tool message holds only text, so media a tool returned follows in that
// user message.
func (t *Translator) chatUser(w *ir.Writer, parts []ir.Part, mi int) error {
	r := &t.req
	rest := 0
	var media bool
	for i := range parts {
		p := &parts[i]
		if p.Kind != ir.KindToolResult {
			rest++
			continue
		}
		res := r.ResultParts(p)
		if p.IsError {
			t.drop("tool_result.is_error")
		}
		w.Obj()
		w.Key("role")
		w.Lit(`"tool"`)
		w.Key("tool_call_id")
		w.RS(p.ID)
		w.Key("content")
		ir.JoinText(w, res)
		w.End('}')
		if !textOnly(res) {
			media = true
		}
	}
	if rest == 0 && !media {
		return nil
	}
	w.Obj()
	w.Key("role")
	w.Lit(`"user"`)
	w.Key("content")
	if !media && rest == 1 {
		for i := range parts {
			if p := &parts[i]; p.Kind == ir.KindText {
				t.dropCache(p)
				w.RS(p.Text)
				w.End('}')
				return nil
			}
		}
	}
	w.Arr()
	for i := range parts {
		p := &parts[i]
		if p.Kind == ir.KindToolResult {
			continue
		}
		if err := t.chatPartOut(w, p, at("messages").index(mi)); err != nil {
			return err
		}
	}
	for i := range parts {
		if parts[i].Kind != ir.KindToolResult {
			continue
		}
		res := r.ResultParts(&parts[i])
		for j := range res {
			if res[j].Kind != ir.KindText {
				if err := t.chatPartOut(w, &res[j], at("messages").index(mi)); err != nil {
					return err
				}
			}
		}
	}
	w.End(']')
	w.End('}')
	return nil
}

// chatPartOut writes one user content part.
func (t *Translator) chatPartOut(w *ir.Writer, p *ir.Part, field loc) error {
	t.dropCache(p)
	switch p.Kind {
	case ir.KindText:
		ir.TextPart(w, `"text"`, p.Text)
	case ir.KindImage:
		if p.Src == ir.SrcFile {
			return t.unsupported(field.at("content"), "an image given by file id")
		}
		w.Obj()
		w.Key("type")
		w.Lit(`"image_url"`)
		w.Key("image_url")
		w.Obj()
		w.Key("url")
		mediaURL(w, p)
		w.RSField("detail", p.Detail)
		w.End('}')
		w.End('}')
	case ir.KindDocument:
		switch p.Src {
		case ir.SrcText:
			ir.TextPart(w, `"text"`, p.Data)
			return nil
		case ir.SrcURL:
			return t.unsupported(field.at("content"), "a document given by URL")
		}
		if err := t.fileIDCrossing(p, field.at("content")); err != nil {
			return err
		}
		w.Obj()
		w.Key("type")
		w.Lit(`"file"`)
		w.Key("file")
		w.Obj()
		if p.Src == ir.SrcFile {
			w.Key("file_id")
			w.RS(p.Data)
		} else {
			w.Key("file_data")
			mediaURL(w, p)
		}
		w.RSField("filename", p.Filename)
		w.End('}')
		w.End('}')
	default:
		return t.invalid(field, "a user message cannot hold this part")
	}
	return nil
}

// chatAssistant writes an assistant turn: its text as content, its tool
// calls as tool_calls. Reasoning cannot be sent back to a chat model.
func (t *Translator) chatAssistant(w *ir.Writer, parts []ir.Part, mi int) error {
	texts, calls := 0, 0
	for i := range parts {
		switch parts[i].Kind {
		case ir.KindText:
			texts++
		case ir.KindToolCall:
			calls++
		case ir.KindReasoning:
			t.drop("reasoning")
		default:
			return t.invalid(at("messages").index(mi), "an assistant message can hold only text, reasoning and tool calls for a %s upstream", t.to)
		}
		t.dropCache(&parts[i])
	}
	if texts == 0 && calls == 0 {
		return nil
	}
	w.Obj()
	w.Key("role")
	w.Lit(`"assistant"`)
	w.Key("content")
	if texts == 0 {
		w.Lit("null")
	} else {
		ir.JoinText(w, parts)
	}
	if calls > 0 {
		w.Key("tool_calls")
		w.Arr()
		for i := range parts {
			p := &parts[i]
			if p.Kind != ir.KindToolCall {
				continue
			}
			ir.ChatCall(w, -1, p.ID, p.Name, false, func() { t.argsString(w, p) })
		}
		w.End(']')
	}
	w.End('}')
	return nil
}
