package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// The OpenAI Responses request, as tables (see read.go). The whole
// transcript must be in input (store: false, as coding agents send it);
// previous_response_id needs the provider's stored state and is refused.

var respRoles = newRoles("user", "user", "assistant", "assistant", "system", "system", "developer", "system")

var respText = partType{kind: ir.KindText, missing: "is missing", missingAt: "text"}

var respParts = &partTypes{
	types: map[string]partType{
		"input_text": respText, "output_text": respText, "refusal": respText, "summary_text": respText, "reasoning_text": respText,
		"input_image": {kind: ir.KindImage, from: []slot{sURL, sFileID}, missing: "an input_image needs image_url or file_id"},
		"input_file":  {kind: ir.KindDocument, from: []slot{sFileData, sFileURL, sFileID}, missing: "an input_file needs file_data, file_url or file_id"},
		"input_audio": {what: "audio input"},
	},
	paths: [nValues]string{sURL: "image_url", sFileData: "file_data"},
}

// respToolKinds: hosted tools (web_search, file_search, code_interpreter,
// computer use, MCP, image generation, local shell) only an OpenAI
// upstream runs, and are dropped.
var respToolKinds = toolKinds{"function": ir.ToolFunction, "custom": ir.ToolCustom, "namespace": namespaceTool}

var respRequest, respItem, respPart, respTool, respChoice, respReasoning, respTextOptions, respFormat *table

func init() {
	respPart = newTable(true, nil, entries{
		"type":         str(sType),
		"text refusal": str(sText),
		"image_url":    str(sURL),
		"file_id":      str(sFileID),
		"file_data":    str(sFileData),
		"file_url":     str(sFileURL),
		"filename":     str(sFilename),
		"detail":       str(sDetail),
	})
	respItem = newTable(true, nil, entries{
		"type":              str(sType),
		"role":              str(sRole),
		"content":           {kind: vFn, fn: readRespContent, slot: fContent},
		"output":            {kind: vFn, fn: readRespContent, slot: fOutput},
		"call_id":           str(sCallID),
		"name":              str(sName),
		"arguments input":   str(sArgs),
		"id":                str(sID),
		"summary":           fn(readRespSummary),
		"encrypted_content": str(sEnc),
		// An additional_tools item (Codex sends its tools so): they join
		// the request's tools.
		"tools": fn(respToolList),
	})
	respTool = newTable(true, nil, toolBody, entries{
		"type": str(sType),
		// A namespace's member tools (Codex groups its tools in them).
		"tools": fn(respToolList),
	})
	respChoice = newTable(false, nil, entries{"type": str(sType), "name": str(sName)})
	respReasoning = newTable(true, nil, entries{
		"effort":                   openAIEffort,
		"summary generate_summary": strInto(func(r *ir.Request) *[]byte { return &r.Reasoning.Summary }),
	})
	respFormat = newTable(true, nil, schemaBody, entries{"type": str(sType)})
	respTextOptions = newTable(true, nil, entries{
		"format": fn(func(t *Translator, f loc) error {
			o, err := t.object(f, respFormat)
			if err != nil {
				return err
			}
			return t.format(o, o.v[sType], f.at("type"))
		}),
		"verbosity": strInto(func(r *ir.Request) *[]byte { return &r.Verbosity }),
	})
	// truncation, max_tool_calls, top_logprobs, stream_options and newer
	// fields are dropped.
	respRequest = newTable(true, dropKey, sharedRequest, openAIRequest, entries{
		"input":             fn(readRespInput),
		"instructions":      fn(readInstructions),
		"tools":             fn(respToolList),
		"tool_choice":       fn(func(t *Translator, f loc) error { return t.openAIToolChoice(f, respChoice) }),
		"max_output_tokens": fn(readMaxTokens),
		"include":           fn(readRespInclude),
		"reasoning":         nested(respReasoning),
		"text":              nested(respTextOptions),
		"previous_response_id conversation": fn(func(t *Translator, f loc) error {
			t.cur.Skip()
			return t.refuse(CodePreviousResponse, f,
				"continuing a stored response needs a Responses API upstream, and this model's upstream speaks %s; send the whole conversation in input with store: false instead", t.to)
		}),
		"background": refuse("background"),
		"prompt":     refuse("prompt"),
	})
}

// readInstructions puts the instructions before any system item of the
// input.
func readInstructions(t *Translator, f loc) error {
	s, err := t.readRS(f)
	if err != nil {
		return err
	}
	r := &t.req
	r.System = append(r.System, ir.Part{})
	copy(r.System[1:], r.System)
	r.System[0] = ir.Part{Kind: ir.KindText, Text: s}
	return nil
}

