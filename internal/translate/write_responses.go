package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// writeResponses writes the IR as an OpenAI Responses request: its
// members after the model (Request opens and closes the object). It always
// sends store: false with the whole transcript: the caller's dialect has
// no response ids to continue from.
func (t *Translator) writeResponses(w *ir.Writer) error {
	r := &t.req
	if len(r.System) > 0 {
		w.Key("instructions")
		for i := range r.System {
			t.dropCache(&r.System[i])
		}
		ir.JoinText(w, r.System)
	}
	w.Key("input")
	w.Arr()
	for mi := range r.Messages {
		m := &r.Messages[mi]
		if err := t.responsesMessage(w, m, mi); err != nil {
			return err
		}
	}
	w.End(']')
	t.writeTools(w, &responsesTools, -1)
	if len(r.Tools) > 0 && !openAIChoiceWord(w, r.Choice.Mode) && r.Choice.Mode == ir.ChoiceTool {
		w.Key("tool_choice")
		w.Obj()
		w.Key("type")
		if t.isCustom(r.Choice.Name) {
			w.Lit(`"custom"`)
		} else {
			w.Lit(`"function"`)
		}
		w.Key("name")
		w.RS(r.Choice.Name)
		w.End('}')
	}
	t.openAISampling(w, "max_output_tokens")
	if len(r.Stop) > 0 {
		field := at("stop")
		if t.from == dialect.Messages {
			field = at("stop_sequences")
		}
		return t.unsupported(field, "stop sequences")
	}
	if r.Stream {
		w.Key("stream")
		w.Lit("true")
	}
	w.Key("store")
	w.Lit("false")
	if e := t.openAIEffort(); e != ir.EffortUnset {
		w.Key("reasoning")
		w.Obj()
		w.Key("effort")
		w.Str(e.String())
		if r.Reasoning.Summary != nil {
			w.Key("summary")
			w.RS(r.Reasoning.Summary)
		} else if t.from == dialect.Messages {
			w.Key("summary")
			w.Lit(`"auto"`) // the thinking text an Anthropic caller shows
		}
		w.End('}')
		if t.from == dialect.Messages {
			// The reasoning comes back inside the caller's thinking
			// signature, for the next turn of a tool loop.
			w.Key("include")
			w.Lit(`["reasoning.encrypted_content"]`)
		}
	}
	if r.Format.Kind != ir.FormatUnset || r.Verbosity != nil {
		w.Key("text")
		w.Obj()
		t.openAIFormat(w, "format", "")
		w.RSField("verbosity", r.Verbosity)
		w.End('}')
	}
	t.openAIExtras(w)
	return nil
}

// responsesMessage writes one turn as input items: runs of content parts
// become a message item, each tool call, result and reasoning its own item.
func (t *Translator) responsesMessage(w *ir.Writer, m *ir.Message, mi int) error {
	r := &t.req
	parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
	field := at("messages").index(mi)
	open := false
	closeMsg := func() {
		if open {
			w.End(']')
			w.End('}')
			open = false
		}
	}
	for i := range parts {
		p := &parts[i]
		t.dropCache(p)
		switch p.Kind {
		case ir.KindText, ir.KindImage, ir.KindDocument:
			if p.Kind == ir.KindText && len(p.Text) == 0 {
				continue
			}
			if !open {
				w.Obj()
				w.Key("type")
				w.Lit(`"message"`)
				w.Key("role")
				if m.Role == ir.RoleAssistant {
					w.Lit(`"assistant"`)
				} else {
					w.Lit(`"user"`)
				}
				w.Key("content")
				w.Arr()
				open = true
			}
			if err := t.responsesPart(w, p, m.Role == ir.RoleAssistant, field); err != nil {
				return err
			}
		case ir.KindToolCall:
			closeMsg()
			callItem(w, p, `"function_call"`, `"custom_tool_call"`)
			w.Key("name")
			w.RS(p.Name)
			if p.Custom {
				w.Key("input")
				w.RS(p.Args)
			} else {
				w.Key("arguments")
				t.argsString(w, p)
			}
			w.End('}')
		case ir.KindToolResult:
			closeMsg()
			callItem(w, p, `"function_call_output"`, `"custom_tool_call_output"`)
			w.Key("output")
			res := r.ResultParts(p)
			if textOnly(res) {
				ir.JoinText(w, res)
			} else {
				w.Arr()
				for j := range res {
					if err := t.responsesPart(w, &res[j], false, field); err != nil {
						return err
					}
				}
				w.End(']')
			}
			if p.IsError {
				t.drop("tool_result.is_error")
			}
			w.End('}')
		case ir.KindReasoning:
			if p.Origin != dialect.Responses || p.ID == nil {
				t.drop("reasoning")
				continue
			}
			closeMsg()
			w.Obj()
			w.Key("type")
			w.Lit(`"reasoning"`)
			w.Key("id")
			w.RS(p.ID)
			ir.Summary(w, p.Text)
			w.RSField("encrypted_content", p.Sig)
			w.End('}')
		}
	}
	closeMsg()
	return nil
}

// responsesPart writes one content part of a message item or tool output.
func (t *Translator) responsesPart(w *ir.Writer, p *ir.Part, assistant bool, field loc) error {
	w.Obj()
	w.Key("type")
	switch p.Kind {
	case ir.KindText:
		if assistant {
			w.Lit(`"output_text"`)
		} else {
			w.Lit(`"input_text"`)
		}
		w.Key("text")
		w.RS(p.Text)
	case ir.KindImage:
		if assistant {
			return t.invalid(field, "an assistant message cannot hold an image for a %s upstream", t.to)
		}
		w.Lit(`"input_image"`)
		if p.Src == ir.SrcFile {
			if err := t.fileIDCrossing(p, field.at("content")); err != nil {
				return err
			}
			w.Key("file_id")
			w.RS(p.Data)
		} else {
			w.Key("image_url")
			mediaURL(w, p)
		}
		w.Key("detail")
		if p.Detail != nil {
			w.RS(p.Detail)
		} else {
			w.Lit(`"auto"`)
		}
	case ir.KindDocument:
		if p.Src == ir.SrcText {
			w.Lit(`"input_text"`)
			w.Key("text")
			w.RS(p.Data)
			break
		}
		w.Lit(`"input_file"`)
		switch p.Src {
		case ir.SrcURL:
			w.Key("file_url")
			w.RS(p.Data)
		case ir.SrcFile:
			if err := t.fileIDCrossing(p, field.at("content")); err != nil {
				return err
			}
			w.Key("file_id")
			w.RS(p.Data)
		default:
			w.Key("file_data")
			mediaURL(w, p)
			w.Key("filename")
			switch {
			case p.Filename != nil:
				w.RS(p.Filename)
			case bytes.Equal(p.MediaType, []byte("application/pdf")):
				w.Lit(`"document.pdf"`)
			default:
				w.Lit(`"document"`)
			}
		}
	}
	w.End('}')
	return nil
}

// callItem opens the input item of a tool call or of its result, which
// begin alike: the type, function's or custom's as the call was, and the
// call's id.
func callItem(w *ir.Writer, p *ir.Part, function, custom string) {
	w.Obj()
	w.Key("type")
	if p.Custom {
		w.Lit(custom)
	} else {
		w.Lit(function)
	}
	w.Key("call_id")
	w.RS(p.ID)
}
