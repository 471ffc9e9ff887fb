package translate

import (
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// readChat reads an OpenAI Chat Completions request into the IR.
func (t *Translator) readChat() error {
	c := &t.cur
	r := &t.req
	if !c.Object() {
		return t.invalid(at("body"), "must be a JSON object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue // null is absent, as the API treats it
		}
		var err error
		switch string(k) {
		case "model":
			c.Skip()
		case "messages":
			err = t.chatMessages()
		case "tools":
			err = t.chatTools()
		case "tool_choice":
			err = t.chatToolChoice()
		case "parallel_tool_calls":
			r.Parallel = t.readTri()
		case "max_tokens", "max_completion_tokens":
			r.MaxTokens, err = t.readInt(loc{}.atKey(k))
		case "temperature":
			r.Temperature, err = t.readNumber(at("temperature"))
		case "top_p":
			r.TopP, err = t.readNumber(at("top_p"))
		case "top_k":
			r.TopK, err = t.readNumber(at("top_k"))
		case "stop":
			err = t.readStops(at("stop"))
		case "stream":
			r.Stream = t.readTri() == ir.True
		case "stream_options":
			err = t.chatStreamOptions()
		case "n":
			var n int64
			if n, err = t.readInt(at("n")); err == nil && n > 1 && t.to != dialect.Chat {
				err = t.unsupported(at("n"), "more than one choice (n > 1)")
			}
		case "response_format":
			err = t.chatResponseFormat()
		case "reasoning_effort":
			err = t.readEffort(at("reasoning_effort"), ir.EffortNone, ir.EffortXHigh)
		case "user":
			r.User, err = t.readRS(at("user"))
		case "safety_identifier":
			r.SafetyID, err = t.readRS(at("safety_identifier"))
		case "prompt_cache_key":
			r.PromptCacheKey, err = t.readRS(at("prompt_cache_key"))
		case "metadata":
			r.Metadata, err = t.readObjectRaw(at("metadata"))
		case "service_tier":
			r.ServiceTier, err = t.readRS(at("service_tier"))
		case "verbosity":
			r.Verbosity, err = t.readRS(at("verbosity"))
		case "logprobs":
			if t.readTri() == ir.True {
				err = t.unsupported(at("logprobs"), "logprobs")
			}
		case "audio":
			c.Skip()
			err = t.unsupported(at("audio"), "audio output")
		case "modalities":
			err = t.chatModalities()
		case "functions", "function_call":
			c.Skip()
			err = t.unsupported(loc{}.atKey(k), "the legacy functions API (use tools and tool_choice)")
		case "store":
			if t.readTri() == ir.True {
				t.drop("store")
			}
		default:
			// seed, frequency/presence penalties, logit_bias, top_logprobs,
			// prediction, web_search_options and fields newer than this
			// converter: sampling hints or features the upstream lacks.
			c.Skip()
			t.drop(string(k))
		}
		if err != nil {
			return err
		}
	}
	return c.Err()
}

func (t *Translator) chatStreamOptions() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("stream_options"), "must be an object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if string(k) == "include_usage" {
			t.req.IncludeUsage = t.readTri() == ir.True
			continue
		}
		c.Skip()
	}
	return nil
}

func (t *Translator) chatModalities() error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(at("modalities"), "must be an array")
	}
	for c.Next() {
		if s := ir.StrRS(c); ir.RSEquals(s, "audio") {
			return t.unsupported(at("modalities"), "audio output")
		} else if s == nil {
			c.Skip()
		}
	}
	return nil
}

func (t *Translator) chatMessages() error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(at("messages"), "must be an array")
	}
	for i := 0; c.Next(); i++ {
		if err := t.chatMessage(i); err != nil {
			return err
		}
	}
	return nil
}

// chatMessage reads one message. Its content is read before its role may
// be known (members come in any order) and placed afterwards: system and
// developer text goes to the system prompt, a tool message becomes a
// tool result in a user turn.
func (t *Translator) chatMessage(i int) error {
	c := &t.cur
	r := &t.req
	field := at("messages").index(i)
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	lo := int32(len(r.Parts))
	var role, callID []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "role":
			role, err = t.readRS(field.at("role"))
		case "content":
			err = t.chatContent(field.at("content"))
		case "tool_calls":
			err = t.chatToolCalls(field.at("tool_calls"))
		case "tool_call_id":
			callID, err = t.readRS(field.at("tool_call_id"))
		case "refusal":
			var s []byte
			if s, err = t.readRS(field.at("refusal")); err == nil {
				r.Add(ir.Part{Kind: ir.KindText, Text: s})
			}
		case "reasoning_content", "reasoning":
			c.Skip() // reasoning in history: no other dialect can take it back
			t.drop("messages.reasoning_content")
		case "name":
			c.Skip()
			t.drop("messages.name")
		default:
			c.Skip()
			t.drop("messages." + string(k))
		}
		if err != nil {
			return err
		}
	}
	switch string(role) {
	case "system", "developer":
		for _, p := range r.Parts[lo:] {
			if p.Kind != ir.KindText {
				return t.invalid(field.at("content"), "a %s message may hold only text", role)
			}
			r.System = append(r.System, p)
		}
		r.Parts = r.Parts[:lo]
	case "user":
		r.Push(ir.RoleUser, lo)
	case "assistant":
		r.Push(ir.RoleAssistant, lo)
	case "tool":
		if callID == nil {
			return t.invalid(field.at("tool_call_id"), "a tool message needs the tool_call_id it answers")
		}
		r.Add(ir.Part{Kind: ir.KindToolResult, ID: callID, Result: r.MoveInner(lo)})
		r.Push(ir.RoleUser, lo)
	case "":
		return t.invalid(field.at("role"), "is missing")
	default:
		return t.invalid(field.at("role"), "unknown role %q (use system, developer, user, assistant or tool)", role)
	}
	return nil
}

