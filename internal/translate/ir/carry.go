package ir

import "github.com/omniroute/gateway/internal/jsonscan"

// What the request writers and the answer writers both write: values one
// dialect's state rides in when another dialect has no place for it, and
// the shapes both directions share.

// Reasoning state crosses dialects inside the caller's own opaque field,
// tagged with the dialect that made it, so it comes back to the provider
// that can read it: an OpenAI encrypted reasoning item rides in an
// Anthropic thinking signature, an Anthropic signature in a Responses
// encrypted_content. Untagged state belongs to the caller's own dialect.
const (
	EnvResponses = "omniroute.v1.responses:"         // + item id + ":" + encrypted_content
	EnvMessages  = "omniroute.v1.messages:"          // + thinking signature
	EnvRedacted  = "omniroute.v1.messages-redacted:" // + redacted_thinking data
)

// CustomArgs appends to dst the JSON text of a custom tool call's
// free-form input (raw string args) as the arguments of the function an
// upstream without custom tools sees: {"input": <text>}.
func CustomArgs(dst, args []byte) []byte {
	dst = append(dst, `{"input":"`...)
	dst = append(dst, args...)
	return append(dst, `"}`...)
}

// ArgsString writes a tool call's arguments as an OpenAI arguments
// string; tmp is scratch, returned for reuse.
func ArgsString(w *Writer, p *Part, tmp []byte) []byte {
	switch {
	case p.Custom:
		tmp = CustomArgs(tmp[:0], p.Args)
		w.StrBytes(tmp)
	case p.ArgsEscaped:
		w.RS(p.Args)
	default:
		w.StrBytes(p.Args)
	}
	return tmp
}

// IsObject reports whether text is exactly one valid JSON object.
func IsObject(text []byte) bool {
	var c jsonscan.Cursor
	c.Reset(text)
	if c.Peek() != '{' {
		return false
	}
	c.Skip()
	return c.End() == nil
}

// JoinText writes the text of parts as one string, blank lines between.
func JoinText(w *Writer, parts []Part) {
	w.Sep()
	w.B = append(w.B, '"')
	n := 0
	for i := range parts {
		if parts[i].Kind != KindText {
			continue
		}
		if n > 0 {
			w.B = append(w.B, `\n\n`...)
		}
		w.B = append(w.B, parts[i].Text...)
		n++
	}
	w.B = append(w.B, '"')
	w.Comma = true
}

// Summary writes a Responses reasoning item's summary: one summary_text
// part holding text, or none.
func Summary(w *Writer, text []byte) {
	w.Key("summary")
	w.Arr()
	if len(text) > 0 {
		TextPart(w, `"summary_text"`, text)
	}
	w.End(']')
}

// ToolUseHead writes the head of an Anthropic tool_use block, its "type"
// key already written: the type, the id (ToolID), the name and the input
// key, whose value the caller writes. Requests and answers, whole and
// streamed, write the block through it, so its ids are mapped the same way
// everywhere.
func ToolUseHead(w *Writer, id, name []byte) {
	w.Lit(`"tool_use"`)
	w.Key("id")
	ToolID(w, id)
	w.Key("name")
	w.RS(name)
	w.Key("input")
}

// ToolID writes a tool call id with every byte Anthropic's id pattern
// (^[a-zA-Z0-9_-]+$) refuses replaced by '_'. Some OpenAI-compatible
// servers make ids such as "functions.get_weather:0"; the same mapping on
// the call and its result keeps them paired.
func ToolID(w *Writer, id []byte) {
	w.Sep()
	w.B = append(w.B, '"')
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		w.B = append(w.B, c)
	}
	if len(id) == 0 {
		w.B = append(w.B, '_')
	}
	w.B = append(w.B, '"')
	w.Comma = true
}

// AppendUint appends n in decimal without allocating.
func AppendUint(b []byte, n int) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// ChatCall writes a chat tool call: index (≥ 0: a chunk's tool_calls
// entry, -1: none), id, and the name of its function or (custom) custom
// tool; args writes the arguments string (or the custom input).
func ChatCall(w *Writer, index int, id, name []byte, custom bool, args func()) {
	w.Obj()
	if index >= 0 {
		w.Key("index")
		w.Int(int64(index))
	}
	w.Key("id")
	w.RS(id)
	w.Key("type")
	if custom {
		w.Lit(`"custom"`)
		w.Key("custom")
		w.Obj()
		w.Key("name")
		w.RS(name)
		w.Key("input")
	} else {
		w.Lit(`"function"`)
		w.Key("function")
		w.Obj()
		w.Key("name")
		w.RS(name)
		w.Key("arguments")
	}
	args()
	w.End('}')
	w.End('}')
}

// TextPart writes a typed text part, {"type": typ, "text": text}: the
// shape text takes in every dialect's content (typ a literal).
func TextPart(w *Writer, typ string, text []byte) {
	w.Obj()
	w.Key("type")
	w.Lit(typ)
	w.Key("text")
	w.RS(text)
	w.End('}')
}
