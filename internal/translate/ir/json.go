package ir

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Writer appends JSON and places the commas itself: after a value the
// next key or element is preceded by one, after an opening bracket or a
// key it is not. Converters then read as the JSON they write.
type Writer struct {
	B     []byte // the JSON written so far
	Comma bool   // the next key or value needs a comma before it
}

// Sep writes the comma the next key or value needs, if any: for helpers
// that append a value's bytes to B themselves (then setting Comma).
func (w *Writer) Sep() {
	if w.Comma {
		w.B = append(w.B, ',')
	}
}

// Obj and Arr open a container as a value; End closes one.
func (w *Writer) Obj() { w.Sep(); w.B = append(w.B, '{'); w.Comma = false }
func (w *Writer) Arr() { w.Sep(); w.B = append(w.B, '['); w.Comma = false }
func (w *Writer) End(c byte) {
	w.B = append(w.B, c)
	w.Comma = true
}

// Key writes a member key (k must need no escaping).
func (w *Writer) Key(k string) {
	w.Sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, k...)
	w.B = append(w.B, '"', ':')
	w.Comma = false
}

// Raw writes a JSON value as is.
func (w *Writer) Raw(v []byte) {
	w.Sep()
	w.B = append(w.B, v...)
	w.Comma = true
}

// Lit writes a constant JSON fragment (a literal such as `"text"` or
// `null`).
func (w *Writer) Lit(v string) {
	w.Sep()
	w.B = append(w.B, v...)
	w.Comma = true
}

// RS writes a raw string (see the package doc) back as a string literal.
func (w *Writer) RS(v []byte) {
	w.Sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, v...)
	w.B = append(w.B, '"')
	w.Comma = true
}

// Str writes s escaped as a string literal.
func (w *Writer) Str(s string) {
	w.Sep()
	w.B = apierror.AppendString(w.B, s)
	w.Comma = true
}

// StrBytes writes b (unescaped text, such as JSON argument text) as a
// string literal.
func (w *Writer) StrBytes(b []byte) {
	w.Sep()
	w.B = apierror.AppendString(w.B, b)
	w.Comma = true
}

// Int writes an integer.
func (w *Writer) Int(n int64) {
	w.Sep()
	w.B = strconv.AppendInt(w.B, n, 10)
	w.Comma = true
}

// Bool writes true or false.
func (w *Writer) Bool(v bool) {
	if v {
		w.Lit("true")
	} else {
		w.Lit("false")
	}
}

// RSOrEmpty writes v as RS does, or "" when v is absent (a member the
// target dialect requires, such as a thinking block's text).
func (w *Writer) RSOrEmpty(v []byte) {
	if v != nil {
		w.RS(v)
		return
	}
	w.Lit(`""`)
}

// RSField writes k and the raw string v, when v is present.
func (w *Writer) RSField(k string, v []byte) {
	if v != nil {
		w.Key(k)
		w.RS(v)
	}
}

// RawField writes k and the raw JSON value v, when v is present.
func (w *Writer) RawField(k string, v []byte) {
	if v != nil {
		w.Key(k)
		w.Raw(v)
	}
}

// RSListField writes k with the raw strings of vs as an array, when there
// are any.
func (w *Writer) RSListField(k string, vs [][]byte) {
	if len(vs) == 0 {
		return
	}
	w.Key(k)
	w.Arr()
	for _, v := range vs {
		w.RS(v)
	}
	w.End(']')
}

// RawString returns the raw string of the literal lit (quotes stripped),
// or nil when lit is not a string literal.
func RawString(lit []byte) []byte {
	if len(lit) < 2 || lit[0] != '"' {
		return nil
	}
	return lit[1 : len(lit)-1 : len(lit)-1]
}

// StrRS consumes a string value and returns its raw string, or nil (the
// value not consumed) when it is not a string.
func StrRS(c *jsonscan.Cursor) []byte { return RawString(c.Str()) }

// UnescapeRS appends the value of raw string rs to dst.
func UnescapeRS(dst, rs []byte) ([]byte, bool) {
	out, err := jsonscan.Unescape(dst, rs)
	return out, err == nil
}

// RSEquals reports whether raw string rs spells s (escapes compared as
// written; the vocabulary values converters compare are plain ASCII).
func RSEquals(rs []byte, s string) bool { return string(rs) == s }
