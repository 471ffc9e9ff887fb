package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// readMessages reads an Anthropic Messages request into the IR.
func (t *Translator) readMessages() error {
	c := &t.cur
	r := &t.req
	if !c.Object() {
		return t.invalid(at("body"), "must be a JSON object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "model":
			c.Skip()
		case "max_tokens":
			r.MaxTokens, err = t.readInt(at("max_tokens"))
		case "messages":
			err = t.anthropicMessages()
		case "system":
			err = t.anthropicSystem()
		case "tools":
			err = t.anthropicTools()
		case "tool_choice":
			err = t.anthropicToolChoice()
		case "temperature":
			r.Temperature, err = t.readNumber(at("temperature"))
		case "top_p":
			r.TopP, err = t.readNumber(at("top_p"))
		case "top_k":
			r.TopK, err = t.readNumber(at("top_k"))
		case "stop_sequences":
			err = t.readStops(at("stop_sequences"))
		case "stream":
			r.Stream = t.readTri() == ir.True
		case "thinking":
			err = t.anthropicThinking()
		case "output_config":
			err = t.anthropicOutputConfig()
		case "mcp_servers":
			c.Skip()
			err = t.unsupported(at("mcp_servers"), "server-side MCP connectors")
		default:
			// metadata, service_tier, context_management, container,
			// inference_geo, speed and newer fields: Anthropic-side
			// features other providers do not have.
			c.Skip()
			t.drop(string(k))
		}
		if err != nil {
			return err
		}
	}
	return c.Err()
}

func (t *Translator) anthropicSystem() error {
	c := &t.cur
	r := &t.req
	if s := ir.StrRS(c); s != nil {
		r.System = append(r.System, ir.Part{Kind: ir.KindText, Text: s})
		return nil
	}
	if !c.Array() {
		return t.invalid(at("system"), "must be a string or an array of text blocks")
	}
	lo := int32(len(r.Parts))
	for i := 0; c.Next(); i++ {
		if err := t.anthropicBlock(at("system").index(i), false); err != nil {
			return err
		}
	}
	for _, p := range r.Parts[lo:] {
		if p.Kind != ir.KindText {
			return t.invalid(at("system"), "may hold only text blocks")
		}
		r.System = append(r.System, p)
	}
	r.Parts = r.Parts[:lo]
	return nil
}

func (t *Translator) anthropicMessages() error {
	c := &t.cur
	r := &t.req
	if !c.Array() {
		return t.invalid(at("messages"), "must be an array")
	}
	for i := 0; c.Next(); i++ {
		field := at("messages").index(i)
		if !c.Object() {
			return t.invalid(field, "must be an object")
		}
		lo := int32(len(r.Parts))
		var role ir.Role
		system := false
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			var err error
			switch string(k) {
			case "role":
				var s []byte
				if s, err = t.readRS(field.at("role")); err == nil {
					switch string(s) {
					case "user":
						role = ir.RoleUser
					case "assistant":
						role = ir.RoleAssistant
					case "system":
						// Claude Code (2.1.x) sends mid-conversation
						// system messages; like chat's and Responses'
						// they are hoisted into the system prompt.
						system = true
					default:
						err = t.invalid(field.at("role"), "unknown role %q (use user, assistant or system)", s)
					}
				}
			case "content":
				err = t.anthropicContent(field.at("content"))
			default:
				c.Skip()
			}
			if err != nil {
				return err
			}
		}
		if system {
			for _, p := range r.Parts[lo:] {
				if p.Kind != ir.KindText {
					return t.invalid(field.at("content"), "a system message may hold only text")
				}
				r.System = append(r.System, p)
			}
			r.Parts = r.Parts[:lo]
			continue
		}
		if role == 0 {
			return t.invalid(field.at("role"), "is missing")
		}
		r.Push(role, lo)
	}
	return nil
}

func (t *Translator) anthropicContent(field loc) error {
	return t.contentList(field, (*Translator).anthropicTopBlock)
}

func (t *Translator) anthropicTopBlock(field loc) error { return t.anthropicBlock(field, true) }

