package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// readResponses reads an OpenAI Responses request into the IR. The whole
// transcript must be in input (store: false, as coding agents send it);
// previous_response_id needs the provider's stored state and is refused.
func (t *Translator) readResponses() error {
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
		case "input":
			err = t.respInput()
		case "instructions":
			var s []byte
			if s, err = t.readRS(at("instructions")); err == nil {
				// Instructions come before any system item of the input.
				r.System = append(r.System, ir.Part{})
				copy(r.System[1:], r.System)
				r.System[0] = ir.Part{Kind: ir.KindText, Text: s}
			}
		case "tools":
			err = t.respTools()
		case "tool_choice":
			err = t.respToolChoice()
		case "parallel_tool_calls":
			r.Parallel = t.readTri()
		case "max_output_tokens":
			r.MaxTokens, err = t.readInt(at("max_output_tokens"))
		case "temperature":
			r.Temperature, err = t.readNumber(at("temperature"))
		case "top_p":
			r.TopP, err = t.readNumber(at("top_p"))
		case "stream":
			r.Stream = t.readTri() == ir.True
		case "include":
			err = t.respInclude()
		case "reasoning":
			err = t.respReasoning()
		case "text":
			err = t.respText()
		case "prompt_cache_key":
			r.PromptCacheKey, err = t.readRS(at("prompt_cache_key"))
		case "metadata":
			r.Metadata, err = t.readObjectRaw(at("metadata"))
		case "user":
			r.User, err = t.readRS(at("user"))
		case "safety_identifier":
			r.SafetyID, err = t.readRS(at("safety_identifier"))
		case "service_tier":
			r.ServiceTier, err = t.readRS(at("service_tier"))
		case "store":
			if t.readTri() == ir.True {
				t.drop("store")
			}
		case "previous_response_id", "conversation":
			c.Skip()
			err = t.refuse(CodePreviousResponse, loc{}.atKey(k),
				"continuing a stored response needs a Responses API upstream, and this model's upstream speaks %s; send the whole conversation in input with store: false instead", t.to)
		case "background", "prompt":
			c.Skip()
			err = t.unsupported(loc{}.atKey(k), string(k))
		default:
			// truncation, max_tool_calls, top_logprobs, stream_options and
			// newer fields.
			c.Skip()
			t.drop(string(k))
		}
		if err != nil {
			return err
		}
	}
	return c.Err()
}

func (t *Translator) respInclude() error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(at("include"), "must be an array")
	}
	for c.Next() {
		s := ir.StrRS(c)
		switch {
		case s == nil:
			c.Skip()
		case ir.RSEquals(s, "reasoning.encrypted_content"):
			t.req.WantEncrypted = true
		default:
			t.drop("include")
		}
	}
	return nil
}

func (t *Translator) respReasoning() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("reasoning"), "must be an object")
	}
	rz := &t.req.Reasoning
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "effort":
			err = t.readEffort(at("reasoning.effort"), ir.EffortNone, ir.EffortXHigh)
		case "summary", "generate_summary":
			rz.Summary, err = t.readRS(at("reasoning").atKey(k))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Translator) respText() error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(at("text"), "must be an object")
	}
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "format":
			var typ []byte
			if err = t.schemaBody(&t.req.Format, at("text.format"), &typ); err == nil {
				err = t.formatType(typ, at("text.format.type"))
			}
		case "verbosity":
			t.req.Verbosity, err = t.readRS(at("text.verbosity"))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Translator) respInput() error {
	c := &t.cur
	r := &t.req
	if s := ir.StrRS(c); s != nil {
		lo := int32(len(r.Parts))
		r.Add(ir.Part{Kind: ir.KindText, Text: s})
		r.Push(ir.RoleUser, lo)
		return nil
	}
	if !c.Array() {
		return t.invalid(at("input"), "must be a string or an array of items")
	}
	for i := 0; c.Next(); i++ {
		if err := t.respItem(i); err != nil {
			return err
		}
	}
	return nil
}

