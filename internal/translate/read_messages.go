package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// The Anthropic Messages request, as tables (see read.go).

// Claude Code (2.1.x) sends mid-conversation system messages; like chat's
// and Responses' they are hoisted into the system prompt.
var anthropicRoles = newRoles("user", "user", "assistant", "assistant", "system", "system")

// anthropicToolKinds: a tool without a type is the caller's own; a typed
// one (web search, bash, text editor, …) is a server tool only Anthropic
// runs, which the model elsewhere cannot call.
var anthropicToolKinds = toolKinds{"": ir.ToolFunction, "custom": ir.ToolFunction}

var anthropicWords = choiceWords{"auto": ir.ChoiceAuto, "any": ir.ChoiceRequired, "none": ir.ChoiceNone, "tool": ir.ChoiceTool}

var anthropicRequest, anthropicMessage, anthropicBlock, anthropicNested, anthropicSource, anthropicTool, anthropicChoice, anthropicThinking, anthropicOutput, anthropicFormat *table

func init() {
	anthropicSource = newTable(false, nil, entries{"type": str(sType), "media_type": str(sMediaType), "data url file_id": str(sData)})
	block := entries{
		"type":           str(sType),
		"text thinking":  str(sText),
		"cache_control":  raw(sCache),
		"source":         fn(readAnthropicSource),
		"title":          str(sFilename),
		"id tool_use_id": str(sID),
		"name":           str(sName),
		"input":          {kind: vObj, slot: sArgs},
		"is_error":       flag(fIsError),
		"signature data": str(sSig),
	}
	// The blocks of a tool result and of system cannot hold tool use.
	anthropicNested = newTable(true, nil, block, entries{"content": fn(func(t *Translator, f loc) error {
		return t.invalid(f, "nested tool results are not allowed")
	})})
	anthropicBlock = newTable(true, nil, block, entries{"content": {kind: vFn, slot: fContent, fn: readToolResultContent}})
	anthropicMessage = newTable(false, nil, entries{
		"role":    str(sRole),
		"content": fn(func(t *Translator, f loc) error { return t.contentList(f, readAnthropicBlock) }),
	})
	// Fields of a kept tool the other dialects have no place for
	// (defer_loading: Anthropic's tool search, which Claude Code uses for
	// MCP tools; input_examples, …): the tool is sent as an ordinary one
	// and they are reported dropped.
	anthropicTool = newTable(true, func(_ *Translator, o *record, k []byte) {
		if o.nExtra < len(o.extra) {
			o.extra[o.nExtra] = k
			o.nExtra++
		}
	}, entries{
		"type":          str(sType),
		"name":          str(sName),
		"description":   str(sDesc),
		"input_schema":  {kind: vObj, slot: sSchema},
		"cache_control": raw(sCache),
		"strict":        raw(sStrict),
	})
	anthropicChoice = newTable(false, nil, entries{"type": str(sType), "name": str(sName), "disable_parallel_tool_use": flag(fTrue)})
	anthropicThinking = newTable(false, nil, entries{"type": str(sType), "budget_tokens": {kind: vInt}})
	anthropicFormat = newTable(false, nil, entries{"type": str(sType), "schema": {kind: vObj, slot: sSchema}})
	anthropicOutput = newTable(true, dropUnder("output_config."), entries{
		"effort": fn(func(t *Translator, f loc) error { return t.readEffort(f, ir.EffortLow, ir.EffortMax) }),
		"format": fn(readAnthropicFormat),
	})

	// metadata, service_tier, context_management, container,
	// inference_geo, speed and newer fields (Anthropic-side features
	// other providers do not have) are dropped.
	anthropicRequest = newTable(true, dropKey, sharedRequest, entries{
		"max_tokens":     fn(readMaxTokens),
		"messages":       fn(func(t *Translator, f loc) error { return t.each(f, readAnthropicMessage) }),
		"system":         fn(readAnthropicSystem),
		"tools":          fn(func(t *Translator, f loc) error { return t.each(f, readAnthropicTool) }),
		"tool_choice":    fn(readAnthropicChoice),
		"top_k":          numInto(func(r *ir.Request) *[]byte { return &r.TopK }),
		"stop_sequences": fn((*Translator).readStops),
		"thinking":       fn(readAnthropicThinking),
		"output_config":  nested(anthropicOutput),
		"mcp_servers":    refuse("server-side MCP connectors"),
	})
}

func readAnthropicSystem(t *Translator, f loc) error {
	r := &t.req
	if s := ir.StrRS(&t.cur); s != nil {
		r.System = append(r.System, ir.Part{Kind: ir.KindText, Text: s})
		return nil
	}
	if t.cur.Peek() != '[' {
		return t.invalid(f, "must be a string or an array of text blocks")
	}
	lo := int32(len(r.Parts))
	if err := t.each(f, readNestedBlock); err != nil {
		return err
	}
	return t.hoist(lo, f, nil)
}

