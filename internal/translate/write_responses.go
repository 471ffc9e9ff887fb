package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
)

// writeResponses writes the IR as an OpenAI Responses request. It always
// sends store: false with the whole transcript: the caller's dialect has
// no response ids to continue from.
func (t *Translator) writeResponses(dst []byte) ([]byte, error) {
	r := &t.req
	w := writer{b: dst}
	w.obj()
	w.key("model")
	w.str(t.opts.Model)
	if len(r.System) > 0 {
		w.key("instructions")
		for i := range r.System {
			t.dropCache(&r.System[i])
		}
		joinText(&w, r.System)
	}
	w.key("input")
	w.arr()
	for mi := range r.Messages {
		m := &r.Messages[mi]
		if err := t.responsesMessage(&w, m, mi); err != nil {
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
			if tl.Kind == ToolCustom {
				w.lit(`"custom"`)
				w.key("name")
				w.rs(tl.Name)
				w.rsField("description", tl.Description)
				w.end('}')
				continue
			}
			w.lit(`"function"`)
			w.key("name")
			w.rs(tl.Name)
			w.rsField("description", tl.Description)
			w.key("parameters")
			w.raw(toolSchema(tl))
			// Responses makes functions strict unless told otherwise, and
			// strict mode refuses most schemas written for other APIs.
			w.key("strict")
			if tl.Strict != nil {
				w.raw(tl.Strict)
			} else {
				w.lit("false")
			}
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
		if t.isCustom(r.Choice.Name) {
			w.lit(`"custom"`)
		} else {
			w.lit(`"function"`)
		}
		w.key("name")
		w.rs(r.Choice.Name)
		w.end('}')
	}
	if n := t.maxTokens(0); n > 0 {
		w.key("max_output_tokens")
		w.int(n)
	}
	w.rawField("temperature", r.Temperature)
	w.rawField("top_p", r.TopP)
	if r.TopK != nil {
		t.drop("top_k")
	}
	if len(r.Stop) > 0 {
		field := at("stop")
		if t.from == dialect.Messages {
			field = at("stop_sequences")
		}
		return dst, t.unsupported(field, "stop sequences")
	}
	if r.Stream {
		w.key("stream")
		w.lit("true")
	}
	w.key("store")
	w.lit("false")
	if e := t.openAIEffort(); e != EffortUnset {
		w.key("reasoning")
		w.obj()
		w.key("effort")
		w.str(e.String())
		if r.Reasoning.Summary != nil {
			w.key("summary")
			w.rs(r.Reasoning.Summary)
		} else if t.from == dialect.Messages {
			w.key("summary")
			w.lit(`"auto"`) // the thinking text an Anthropic caller shows
		}
		w.end('}')
		if t.from == dialect.Messages {
			// The reasoning comes back inside the caller's thinking
			// signature, for the next turn of a tool loop.
			w.key("include")
			w.lit(`["reasoning.encrypted_content"]`)
		}
	}
	if r.Format.Kind != FormatUnset || r.Verbosity != nil {
		w.key("text")
		w.obj()
		t.responsesFormat(&w)
		w.rsField("verbosity", r.Verbosity)
		w.end('}')
	}
	t.openAIExtras(&w)
	w.end('}')
	return w.b, nil
}

// responsesFormat writes text.format.
func (t *Translator) responsesFormat(w *writer) {
	f := &t.req.Format
	switch f.Kind {
	case FormatText:
		w.key("format")
		w.lit(`{"type":"text"}`)
	case FormatJSONObject:
		w.key("format")
		w.lit(`{"type":"json_object"}`)
	case FormatJSONSchema:
		w.key("format")
		w.obj()
		w.key("type")
		w.lit(`"json_schema"`)
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
	}
}

// responsesMessage writes one turn as input items: runs of content parts
// become a message item, each tool call, result and reasoning its own item.
func (t *Translator) responsesMessage(w *writer, m *Message, mi int) error {
	r := &t.req
	parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
	field := at("messages").index(mi)
	open := false
	closeMsg := func() {
		if open {
			w.end(']')
			w.end('}')
			open = false
		}
	}
	for i := range parts {
		p := &parts[i]
		t.dropCache(p)
		switch p.Kind {
		case KindText, KindImage, KindDocument:
			if p.Kind == KindText && len(p.Text) == 0 {
				continue
			}
			if !open {
				w.obj()
				w.key("type")
				w.lit(`"message"`)
				w.key("role")
				if m.Role == RoleAssistant {
					w.lit(`"assistant"`)
				} else {
					w.lit(`"user"`)
				}
				w.key("content")
				w.arr()
				open = true
			}
			if err := t.responsesPart(w, p, m.Role == RoleAssistant, field); err != nil {
				return err
			}
		case KindToolCall:
			closeMsg()
			w.obj()
			w.key("type")
			if p.Custom {
				w.lit(`"custom_tool_call"`)
				w.key("call_id")
				w.rs(p.ID)
				w.key("name")
				w.rs(p.Name)
				w.key("input")
				w.rs(p.Args)
			} else {
				w.lit(`"function_call"`)
				w.key("call_id")
				w.rs(p.ID)
				w.key("name")
				w.rs(p.Name)
				w.key("arguments")
				t.argsString(w, p)
			}
			w.end('}')
		case KindToolResult:
			closeMsg()
			w.obj()
			w.key("type")
			if p.Custom {
				w.lit(`"custom_tool_call_output"`)
			} else {
				w.lit(`"function_call_output"`)
			}
			w.key("call_id")
			w.rs(p.ID)
			w.key("output")
			res := r.ResultParts(p)
			if textOnly(res) {
				joinText(w, res)
			} else {
				w.arr()
				for j := range res {
					if err := t.responsesPart(w, &res[j], false, field); err != nil {
						return err
					}
				}
				w.end(']')
			}
			if p.IsError {
				t.drop("tool_result.is_error")
			}
			w.end('}')
		case KindReasoning:
			if p.Origin != dialect.Responses || p.ID == nil {
				t.drop("reasoning")
				continue
			}
			closeMsg()
			w.obj()
			w.key("type")
			w.lit(`"reasoning"`)
			w.key("id")
			w.rs(p.ID)
			summary(w, p.Text)
			w.rsField("encrypted_content", p.Sig)
			w.end('}')
		}
	}
	closeMsg()
	return nil
}

// responsesPart writes one content part of a message item or tool output.
func (t *Translator) responsesPart(w *writer, p *Part, assistant bool, field loc) error {
	w.obj()
	w.key("type")
	switch p.Kind {
	case KindText:
		if assistant {
			w.lit(`"output_text"`)
		} else {
			w.lit(`"input_text"`)
		}
		w.key("text")
		w.rs(p.Text)
	case KindImage:
		if assistant {
			return t.invalid(field, "an assistant message cannot hold an image for a %s upstream", t.to)
		}
		w.lit(`"input_image"`)
		if p.Src == SrcFile {
			if err := t.fileIDCrossing(p, field.at("content")); err != nil {
				return err
			}
			w.key("file_id")
			w.rs(p.Data)
		} else {
			w.key("image_url")
			mediaURL(w, p)
		}
		w.key("detail")
		if p.Detail != nil {
			w.rs(p.Detail)
		} else {
			w.lit(`"auto"`)
		}
	case KindDocument:
		if p.Src == SrcText {
			w.lit(`"input_text"`)
			w.key("text")
			w.rs(p.Data)
			break
		}
		w.lit(`"input_file"`)
		switch p.Src {
		case SrcURL:
			w.key("file_url")
			w.rs(p.Data)
		case SrcFile:
			if err := t.fileIDCrossing(p, field.at("content")); err != nil {
				return err
			}
			w.key("file_id")
			w.rs(p.Data)
		default:
			w.key("file_data")
			mediaURL(w, p)
			w.key("filename")
			switch {
			case p.Filename != nil:
				w.rs(p.Filename)
			case bytes.Equal(p.MediaType, []byte("application/pdf")):
				w.lit(`"document.pdf"`)
			default:
				w.lit(`"document"`)
			}
		}
	}
	w.end('}')
	return nil
}