// chatContent reads a content value (string or array of parts) into parts.
func (t *Translator) chatContent(field loc) error {
	return t.contentList(field, (*Translator).chatPart)
}

// chatPart reads one content part. Members may come in any order, so the
// candidates are collected and the type decides at the end.
func (t *Translator) chatPart(field loc) error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	var typ, text, url, detail, fileData, fileID, filename, cache []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(field.at("type"))
		case "text", "refusal":
			text, err = t.readRS(field.atKey(k))
		case "image_url":
			if s := ir.StrRS(c); s != nil {
				url = s // some clients send the URL itself
				break
			}
			if !c.Object() {
				return t.invalid(field.at("image_url"), "must be an object with url")
			}
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				switch string(k2) {
				case "url":
					url, err = t.readRS(field.at("image_url.url"))
				case "detail":
					detail = ir.StrRS(c)
					if detail == nil {
						c.Skip()
					}
				default:
					c.Skip()
				}
				if err != nil {
					return err
				}
			}
		case "file":
			if !c.Object() {
				return t.invalid(field.at("file"), "must be an object")
			}
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				switch string(k2) {
				case "file_data":
					fileData, err = t.readRS(field.at("file.file_data"))
				case "file_id":
					fileID, err = t.readRS(field.at("file.file_id"))
				case "filename":
					filename, err = t.readRS(field.at("file.filename"))
				default:
					c.Skip()
				}
				if err != nil {
					return err
				}
			}
		case "cache_control":
			cache = c.Skip() // an extension some OpenAI-compatible hosts take
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	switch string(typ) {
	case "text", "refusal":
		if text == nil {
			return t.invalid(field, "a %s part needs its %s", typ, typ)
		}
		t.req.Add(ir.Part{Kind: ir.KindText, Text: text, Cache: cache})
	case "image_url":
		if url == nil {
			return t.invalid(field.at("image_url.url"), "is missing")
		}
		p := ir.Part{Kind: ir.KindImage, Detail: detail, Cache: cache}
		if err := t.mediaFromURL(&p, url, field.at("image_url.url")); err != nil {
			return err
		}
		t.req.Add(p)
	case "file":
		p := ir.Part{Kind: ir.KindDocument, Filename: filename, Cache: cache}
		switch {
		case fileData != nil:
			if err := t.mediaFromURL(&p, fileData, field.at("file.file_data")); err != nil {
				return err
			}
			if p.Src != ir.SrcBase64 {
				return t.invalid(field.at("file.file_data"), "must be a base64 data URL")
			}
		case fileID != nil:
			p.Src, p.Data = ir.SrcFile, fileID
		default:
			return t.invalid(field.at("file"), "needs file_data or file_id")
		}
		t.req.Add(p)
	case "input_audio":
		return t.unsupported(field.at("type"), "audio input")
	default:
		return t.invalid(field.at("type"), "unknown content part type %q", typ)
	}
	return nil
}

func (t *Translator) chatToolCalls(field loc) error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(field, "must be an array")
	}
	for j := 0; c.Next(); j++ {
		f := field.index(j)
		if !c.Object() {
			return t.invalid(f, "must be an object")
		}
		p := ir.Part{Kind: ir.KindToolCall, ArgsEscaped: true}
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			var err error
			switch string(k) {
			case "id":
				p.ID, err = t.readRS(f.at("id"))
			case "type":
				var s []byte
				if s, err = t.readRS(f.at("type")); err == nil && !ir.RSEquals(s, "function") && !ir.RSEquals(s, "custom") {
					err = t.invalid(f.at("type"), "unknown tool call type %q", s)
				}
			case "function", "custom":
				p.Custom = string(k) == "custom"
				if !c.Object() {
					return t.invalid(f.atKey(k), "must be an object")
				}
				for k2, ok := c.Key(); ok; k2, ok = c.Key() {
					switch string(k2) {
					case "name":
						p.Name, err = t.readRS(f.at("function.name"))
					case "arguments", "input":
						p.Args, err = t.readRS(f.at("function.arguments"))
					default:
						c.Skip()
					}
					if err != nil {
						return err
					}
				}
			default:
				c.Skip()
			}
			if err != nil {
				return err
			}
		}
		if p.ID == nil || p.Name == nil {
			return t.invalid(f, "a tool call needs id and function.name")
		}
		if p.Args == nil {
			p.Args = p.Name[:0] // empty arguments
		}
		t.req.Add(p)
	}
	return nil
}

