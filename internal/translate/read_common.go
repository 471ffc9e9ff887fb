package translate

import (
	"bytes"
	"strconv"
)

// Helpers shared by the request readers.

// path renders a JSON path element for error messages.
func path(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

// readTri consumes a boolean (anything else is left as Unset and skipped).
func (t *Translator) readTri() Tri {
	v, ok := t.cur.Bool()
	if !ok {
		t.cur.Skip()
		return Unset
	}
	if v {
		return True
	}
	return False
}

// readNumber consumes a number; field names the caller's field for the
// error when the value is not a number.
func (t *Translator) readNumber(field string) ([]byte, error) {
	if n := t.cur.Number(); n != nil {
		return n, nil
	}
	return nil, t.invalid(field, "must be a number")
}

// readInt consumes a non-negative integer.
func (t *Translator) readInt(field string) (int64, error) {
	n, ok := t.cur.Int()
	if !ok || n < 0 {
		return 0, t.invalid(field, "must be a non-negative integer")
	}
	return n, nil
}

// readRS consumes a string value as a raw string.
func (t *Translator) readRS(field string) ([]byte, error) {
	if s := strRS(&t.cur); s != nil {
		return s, nil
	}
	return nil, t.invalid(field, "must be a string")
}

// readStops reads a stop value: a string or an array of strings.
func (t *Translator) readStops(field string) error {
	c := &t.cur
	if s := strRS(c); s != nil {
		t.req.Stop = append(t.req.Stop, s)
		return nil
	}
	if c.Peek() != '[' {
		return t.invalid(field, "must be a string or an array of strings")
	}
	c.Array()
	for i := 0; c.Next(); i++ {
		s := strRS(c)
		if s == nil {
			return t.invalid(path(field, i), "must be a string")
		}
		t.req.Stop = append(t.req.Stop, s)
	}
	return nil
}

var base64Marker = []byte(";base64,")

// mediaFromURL fills an image or document part from an OpenAI URL value:
// a base64 data URL becomes SrcBase64 with its media type, anything else
// SrcURL. A data URL that is not base64 is refused: no other dialect can
// carry it.
func (t *Translator) mediaFromURL(p *Part, url []byte, field string) error {
	if !bytes.HasPrefix(url, []byte("data:")) {
		p.Src, p.Data = SrcURL, url
		return nil
	}
	i := bytes.Index(url, base64Marker)
	if i < 0 {
		return t.invalid(field, "a data URL must be base64-encoded (data:<media type>;base64,<data>)")
	}
	p.Src, p.MediaType, p.Data = SrcBase64, url[len("data:"):i], url[i+len(base64Marker):]
	return nil
}

// readObjectRaw consumes an object and returns its bytes.
func (t *Translator) readObjectRaw(field string) ([]byte, error) {
	if t.cur.Peek() != '{' {
		return nil, t.invalid(field, "must be an object")
	}
	return t.cur.Skip(), nil
}

// orderAssistant stably sorts an assistant turn's parts into reasoning,
// content, tool calls. Turns are short; insertion sort allocates nothing.
func orderAssistant(parts []Part) {
	rank := func(k Kind) int {
		switch k {
		case KindReasoning:
			return 0
		case KindToolCall:
			return 2
		}
		return 1
	}
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && rank(parts[j].Kind) < rank(parts[j-1].Kind); j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
}