func readAnthropicMessage(t *Translator, field loc) error {
	lo := int32(len(t.req.Parts))
	o, err := t.object(field, anthropicMessage)
	if err != nil {
		return err
	}
	return t.place(anthropicRoles, o.v[sRole], lo, field, nil)
}

// readToolResultContent reads a tool result's content into Request.Inner.
func readToolResultContent(t *Translator, f loc) error {
	r := &t.req
	lo := int32(len(r.Parts))
	if s := ir.StrRS(&t.cur); s != nil {
		r.Add(ir.Part{Kind: ir.KindText, Text: s})
	} else if t.cur.Peek() != '[' {
		return t.invalid(f, "must be a string or an array of blocks")
	} else if err := t.each(f, readNestedBlock); err != nil {
		return err
	}
	t.rec().span = r.MoveInner(lo)
	return nil
}

func readAnthropicBlock(t *Translator, field loc) error { return t.anthropicBlock(field, true) }

func readNestedBlock(t *Translator, field loc) error { return t.anthropicBlock(field, false) }

// anthropicBlock reads one content block into parts. topLevel is false for
// the blocks of a tool result and of system, which cannot hold tool use.
func (t *Translator) anthropicBlock(field loc, topLevel bool) error {
	r := &t.req
	tab := anthropicBlock
	if !topLevel {
		tab = anthropicNested
	}
	o, err := t.object(field, tab)
	if err != nil {
		return err
	}
	typ := o.v[sType]
	p := ir.Part{Text: o.v[sText], Cache: o.v[sCache], Src: o.src, MediaType: o.v[sMediaType], Data: o.v[sData],
		Filename: o.v[sFilename], ID: o.v[sID], Name: o.v[sName], Args: o.v[sArgs], IsError: o.is(fIsError), Sig: o.v[sSig]}
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
		if o.is(fContent) {
			p.Result = o.span
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

// readAnthropicSource reads a block's source into the block's record.
func readAnthropicSource(t *Translator, field loc) error {
	o, err := t.object(field, anthropicSource)
	if err != nil {
		return err
	}
	var src ir.Source
	switch string(o.v[sType]) {
	case "base64":
		if o.v[sMediaType] == nil || o.v[sData] == nil {
			return t.invalid(field, "a base64 source needs media_type and data")
		}
		src = ir.SrcBase64
	case "url":
		src = ir.SrcURL
	case "file":
		src = ir.SrcFile
	case "text":
		src = ir.SrcText
	default:
		return t.unsupported(field.at("type"), "the source type \""+string(o.v[sType])+"\"")
	}
	if o.v[sData] == nil {
		return t.invalid(field, "has no data, url or file_id")
	}
	b := t.rec()
	b.src, b.v[sMediaType], b.v[sData] = src, o.v[sMediaType], o.v[sData]
	return nil
}

func readAnthropicTool(t *Translator, f loc) error {
	o, err := t.object(f, anthropicTool)
	if err != nil {
		return err
	}
	kept, err := t.tool(anthropicToolKinds, o, f, "name")
	if kept {
		for _, k := range o.extra[:o.nExtra] {
			t.drop("tools[]." + string(k))
		}
	}
	return err
}

func readAnthropicChoice(t *Translator, f loc) error {
	o, err := t.object(f, anthropicChoice)
	if err != nil {
		return err
	}
	if o.is(fTrue) {
		t.req.Parallel = ir.False
	}
	typ := o.v[sType]
	mode, ok := anthropicWords[string(typ)]
	switch {
	case !ok:
		return t.invalid(f.at("type"), "unknown tool_choice type %q (use auto, any, tool or none)", typ)
	case mode == ir.ChoiceTool && o.v[sName] == nil:
		return t.invalid(f.at("name"), "is missing")
	case mode == ir.ChoiceTool:
		t.req.Choice = ir.ToolChoice{Mode: mode, Name: o.v[sName]}
	default:
		t.req.Choice.Mode = mode
	}
	return nil
}

func readAnthropicThinking(t *Translator, f loc) error {
	o, err := t.object(f, anthropicThinking)
	if err != nil {
		return err
	}
	rz := &t.req.Reasoning
	rz.Budget = o.n
	switch typ := o.v[sType]; string(typ) {
	case "enabled":
		if rz.Budget == 0 {
			return t.invalid(f.at("budget_tokens"), "is required when thinking is enabled")
		}
	case "adaptive":
		rz.Adaptive = true
	case "disabled":
		rz.Disabled, rz.Budget = true, 0
	default:
		return t.invalid(f.at("type"), "unknown thinking type %q (use enabled, adaptive or disabled)", typ)
	}
	return nil
}

func readAnthropicFormat(t *Translator, f loc) error {
	o, err := t.object(f, anthropicFormat)
	if err != nil {
		return err
	}
	typ := o.v[sType]
	if !ir.RSEquals(typ, "json_schema") {
		return t.invalid(f.at("type"), "unknown format type %q (use json_schema)", typ)
	}
	t.req.Format.Schema = o.v[sSchema]
	return t.formatType(typ, f)
}
