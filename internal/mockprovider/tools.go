package mockprovider

// Scripted tool loops: a behaviour with a ToolScript answers a user turn
// that offers the scripted tool with a call to it, and a request that
// carries that call's result with text quoting the result, on every
// endpoint, streaming or not. Agents' tool loops then run without a model.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/translate"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// ToolScript scripts one round of a tool loop.
type ToolScript struct {
	// Name is the tool to call. The script applies only to requests that
	// offer a tool of this name (function or custom).
	Name string `json:"name"`
	// Arguments are the call's arguments, a JSON object ({} when empty).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Reply is the answer once the request carries the call's result;
	// "{result}" stands for the result's text. Default:
	// "The tool said: {result}".
	Reply string `json:"reply,omitempty"`
}

// DefaultToolReply is ToolScript.Reply when empty.
const DefaultToolReply = "The tool said: {result}"

func (s *ToolScript) validate() error {
	if s.Name == "" {
		return fmt.Errorf("invalid behavior: tool.name is required")
	}
	if len(s.Arguments) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(s.Arguments, &obj); err != nil || obj == nil {
			return fmt.Errorf("invalid behavior: tool.arguments must be a JSON object")
		}
	}
	return nil
}

// compiledTool is a ToolScript with its wire pieces rendered.
type compiledTool struct {
	s       ToolScript
	nameRaw []byte   // the name as a JSON string's contents, for matching
	nameLit []byte   // JSON string literal of the name
	args    []byte   // compact arguments JSON text
	argsLit []byte   // the arguments as a JSON string literal (OpenAI)
	pieces  [][]byte // the arguments text cut into stream deltas, each a literal
}

func compileTool(s *ToolScript, chunks int) *compiledTool {
	if s == nil {
		return nil
	}
	ct := &compiledTool{s: *s}
	ct.nameLit = jsonString(s.Name)
	ct.nameRaw = ct.nameLit[1 : len(ct.nameLit)-1]
	var buf bytes.Buffer
	if len(s.Arguments) == 0 || json.Compact(&buf, s.Arguments) != nil {
		buf.Reset()
		buf.WriteString("{}")
	}
	ct.args = buf.Bytes()
	ct.argsLit = jsonString(string(ct.args))
	text := string(ct.args)
	n := min(max(chunks, 1), utf8.RuneCountInString(text))
	runes := []rune(text)
	for i := range n {
		ct.pieces = append(ct.pieces, jsonString(string(runes[i*len(runes)/n:(i+1)*len(runes)/n])))
	}
	return ct
}

// toolCall is the call a request is answered with.
type toolCall struct {
	ct *compiledTool
}

func (e endpoint) dialect() dialect.ID {
	switch e {
	case endpointMessages:
		return dialect.Messages
	case endpointResponses:
		return dialect.Responses
	}
	return dialect.Chat
}

// scriptTool decides how a scripted behaviour answers this request: with
// the tool call (q.r.tool), with the reply quoting the call's result (a
// behaviour whose text is that reply), or as usual.
func (q *request) scriptTool(body []byte) {
	ct := q.beh.tool
	d := q.ep.dialect()
	tr := translate.Get(d, d, translate.Options{})
	defer translate.Put(tr)
	if tr.Read(body) != nil {
		return
	}
	req := tr.IR()
	if len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != ir.RoleUser {
		return
	}
	// The ids of earlier calls to the tool; a result for one of them in
	// the last user turn means the loop is at its second step.
	var calls [][]byte
	for _, m := range req.Messages {
		for _, p := range req.Parts[m.Parts.Lo:m.Parts.Hi] {
			if p.Kind == ir.KindToolCall && bytes.Equal(p.Name, ct.nameRaw) {
				calls = append(calls, p.ID)
			}
		}
	}
	last := req.Messages[len(req.Messages)-1]
	results := false
	for _, p := range req.Parts[last.Parts.Lo:last.Parts.Hi] {
		if p.Kind != ir.KindToolResult {
			continue
		}
		results = true
		for _, id := range calls {
			if bytes.Equal(id, p.ID) {
				q.r.beh = q.beh.withText(strings.ReplaceAll(ct.s.reply(), "{result}", resultText(req, &p)))
				q.m.c.toolResults.Add(1)
				q.s.totals.toolResults.Add(1)
				return
			}
		}
	}
	if results {
		return // results of other tools: answer as usual
	}
	for _, tl := range req.Tools {
		if bytes.Equal(tl.Name, ct.nameRaw) {
			q.r.tool = &toolCall{ct: ct}
			q.m.c.toolCalls.Add(1)
			q.s.totals.toolCalls.Add(1)
			return
		}
	}
}

func (s *ToolScript) reply() string {
	if s.Reply == "" {
		return DefaultToolReply
	}
	return s.Reply
}