func (t *Translator) chatTools() error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(at("tools"), "must be an array")
	}
	for i := 0; c.Next(); i++ {
		f := at("tools").index(i)
		if !c.Object() {
			return t.invalid(f, "must be an object")
		}
		var typ []byte
		var tl ir.Tool
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			var err error
			switch string(k) {
			case "type":
				typ, err = t.readRS(f.at("type"))
			case "function", "custom":
				err = t.toolBody(&tl, f.atKey(k), nil)
			case "cache_control":
				tl.Cache = c.Skip()
			default:
				c.Skip()
			}
			if err != nil {
				return err
			}
		}
		switch string(typ) {
		case "function", "":
			tl.Kind = ir.ToolFunction
		case "custom":
			tl.Kind = ir.ToolCustom
		default:
			t.drop("tools[].type=" + string(typ))
			continue
		}
		if tl.Name == nil {
			return t.invalid(f.at("function.name"), "is missing")
		}
		t.req.Tools = append(t.req.Tools, tl)
	}
	return nil
}

// toolBody reads the inner object of an OpenAI tool definition (chat's
// "function"/"custom" object, or a Responses tool itself, whose type goes
// to typ).
func (t *Translator) toolBody(tl *ir.Tool, field loc, typ *[]byte) error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "name":
			tl.Name, err = t.readRS(field.at("name"))
		case "description":
			tl.Description, err = t.readRS(field.at("description"))
		case "parameters":
			tl.Schema, err = t.readObjectRaw(field.at("parameters"))
		case "strict":
			tl.Strict = c.Skip()
		case "format":
			c.Skip() // a custom tool's grammar: no other dialect has one
			t.drop("tools[].format")
		case "tools":
			if typ == nil {
				c.Skip()
				break
			}
			// A Responses namespace's member tools (typ is only asked
			// for by the Responses reader).
			err = t.respToolList(field.at("tools"))
		case "type":
			if typ == nil {
				c.Skip()
				break
			}
			*typ, err = t.readRS(field.at("type"))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Translator) chatToolChoice() error {
	c := &t.cur
	if s := ir.StrRS(c); s != nil {
		return t.choiceWord(s, at("tool_choice"))
	}
	if !c.Object() {
		return t.invalid(at("tool_choice"), "must be a string or an object")
	}
	var typ, name []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(at("tool_choice.type"))
		case "function", "custom":
			if !c.Object() {
				return t.invalid(at("tool_choice").atKey(k), "must be an object")
			}
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				if string(k2) == "name" {
					name, err = t.readRS(at("tool_choice.function.name"))
				} else {
					c.Skip()
				}
			}
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	if (ir.RSEquals(typ, "function") || ir.RSEquals(typ, "custom")) && name != nil {
		t.req.Choice = ir.ToolChoice{Mode: ir.ChoiceTool, Name: name}
		return nil
	}
	return t.unsupported(at("tool_choice.type"), "tool_choice of type \""+string(typ)+"\"")
}

// choiceWord reads the OpenAI tool_choice words.
func (t *Translator) choiceWord(s []byte, field loc) error {
	switch string(s) {
	case "auto":
		t.req.Choice.Mode = ir.ChoiceAuto
	case "none":
		t.req.Choice.Mode = ir.ChoiceNone
	case "required":
		t.req.Choice.Mode = ir.ChoiceRequired
	default:
		return t.invalid(field, "unknown tool_choice %q (use auto, none or required)", s)
	}
	return nil
}

func (t *Translator) chatResponseFormat() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("response_format"), "must be an object")
	}
	f := &t.req.Format
	var typ []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(at("response_format.type"))
		case "json_schema":
			err = t.schemaBody(f, at("response_format.json_schema"), nil)
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	return t.formatType(typ, at("response_format.type"))
}

// schemaBody reads {name, description, schema, strict} (chat's json_schema
// object, or a Responses text.format itself, whose type goes to typ).
func (t *Translator) schemaBody(f *ir.OutputFormat, field loc, typ *[]byte) error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "name":
			f.Name, err = t.readRS(field.at("name"))
		case "description":
			f.Description, err = t.readRS(field.at("description"))
		case "schema":
			f.Schema, err = t.readObjectRaw(field.at("schema"))
		case "strict":
			f.Strict = c.Skip()
		case "type":
			if typ == nil {
				c.Skip()
				break
			}
			*typ, err = t.readRS(field.at("type"))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Translator) formatType(typ []byte, field loc) error {
	f := &t.req.Format
	switch string(typ) {
	case "text":
		f.Kind = ir.FormatText
	case "json_object":
		f.Kind = ir.FormatJSONObject
	case "json_schema":
		if f.Schema == nil {
			return t.invalid(field, "json_schema needs a schema")
		}
		f.Kind = ir.FormatJSONSchema
	default:
		return t.invalid(field, "unknown format type %q (use text, json_object or json_schema)", typ)
	}
	return nil
}
