package translate

import (
	"bytes"
	"github.com/omniroute/gateway/internal/translate/ir"
	"strconv"
)

// Helpers shared by the request readers.

// loc names a field of the caller's body, such as
// messages[3].content[0].type, for an error message. It is a value built
// as the readers descend and rendered only when an error is made, so
// naming fields costs a successful translation nothing.
type loc struct {
	seg [6]string
	idx [6]int32 // index after seg[i], -1 for none
	n   int
}

// at starts a path at a top-level field.
func at(key string) loc { return loc{}.at(key) }

// at descends into member key (a constant; see atKey for a key read from
// the body). Past the depth bound the last segment is replaced.
func (l loc) at(key string) loc {
	if l.n == len(l.seg) {
		l.n--
	}
	l.seg[l.n], l.idx[l.n] = key, -1
	l.n++
	return l
}

// atKey descends into a member whose key came from the body; keys outside
// the converters' vocabulary render as "…".
func (l loc) atKey(k []byte) loc { return l.at(vocabulary(k)) }

// index descends into element i of the array at l.
func (l loc) index(i int) loc {
	if l.n > 0 {
		l.idx[l.n-1] = int32(i)
	}
	return l
}

func (l loc) String() string {
	var b []byte
	for i := 0; i < l.n; i++ {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, l.seg[i]...)
		if l.idx[i] >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(l.idx[i]), 10)
			b = append(b, ']')
		}
	}
	return string(b)
}

// vocabulary returns the constant spelling of a key the readers name in
// errors, so naming it does not copy the body's bytes.
func vocabulary(k []byte) string {
	for _, v := range keyWords {
		if v == string(k) {
			return v
		}
	}
	return "…"
}

var keyWords = [...]string{"function", "custom", "text", "refusal", "arguments", "input", "data", "url", "file_id",
	"summary", "generate_summary", "max_tokens", "max_completion_tokens", "previous_response_id", "conversation",
	"background", "prompt", "functions", "function_call", "effort"}

// readTri consumes a boolean (anything else is left as Unset and skipped).
func (t *Translator) readTri() ir.Tri {
	v, ok := t.cur.Bool()
	if !ok {
		t.cur.Skip()
		return ir.Unset
	}
	if v {
		return ir.True
	}
	return ir.False
}

// readNumber consumes a number; field names the caller's field for the
// error when the value is not a number.
func (t *Translator) readNumber(field loc) ([]byte, error) {
	if n := t.cur.Number(); n != nil {
		return n, nil
	}
	return nil, t.invalid(field, "must be a number")
}

// readInt consumes a non-negative integer.
func (t *Translator) readInt(field loc) (int64, error) {
	n, ok := t.cur.Int()
	if !ok || n < 0 {
		return 0, t.invalid(field, "must be a non-negative integer")
	}
	return n, nil
}

// readRS consumes a string value as a raw string.
func (t *Translator) readRS(field loc) ([]byte, error) {
	if s := ir.StrRS(&t.cur); s != nil {
		return s, nil
	}
	return nil, t.invalid(field, "must be a string")
}

// readStops reads a stop value: a string or an array of strings.
func (t *Translator) readStops(field loc) error {
	c := &t.cur
	if s := ir.StrRS(c); s != nil {
		t.req.Stop = append(t.req.Stop, s)
		return nil
	}
	if c.Peek() != '[' {
		return t.invalid(field, "must be a string or an array of strings")
	}
	c.Array()
	for i := 0; c.Next(); i++ {
		s := ir.StrRS(c)
		if s == nil {
			return t.invalid(field.index(i), "must be a string")
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
func (t *Translator) mediaFromURL(p *ir.Part, url []byte, field loc) error {
	if !bytes.HasPrefix(url, []byte("data:")) {
		p.Src, p.Data = ir.SrcURL, url
		return nil
	}
	i := bytes.Index(url, base64Marker)
	if i < 0 {
		return t.invalid(field, "a data URL must be base64-encoded (data:<media type>;base64,<data>)")
	}
	p.Src, p.MediaType, p.Data = ir.SrcBase64, url[len("data:"):i], url[i+len(base64Marker):]
	return nil
}

// contentList reads a content value that is a string (one text part) or
// an array whose elements part reads.
func (t *Translator) contentList(field loc, part func(*Translator, loc) error) error {
	c := &t.cur
	if s := ir.StrRS(c); s != nil {
		t.req.Add(ir.Part{Kind: ir.KindText, Text: s})
		return nil
	}
	if !c.Array() {
		return t.invalid(field, "must be a string or an array of content parts")
	}
	for j := 0; c.Next(); j++ {
		if err := part(t, field.index(j)); err != nil {
			return err
		}
	}
	return nil
}

// readEffort reads a reasoning effort word of the caller's scale, least
// to most.
func (t *Translator) readEffort(field loc, least, most ir.Effort) error {
	s, err := t.readRS(field)
	if err != nil {
		return err
	}
	if e := ir.ParseEffort(s); e >= least && e <= most {
		t.req.Reasoning.Effort = e
		return nil
	}
	return t.invalid(field, "unknown effort %q; use one of %s", s, ir.EffortList(least, most))
}

// readObjectRaw consumes an object and returns its bytes.
func (t *Translator) readObjectRaw(field loc) ([]byte, error) {
	if t.cur.Peek() != '{' {
		return nil, t.invalid(field, "must be an object")
	}
	return t.cur.Skip(), nil
}
