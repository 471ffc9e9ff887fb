package translate

import (
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// The OpenAI Chat Completions request, as tables (see read.go).

var chatRoles = newRoles("system", "system", "developer", "system", "user", "user", "assistant", "assistant", "tool", "tool")

var chatParts = &partTypes{
	types: map[string]partType{
		"text":        {kind: ir.KindText},
		"refusal":     {kind: ir.KindText},
		"image_url":   {kind: ir.KindImage, from: []slot{sURL}, missing: "is missing", missingAt: "image_url.url"},
		"file":        {kind: ir.KindDocument, from: []slot{sFileData, sFileID}, missing: "needs file_data or file_id", missingAt: "file"},
		"input_audio": {what: "audio input"},
	},
	paths: [nValues]string{sURL: "image_url.url", sFileData: "file.file_data"},
}

var chatToolKinds = toolKinds{"function": ir.ToolFunction, "": ir.ToolFunction, "custom": ir.ToolCustom}

var chatRequest, chatMessage, chatPart, chatImageURL, chatToolCall, chatTool, chatChoice, chatFormat, chatStreamOptions *table

func init() {
	chatImageURL = newTable(false, nil, entries{"url": str(sURL), "detail": {kind: vStrOrSkip, slot: sDetail}})
	chatPart = newTable(false, nil, entries{
		"type":          str(sType),
		"text refusal":  str(sText),
		"image_url":     fn(readChatImageURL),
		"file":          sub(newTable(false, nil, entries{"file_data": str(sFileData), "file_id": str(sFileID), "filename": str(sFilename)})),
		"cache_control": raw(sCache), // an extension some OpenAI-compatible hosts take
	})
	callFn := newTable(false, nil, entries{"name": str(sName), "arguments input": {kind: vStr, slot: sArgs, path: "arguments"}})
	chatToolCall = newTable(false, nil, entries{
		"id":       str(sID),
		"type":     str(sType),
		"function": sub(callFn),
		"custom":   {kind: vSub, sub: callFn, slot: fCustom},
	})
	chatMessage = newTable(true, dropUnder("messages."), entries{
		"role":         str(sRole),
		"content":      fn(func(t *Translator, f loc) error { return t.contentList(f, readChatPart) }),
		"tool_calls":   fn(func(t *Translator, f loc) error { return t.each(f, readChatToolCall) }),
		"tool_call_id": str(sCallID),
		"refusal": fn(func(t *Translator, f loc) error {
			s, err := t.readRS(f)
			t.req.Add(ir.Part{Kind: ir.KindText, Text: s})
			return err
		}),
		// reasoning in history: no other dialect can take it back
		"reasoning_content reasoning": drop("messages.reasoning_content"),
		"name":                        drop("messages.name"),
	})
	chatTool = newTable(false, nil, entries{
		"type":            str(sType),
		"function custom": sub(newTable(true, nil, toolBody)),
		"cache_control":   raw(sCache),
	})
	chatChoice = newTable(false, nil, entries{"type": str(sType), "function custom": sub(newTable(false, nil, entries{"name": str(sName)}))})
	chatFormat = newTable(false, nil, entries{"type": str(sType), "json_schema": sub(newTable(true, nil, schemaBody))})
	chatStreamOptions = newTable(false, nil, entries{"include_usage": flag(fTrue)})

	// seed, frequency/presence penalties, logit_bias, top_logprobs,
	// prediction, web_search_options and fields newer than this converter
	// (sampling hints or features the upstream lacks) are dropped.
	chatRequest = newTable(true, dropKey, sharedRequest, openAIRequest, entries{
		"messages":                         fn(func(t *Translator, f loc) error { return t.each(f, readChatMessage) }),
		"tools":                            fn(func(t *Translator, f loc) error { return t.each(f, readChatTool) }),
		"tool_choice":                      fn(func(t *Translator, f loc) error { return t.openAIToolChoice(f, chatChoice) }),
		"max_tokens max_completion_tokens": fn(readMaxTokens),
		"top_k":                            numInto(func(r *ir.Request) *[]byte { return &r.TopK }),
		"stop":                             fn((*Translator).readStops),
		"stream_options": fn(func(t *Translator, f loc) error {
			o, err := t.object(f, chatStreamOptions)
			if err == nil {
				t.req.IncludeUsage = o.is(fTrue)
			}
			return err
		}),
		"n": fn(func(t *Translator, f loc) error {
			n, err := t.readInt(f)
			if err == nil && n > 1 && t.to != dialect.Chat {
				err = t.unsupported(f, "more than one choice (n > 1)")
			}
			return err
		}),
		"response_format": fn(func(t *Translator, f loc) error {
			o, err := t.object(f, chatFormat)
			if err != nil {
				return err
			}
			return t.format(o, o.v[sType], f.at("type"))
		}),
		"reasoning_effort": openAIEffort,
		"verbosity":        strInto(func(r *ir.Request) *[]byte { return &r.Verbosity }),
		"logprobs": fn(func(t *Translator, f loc) error {
			if t.readTri() == ir.True {
				return t.unsupported(f, "logprobs")
			}
			return nil
		}),
		"audio":                   refuse("audio output"),
		"modalities":              fn(readChatModalities),
		"functions function_call": refuse("the legacy functions API (use tools and tool_choice)"),
	})
}

// readChatMessage reads one message. Its content is read before its role
// may be known (members come in any order) and placed afterwards: system
// and developer text goes to the system prompt, a tool message becomes a
// tool result in a user turn.
func readChatMessage(t *Translator, field loc) error {
	lo := int32(len(t.req.Parts))
	o, err := t.object(field, chatMessage)
	if err != nil {
		return err
	}
	return t.place(chatRoles, o.v[sRole], lo, field, o.v[sCallID])
}

func readChatPart(t *Translator, field loc) error {
	o, err := t.object(field, chatPart)
	if err != nil {
		return err
	}
	return t.openAIPart(chatParts, o, field)
}

// readChatImageURL reads image_url: an object with url and detail, or
// the URL itself, as some clients send it.
func readChatImageURL(t *Translator, field loc) error {
	if s := ir.StrRS(&t.cur); s != nil {
		t.rec().v[sURL] = s
		return nil
	}
	if t.cur.Peek() != '{' {
		return t.invalid(field, "must be an object with url")
	}
	return t.subObject(field, chatImageURL)
}

func readChatToolCall(t *Translator, f loc) error {
	o, err := t.object(f, chatToolCall)
	if err != nil {
		return err
	}
	if typ := o.v[sType]; typ != nil && !ir.RSEquals(typ, "function") && !ir.RSEquals(typ, "custom") {
		return t.invalid(f.at("type"), "unknown tool call type %q", typ)
	}
	p := ir.Part{Kind: ir.KindToolCall, ArgsEscaped: true, ID: o.v[sID], Name: o.v[sName], Args: o.v[sArgs], Custom: o.is(fCustom)}
	if p.ID == nil || p.Name == nil {
		return t.invalid(f, "a tool call needs id and function.name")
	}
	if p.Args == nil {
		p.Args = p.Name[:0] // empty arguments
	}
	t.req.Add(p)
	return nil
}

func readChatTool(t *Translator, f loc) error {
	o, err := t.object(f, chatTool)
	if err != nil {
		return err
	}
	_, err = t.tool(chatToolKinds, o, f, "function.name")
	return err
}

func readChatModalities(t *Translator, f loc) error {
	return t.each(f, func(t *Translator, _ loc) error {
		if s := ir.StrRS(&t.cur); ir.RSEquals(s, "audio") {
			return t.unsupported(at("modalities"), "audio output")
		} else if s == nil {
			t.cur.Skip()
		}
		return nil
	})
}