// respItem reads one input item. Members come in any order, so the
// candidates are collected and the type (or, for a message without one,
// the role) decides at the end.
func (t *Translator) respItem(i int) error {
	c := &t.cur
	r := &t.req
	field := at("input").index(i)
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	lo := int32(len(r.Parts))
	var typ, role, callID, name, args, id, enc []byte
	var summary []byte
	hasContent, hasOutput, hasArgs := false, false, false
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(field.at("type"))
		case "role":
			role, err = t.readRS(field.at("role"))
		case "content":
			hasContent = true
			err = t.respContent(field.at("content"))
		case "call_id":
			callID, err = t.readRS(field.at("call_id"))
		case "name":
			name, err = t.readRS(field.at("name"))
		case "arguments", "input":
			hasArgs = true
			args, err = t.readRS(field.atKey(k))
		case "output":
			hasOutput = true
			if s := ir.StrRS(c); s != nil {
				r.Add(ir.Part{Kind: ir.KindText, Text: s})
			} else {
				err = t.respContent(field.at("output"))
			}
		case "id":
			id, err = t.readRS(field.at("id"))
		case "summary":
			summary, err = t.respSummary(field.at("summary"))
		case "encrypted_content":
			enc, err = t.readRS(field.at("encrypted_content"))
		case "tools":
			// An additional_tools item (Codex sends its tools so): they
			// join the request's tools.
			err = t.respToolList(field.at("tools"))
		default:
			c.Skip() // status, annotations, …
		}
		if err != nil {
			return err
		}
	}
	if typ == nil && role != nil {
		typ = []byte("message")
	}
	switch string(typ) {
	case "message":
		if !hasContent {
			return t.invalid(field.at("content"), "is missing")
		}
		switch string(role) {
		case "user":
			r.Push(ir.RoleUser, lo)
		case "assistant":
			r.Push(ir.RoleAssistant, lo)
		case "system", "developer":
			for _, p := range r.Parts[lo:] {
				if p.Kind != ir.KindText {
					return t.invalid(field.at("content"), "a %s message may hold only text", role)
				}
				r.System = append(r.System, p)
			}
			r.Parts = r.Parts[:lo]
		default:
			return t.invalid(field.at("role"), "unknown role %q (use user, assistant, system or developer)", role)
		}
	case "function_call", "custom_tool_call":
		if callID == nil || name == nil || !hasArgs {
			return t.invalid(field, "a %s needs call_id, name and its arguments", typ)
		}
		r.Parts = r.Parts[:lo]
		r.Add(ir.Part{Kind: ir.KindToolCall, ID: callID, Name: name, Args: args, ArgsEscaped: true, Custom: typ[0] == 'c'})
		r.Push(ir.RoleAssistant, lo)
	case "function_call_output", "custom_tool_call_output":
		if callID == nil || !hasOutput {
			return t.invalid(field, "a %s needs call_id and output", typ)
		}
		r.Add(ir.Part{Kind: ir.KindToolResult, ID: callID, Custom: typ[0] == 'c', Result: r.MoveInner(lo)})
		r.Push(ir.RoleUser, lo)
	case "reasoning":
		p := ir.Part{Kind: ir.KindReasoning, Text: summary, ID: id, Sig: enc, Origin: dialect.Responses}
		switch {
		case bytes.HasPrefix(enc, []byte(ir.EnvMessages)):
			p.Origin, p.ID, p.Sig = dialect.Messages, nil, enc[len(ir.EnvMessages):]
		case bytes.HasPrefix(enc, []byte(ir.EnvRedacted)):
			p.Origin, p.ID, p.Sig, p.Redacted = dialect.Messages, nil, enc[len(ir.EnvRedacted):], true
		}
		r.Parts = r.Parts[:lo] // reasoning_text content: the summary stands for it
		r.Add(p)
		r.Push(ir.RoleAssistant, lo)
	case "additional_tools":
		r.Parts = r.Parts[:lo]
	case "item_reference":
		return t.refuse(CodePreviousResponse, field.at("type"),
			"an item_reference needs the provider's stored items, and this model's upstream speaks %s; send the item itself", t.to)
	default:
		return t.unsupported(field.at("type"), "the input item type \""+string(typ)+"\"")
	}
	return nil
}