// anthropicBlock reads one content block into parts. nested is false for
// the blocks of a tool result and of system, which cannot hold tool use.
func (t *Translator) anthropicBlock(field loc, topLevel bool) error {
	c := &t.cur
	r := &t.req
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	var typ []byte
	p := ir.Part{}
	var content ir.Span
	hasContent := false
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(field.at("type"))
		case "text":
			p.Text, err = t.readRS(field.at("text"))
		case "cache_control":
			p.Cache = c.Skip()
		case "source":
			err = t.anthropicSource(&p, field.at("source"))
		case "title":
			p.Filename, err = t.readRS(field.at("title"))
		case "id":
			p.ID, err = t.readRS(field.at("id"))
		case "name":
			p.Name, err = t.readRS(field.at("name"))
		case "input":
			p.Args, err = t.readObjectRaw(field.at("input"))
		case "tool_use_id":
			p.ID, err = t.readRS(field.at("tool_use_id"))
		case "is_error":
			p.IsError = t.readTri() == ir.True
		case "content":
			if !topLevel {
				return t.invalid(field.at("content"), "nested tool results are not allowed")
			}
			hasContent = true
			lo := int32(len(r.Parts))
			if s := ir.StrRS(c); s != nil {
				r.Add(ir.Part{Kind: ir.KindText, Text: s})
			} else if c.Array() {
				for j := 0; c.Next(); j++ {
					if err := t.anthropicBlock(field.at("content").index(j), false); err != nil {
						return err
					}
				}
			} else {
				return t.invalid(field.at("content"), "must be a string or an array of blocks")
			}
			content = r.MoveInner(lo)
		case "thinking":
			p.Text, err = t.readRS(field.at("thinking"))
		case "signature":
			p.Sig, err = t.readRS(field.at("signature"))
		case "data":
			p.Sig, err = t.readRS(field.at("data"))
		default:
			c.Skip() // citations, context, …
		}
		if err != nil {
			return err
		}
	}
	switch string(typ) {
	case "text":
		if p.Text == nil {
			return t.invalid(field.at("text"), "is missing")
		}
		p.Kind = ir.KindText
	case "image", "document":
		if p.Src == 0 {
			return t.invalid(field.at("source"), "is missing")
		}
		p.Kind = ir.KindImage
		if typ[0] == 'd' {
			p.Kind = ir.KindDocument
		} else if p.Src == ir.SrcText {
			return t.invalid(field.at("source.type"), "an image cannot have a text source")
		}
	case "tool_use":
		if !topLevel {
			return t.invalid(field.at("type"), "tool_use cannot appear here")
		}
		if p.ID == nil || p.Name == nil {
			return t.invalid(field, "tool_use needs id and name")
		}
		if p.Args == nil {
			p.Args = []byte("{}")
		}
		p.Kind = ir.KindToolCall
	case "tool_result":
		if !topLevel {
			return t.invalid(field.at("type"), "tool_result cannot appear here")
		}
		if p.ID == nil {
			return t.invalid(field.at("tool_use_id"), "is missing")
		}
		p.Kind, p.Text = ir.KindToolResult, nil
		if hasContent {
			p.Result = content
		} else {
			p.Result = ir.Span{Lo: int32(len(r.Inner)), Hi: int32(len(r.Inner))}
		}
	case "thinking", "redacted_thinking":
		if !topLevel {
			return t.invalid(field.at("type"), "%s cannot appear here", typ)
		}
		p.Kind, p.Redacted, p.Origin = ir.KindReasoning, typ[0] == 'r', dialect.Messages
		if !p.Redacted && bytes.HasPrefix(p.Sig, []byte(ir.EnvResponses)) {
			// An OpenAI reasoning item this gateway carried in a signature.
			rest := p.Sig[len(ir.EnvResponses):]
			if i := bytes.IndexByte(rest, ':'); i > 0 {
				p.Origin, p.ID, p.Sig = dialect.Responses, rest[:i], rest[i+1:]
			}
		}
	default:
		return t.unsupported(field.at("type"), "the content block type \""+string(typ)+"\"")
	}
	r.Add(p)
	return nil
}

func (t *Translator) anthropicSource(p *ir.Part, field loc) error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	var typ []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(field.at("type"))
		case "media_type":
			p.MediaType, err = t.readRS(field.at("media_type"))
		case "data", "url", "file_id":
			p.Data, err = t.readRS(field.atKey(k))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	switch string(typ) {
	case "base64":
		if p.MediaType == nil || p.Data == nil {
			return t.invalid(field, "a base64 source needs media_type and data")
		}
		p.Src = ir.SrcBase64
	case "url":
		p.Src = ir.SrcURL
	case "file":
		p.Src = ir.SrcFile
	case "text":
		p.Src = ir.SrcText
	default:
		return t.unsupported(field.at("type"), "the source type \""+string(typ)+"\"")
	}
	if p.Data == nil {
		return t.invalid(field, "has no data, url or file_id")
	}
	return nil
}