func readRespInclude(t *Translator, f loc) error {
	return t.each(f, func(t *Translator, _ loc) error {
		s := ir.StrRS(&t.cur)
		switch {
		case s == nil:
			t.cur.Skip()
		case ir.RSEquals(s, "reasoning.encrypted_content"):
			t.req.WantEncrypted = true
		default:
			t.drop("include")
		}
		return nil
	})
}

func readRespInput(t *Translator, f loc) error {
	r := &t.req
	if s := ir.StrRS(&t.cur); s != nil {
		lo := int32(len(r.Parts))
		r.Add(ir.Part{Kind: ir.KindText, Text: s})
		r.Push(ir.RoleUser, lo)
		return nil
	}
	if t.cur.Peek() != '[' {
		return t.invalid(f, "must be a string or an array of items")
	}
	return t.each(f, readRespItem)
}

// readRespItem reads one input item. Members come in any order, so the
// type (or, for a message without one, the role) decides at the end.
func readRespItem(t *Translator, field loc) error {
	r := &t.req
	lo := int32(len(r.Parts))
	o, err := t.object(field, respItem)
	if err != nil {
		return err
	}
	typ := o.v[sType]
	if typ == nil && o.v[sRole] != nil {
		typ = []byte("message")
	}
	callID := o.v[sCallID]
	switch string(typ) {
	case "message":
		if !o.is(fContent) {
			return t.invalid(field.at("content"), "is missing")
		}
		return t.place(respRoles, o.v[sRole], lo, field, nil)
	case "function_call", "custom_tool_call":
		if callID == nil || o.v[sName] == nil || o.v[sArgs] == nil {
			return t.invalid(field, "a %s needs call_id, name and its arguments", typ)
		}
		r.Parts = r.Parts[:lo]
		r.Add(ir.Part{Kind: ir.KindToolCall, ID: callID, Name: o.v[sName], Args: o.v[sArgs], ArgsEscaped: true, Custom: typ[0] == 'c'})
		r.Push(ir.RoleAssistant, lo)
	case "function_call_output", "custom_tool_call_output":
		if callID == nil || !o.is(fOutput) {
			return t.invalid(field, "a %s needs call_id and output", typ)
		}
		r.Add(ir.Part{Kind: ir.KindToolResult, ID: callID, Custom: typ[0] == 'c', Result: r.MoveInner(lo)})
		r.Push(ir.RoleUser, lo)
	case "reasoning":
		enc := o.v[sEnc]
		p := ir.Part{Kind: ir.KindReasoning, Text: o.v[sSummary], ID: o.v[sID], Sig: enc, Origin: dialect.Responses}
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

// readRespSummary joins a reasoning item's summary texts with blank lines
// into the item's record.
func readRespSummary(t *Translator, field loc) error {
	o := t.rec()
	start := len(t.arena)
	n := 0
	err := t.each(field, func(t *Translator, f loc) error {
		c := &t.cur
		if !c.Object() {
			return t.invalid(f, "must be an object")
		}
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if string(k) != "text" {
				c.Skip()
				continue
			}
			s, err := t.readRS(f.at("text"))
			if err != nil {
				return err
			}
			if n > 0 {
				t.arena = append(t.arena, `\n\n`...)
			}
			t.arena = append(t.arena, s...)
			n++
		}
		return nil
	})
	if n > 0 {
		o.v[sSummary] = t.arena[start:len(t.arena):len(t.arena)]
	}
	return err
}

// readRespContent reads message content or a tool output: a string or an
// array of input/output parts.
func readRespContent(t *Translator, f loc) error { return t.contentList(f, readRespPart) }

func readRespPart(t *Translator, field loc) error {
	o, err := t.object(field, respPart)
	if err != nil {
		return err
	}
	return t.openAIPart(respParts, o, field)
}

// respToolList reads an array of tool definitions: the request's tools,
// an additional_tools item's, or a namespace's members. A namespace is
// flattened: its members become tools of their own name, since no other
// dialect has namespaces and calls name the tool alone.
func respToolList(t *Translator, field loc) error { return t.each(field, readRespTool) }

func readRespTool(t *Translator, f loc) error {
	before := len(t.req.Tools)
	o, err := t.object(f, respTool)
	if err != nil {
		return err
	}
	if string(o.v[sType]) != "namespace" && len(t.req.Tools) != before {
		return t.invalid(f.at("tools"), "is allowed only in a tool of type namespace")
	}
	_, err = t.tool(respToolKinds, o, f, "name")
	return err
}
