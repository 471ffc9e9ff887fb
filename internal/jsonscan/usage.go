package jsonscan

import "bytes"

var (
	includeUsageMember = []byte(`"include_usage":true`)
	streamOptionsUsage = []byte(`"stream_options":{"include_usage":true},`)
	usageOptionsObject = []byte(`{"include_usage":true}`)
)

// AppendIncludeUsage appends body to dst with stream_options.include_usage
// set to true (and, when model is not "", the model rewritten as
// AppendWithModel does), so a streaming chat answer ends with its usage
// chunk. body must have been scanned into r. An absent stream_options is
// added as the first member; an object gets the member appended last
// (JSON parsers keep the last duplicate, so a false before it is
// overridden); any other value is replaced by the object.
func AppendIncludeUsage(dst, body []byte, r *Request, model string) []byte {
	type edit struct {
		from, to int
		text     []byte
		model    bool
	}
	var edits [2]edit
	n := 0
	switch {
	case r.StreamOptionsStart < 0:
		brace := bytes.IndexByte(body, '{')
		if brace < 0 {
			return append(dst, body...)
		}
		text := streamOptionsUsage
		if rest := bytes.TrimLeft(body[brace+1:], " \t\r\n"); len(rest) > 0 && rest[0] == '}' {
			text = text[:len(text)-1] // an empty object: no comma
		}
		edits[n] = edit{from: brace + 1, to: brace + 1, text: text}
	case r.StreamOptionsStart < len(body) && body[r.StreamOptionsStart] == '{' && r.StreamOptionsEnd > r.StreamOptionsStart:
		end := r.StreamOptionsEnd - 1 // the closing brace
		inner := bytes.TrimSpace(body[r.StreamOptionsStart+1 : end])
		text := includeUsageMember
		if len(inner) > 0 {
			text = append([]byte{','}, includeUsageMember...)
		}
		edits[n] = edit{from: end, to: end, text: text}
	default:
		edits[n] = edit{from: r.StreamOptionsStart, to: r.StreamOptionsEnd, text: usageOptionsObject}
	}
	n++
	if model != "" && r.ModelStart >= 0 {
		edits[n] = edit{from: r.ModelStart, to: r.ModelEnd, model: true}
		n++
		if edits[1].from < edits[0].from {
			edits[0], edits[1] = edits[1], edits[0]
		}
	}
	pos := 0
	for _, e := range edits[:n] {
		dst = append(dst, body[pos:e.from]...)
		if e.model {
			dst = append(dst, '"')
			dst = append(dst, model...)
			dst = append(dst, '"')
		} else {
			dst = append(dst, e.text...)
		}
		pos = e.to
	}
	return append(dst, body[pos:]...)
}