func (t *Translator) anthropicTools() error {
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
		tl := ir.Tool{Kind: ir.ToolFunction}
		// Fields of a kept tool the other dialects have no place for
		// (defer_loading: Anthropic's tool search, which Claude Code
		// uses for MCP tools; input_examples, …): the tool is sent as an
		// ordinary one and they are reported dropped.
		var extra [4][]byte
		nExtra := 0
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if c.Null() {
				continue
			}
			var err error
			switch string(k) {
			case "type":
				typ, err = t.readRS(f.at("type"))
			case "name":
				tl.Name, err = t.readRS(f.at("name"))
			case "description":
				tl.Description, err = t.readRS(f.at("description"))
			case "input_schema":
				tl.Schema, err = t.readObjectRaw(f.at("input_schema"))
			case "cache_control":
				tl.Cache = c.Skip()
			case "strict":
				tl.Strict = c.Skip()
			default:
				if nExtra < len(extra) {
					extra[nExtra] = k
					nExtra++
				}
				c.Skip()
			}
			if err != nil {
				return err
			}
		}
		if typ != nil && !ir.RSEquals(typ, "custom") {
			// A server tool (web search, bash, text editor, …) that only
			// Anthropic runs: the model elsewhere cannot call it.
			t.drop("tools[].type=" + string(typ))
			continue
		}
		if tl.Name == nil {
			return t.invalid(f.at("name"), "is missing")
		}
		for _, k := range extra[:nExtra] {
			t.drop("tools[]." + string(k))
		}
		t.req.Tools = append(t.req.Tools, tl)
	}
	return nil
}

func (t *Translator) anthropicToolChoice() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("tool_choice"), "must be an object")
	}
	var typ, name []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(at("tool_choice.type"))
		case "name":
			name, err = t.readRS(at("tool_choice.name"))
		case "disable_parallel_tool_use":
			if t.readTri() == ir.True {
				t.req.Parallel = ir.False
			}
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	ch := &t.req.Choice
	switch string(typ) {
	case "auto":
		ch.Mode = ir.ChoiceAuto
	case "any":
		ch.Mode = ir.ChoiceRequired
	case "none":
		ch.Mode = ir.ChoiceNone
	case "tool":
		if name == nil {
			return t.invalid(at("tool_choice.name"), "is missing")
		}
		ch.Mode, ch.Name = ir.ChoiceTool, name
	default:
		return t.invalid(at("tool_choice.type"), "unknown tool_choice type %q (use auto, any, tool or none)", typ)
	}
	return nil
}

func (t *Translator) anthropicThinking() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("thinking"), "must be an object")
	}
	rz := &t.req.Reasoning
	var typ []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(at("thinking.type"))
		case "budget_tokens":
			rz.Budget, err = t.readInt(at("thinking.budget_tokens"))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	switch string(typ) {
	case "enabled":
		if rz.Budget == 0 {
			return t.invalid(at("thinking.budget_tokens"), "is required when thinking is enabled")
		}
	case "adaptive":
		rz.Adaptive = true
	case "disabled":
		rz.Disabled, rz.Budget = true, 0
	default:
		return t.invalid(at("thinking.type"), "unknown thinking type %q (use enabled, adaptive or disabled)", typ)
	}
	return nil
}

func (t *Translator) anthropicOutputConfig() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("output_config"), "must be an object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "effort":
			err = t.readEffort(at("output_config.effort"), ir.EffortLow, ir.EffortMax)
		case "format":
			var typ []byte
			if !c.Object() {
				return t.invalid(at("output_config.format"), "must be an object")
			}
			for k2, ok := c.Key(); ok; k2, ok = c.Key() {
				switch string(k2) {
				case "type":
					typ, err = t.readRS(at("output_config.format.type"))
				case "schema":
					t.req.Format.Schema, err = t.readObjectRaw(at("output_config.format.schema"))
				default:
					c.Skip()
				}
				if err != nil {
					return err
				}
			}
			if !ir.RSEquals(typ, "json_schema") {
				return t.invalid(at("output_config.format.type"), "unknown format type %q (use json_schema)", typ)
			}
			err = t.formatType(typ, at("output_config.format"))
		default:
			c.Skip()
			t.drop("output_config." + string(k))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