// resultText is the text of a tool result, its text parts joined.
func resultText(req *ir.Request, p *ir.Part) string {
	var out []byte
	for _, q := range req.ResultParts(p) {
		if q.Kind != ir.KindText {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out, _ = jsonscan.Unescape(out, q.Text)
	}
	return string(out)
}

// withText compiles a copy of the behaviour that answers text; only its
// rendering is used (counters and the failure count stay on c).
func (c *compiled) withText(text string) *compiled {
	b := c.b
	b.Text, b.Tool = text, nil
	return compile(b)
}

// Renderers of the tool call.

func (r *render) appendCallID(dst []byte, prefix string) []byte {
	dst = append(dst, '"')
	dst = append(dst, prefix...)
	dst = appendInt(dst, int64(r.n))
	return append(dst, '"')
}

// appendChatToolCalls renders the message's tool_calls member.
func (r *render) appendChatToolCalls(dst []byte) []byte {
	dst = append(dst, `"content":null,"refusal":null,"tool_calls":[{"id":`...)
	dst = r.appendCallID(dst, "call_mock_")
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = append(dst, r.tool.ct.nameLit...)
	dst = append(dst, `,"arguments":`...)
	dst = append(dst, r.tool.ct.argsLit...)
	return append(dst, `}}]`...)
}

// appendAnthropicToolUse renders the tool_use block (input {} while
// streaming, whole when final).
func (r *render) appendAnthropicToolUse(dst []byte, final bool) []byte {
	dst = append(dst, `{"type":"tool_use","id":`...)
	dst = r.appendCallID(dst, "toolu_mock_")
	dst = append(dst, `,"name":`...)
	dst = append(dst, r.tool.ct.nameLit...)
	dst = append(dst, `,"input":`...)
	if final {
		dst = append(dst, r.tool.ct.args...)
	} else {
		dst = append(dst, `{}`...)
	}
	return append(dst, '}')
}

// appendRespToolItem renders the function_call output item.
func (r *render) appendRespToolItem(dst []byte, done bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = r.appendCallID(dst, "fc_mock_")
	dst = append(dst, `,"type":"function_call","status":`...)
	if done {
		dst = append(dst, `"completed"`...)
	} else {
		dst = append(dst, `"in_progress"`...)
	}
	dst = append(dst, `,"call_id":`...)
	dst = r.appendCallID(dst, "call_mock_")
	dst = append(dst, `,"name":`...)
	dst = append(dst, r.tool.ct.nameLit...)
	dst = append(dst, `,"arguments":`...)
	if done {
		dst = append(dst, r.tool.ct.argsLit...)
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, '}')
}

// toolStream renders the stream of a tool call for the endpoint; the
// argument deltas are its content events, so fault injection cuts it
// as it cuts text.
func (r *render) toolStream(ep endpoint) *streamPlan {
	switch ep {
	case endpointMessages:
		return r.toolMessagesStream()
	case endpointResponses:
		return r.toolResponsesStream()
	}
	return r.toolChatStream()
}

func (r *render) toolChatStream() *streamPlan {
	ct := r.tool.ct
	b := &planBuilder{buf: make([]byte, 0, 1024+len(ct.pieces)*256)}
	r.chatChunk(b)
	b.buf = append(b.buf, `[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":`...)
	b.buf = r.appendCallID(b.buf, "call_mock_")
	b.buf = append(b.buf, `,"type":"function","function":{"name":`...)
	b.buf = append(b.buf, ct.nameLit...)
	b.buf = append(b.buf, `,"arguments":""}}]},"finish_reason":null,"logprobs":null}]`...)
	r.chatChunkEnd(b)
	for _, piece := range ct.pieces {
		r.chatChunk(b)
		b.buf = append(b.buf, `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
		b.buf = append(b.buf, piece...)
		b.buf = append(b.buf, `}}]},"finish_reason":null,"logprobs":null}]`...)
		r.chatChunkEnd(b)
	}
	r.chatClose(b, "tool_calls")
	return &streamPlan{frames: b.frames(), contentStart: 1, contentCount: len(ct.pieces), errFrame: chatErrFrame(r.beh.b.Fail)}
}

func (r *render) toolMessagesStream() *streamPlan {
	ct := r.tool.ct
	b := &planBuilder{buf: make([]byte, 0, 1024+len(ct.pieces)*192)}
	r.messagesOpen(b)
	b.sseEvent("content_block_start")
	b.buf = append(b.buf, `{"type":"content_block_start","index":0,"content_block":`...)
	b.buf = r.appendAnthropicToolUse(b.buf, false)
	b.buf = append(b.buf, '}')
	b.closeFrame()
	for _, piece := range ct.pieces {
		messagesDelta(b, `{"type":"input_json_delta","partial_json":`, piece)
	}
	r.messagesClose(b, "tool_use")
	return &streamPlan{frames: b.frames(), contentStart: 2, contentCount: len(ct.pieces), errFrame: anthropicErrFrame(r.beh.b.Fail)}
}

func (r *render) toolResponsesStream() *streamPlan {
	ct := r.tool.ct
	b := &planBuilder{buf: make([]byte, 0, 2048+len(ct.pieces)*192)}
	r.responsesOpen(b)
	r.respItemEvent(b, false)
	ref := func() {
		b.buf = append(b.buf, `,"item_id":`...)
		b.buf = r.appendCallID(b.buf, "fc_mock_")
		b.buf = append(b.buf, `,"output_index":0`...)
	}
	for _, piece := range ct.pieces {
		respEvent(b, "response.function_call_arguments.delta")
		ref()
		b.buf = append(b.buf, `,"delta":`...)
		b.buf = append(b.buf, piece...)
		b.buf = append(b.buf, '}')
		b.closeFrame()
	}
	respEvent(b, "response.function_call_arguments.done")
	ref()
	b.buf = append(b.buf, `,"name":`...)
	b.buf = append(b.buf, ct.nameLit...)
	b.buf = append(b.buf, `,"arguments":`...)
	b.buf = append(b.buf, ct.argsLit...)
	b.buf = append(b.buf, '}')
	b.closeFrame()
	r.respItemEvent(b, true)
	r.responsesClose(b)
	return &streamPlan{frames: b.frames(), contentStart: 3, contentCount: len(ct.pieces), errFrame: responsesErrFrame(r.beh.b.Fail)}
}