// respSummary joins a reasoning item's summary texts with blank lines.
func (t *Translator) respSummary(field loc) ([]byte, error) {
	c := &t.cur
	if !c.Array() {
		return nil, t.invalid(field, "must be an array")
	}
	start := len(t.arena)
	n := 0
	for j := 0; c.Next(); j++ {
		if !c.Object() {
			return nil, t.invalid(field.index(j), "must be an object")
		}
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if string(k) != "text" {
				c.Skip()
				continue
			}
			s, err := t.readRS(field.index(j).at("text"))
			if err != nil {
				return nil, err
			}
			if n > 0 {
				t.arena = append(t.arena, `\n\n`...)
			}
			t.arena = append(t.arena, s...)
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return t.arena[start:len(t.arena):len(t.arena)], nil
}

// respContent reads message content or a tool output: a string or an
// array of input/output parts.
func (t *Translator) respContent(field loc) error {
	return t.contentList(field, (*Translator).respPart)
}

func (t *Translator) respPart(field loc) error {
	c := &t.cur
	if !c.Object() {
		return t.invalid(field, "must be an object")
	}
	var typ, text, url, fileID, fileData, fileURL, filename, detail []byte
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if c.Null() {
			continue
		}
		var err error
		switch string(k) {
		case "type":
			typ, err = t.readRS(field.at("type"))
		case "text", "refusal":
			text, err = t.readRS(field.atKey(k))
		case "image_url":
			url, err = t.readRS(field.at("image_url"))
		case "file_id":
			fileID, err = t.readRS(field.at("file_id"))
		case "file_data":
			fileData, err = t.readRS(field.at("file_data"))
		case "file_url":
			fileURL, err = t.readRS(field.at("file_url"))
		case "filename":
			filename, err = t.readRS(field.at("filename"))
		case "detail":
			detail, err = t.readRS(field.at("detail"))
		default:
			c.Skip()
		}
		if err != nil {
			return err
		}
	}
	switch string(typ) {
	case "input_text", "output_text", "refusal", "summary_text", "reasoning_text":
		if text == nil {
			return t.invalid(field.at("text"), "is missing")
		}
		t.req.Add(ir.Part{Kind: ir.KindText, Text: text})
	case "input_image":
		p := ir.Part{Kind: ir.KindImage, Detail: detail}
		switch {
		case url != nil:
			if err := t.mediaFromURL(&p, url, field.at("image_url")); err != nil {
				return err
			}
		case fileID != nil:
			p.Src, p.Data = ir.SrcFile, fileID
		default:
			return t.invalid(field, "an input_image needs image_url or file_id")
		}
		t.req.Add(p)
	case "input_file":
		p := ir.Part{Kind: ir.KindDocument, Filename: filename}
		switch {
		case fileData != nil:
			if err := t.mediaFromURL(&p, fileData, field.at("file_data")); err != nil {
				return err
			}
			if p.Src != ir.SrcBase64 {
				return t.invalid(field.at("file_data"), "must be a base64 data URL")
			}
		case fileURL != nil:
			p.Src, p.Data = ir.SrcURL, fileURL
		case fileID != nil:
			p.Src, p.Data = ir.SrcFile, fileID
		default:
			return t.invalid(field, "an input_file needs file_data, file_url or file_id")
		}
		t.req.Add(p)
	case "input_audio":
		return t.unsupported(field.at("type"), "audio input")
	default:
		return t.invalid(field.at("type"), "unknown content part type %q", typ)
	}
	return nil
}

func (t *Translator) respTools() error { return t.respToolList(at("tools")) }

// respToolList reads an array of tool definitions: the request's tools,
// an additional_tools item's, or a namespace's members. A namespace
// (Codex groups its tools in them) is flattened: its members become
// tools of their own name, since no other dialect has namespaces and
// calls name the tool alone.
func (t *Translator) respToolList(field loc) error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(field, "must be an array")
	}
	for i := 0; c.Next(); i++ {
		f := field.index(i)
		var typ []byte
		var tl ir.Tool
		before := len(t.req.Tools)
		if err := t.toolBody(&tl, f, &typ); err != nil {
			return err
		}
		if string(typ) == "namespace" {
			continue
		}
		if len(t.req.Tools) != before {
			return t.invalid(f.at("tools"), "is allowed only in a tool of type namespace")
		}
		switch string(typ) {
		case "function":
			tl.Kind = ir.ToolFunction
		case "custom":
			tl.Kind = ir.ToolCustom
		default:
			// Hosted tools (web_search, file_search, code_interpreter,
			// computer use, MCP, image generation, local shell): only an
			// OpenAI upstream runs them.
			t.drop("tools[].type=" + string(typ))
			continue
		}
		if tl.Name == nil {
			return t.invalid(f.at("name"), "is missing")
		}
		t.req.Tools = append(t.req.Tools, tl)
	}
	return nil
}

func (t *Translator) respToolChoice() error {
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
		case "name":
			name, err = t.readRS(at("tool_choice.name"))
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
