package translate

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// writer appends JSON and places the commas itself: after a value the
// next key or element is preceded by one, after an opening bracket or a
// key it is not. Converters then read as the JSON they write.
type writer struct {
	b     []byte
	comma bool
}

func (w *writer) sep() {
	if w.comma {
		w.b = append(w.b, ',')
	}
}

// obj and arr open a container as a value; end closes one.
func (w *writer) obj() { w.sep(); w.b = append(w.b, '{'); w.comma = false }
func (w *writer) arr() { w.sep(); w.b = append(w.b, '['); w.comma = false }
func (w *writer) end(c byte) {
	w.b = append(w.b, c)
	w.comma = true
}

// key writes a member key (k must need no escaping).
func (w *writer) key(k string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
	w.comma = false
}

// raw writes a JSON value as is.
func (w *writer) raw(v []byte) {
	w.sep()
	w.b = append(w.b, v...)
	w.comma = true
}

// lit writes a constant JSON fragment (a literal such as `"text"` or
// `null`).
func (w *writer) lit(v string) {
	w.sep()
	w.b = append(w.b, v...)
	w.comma = true
}

// rs writes a raw string (see ir.go) back as a string literal.
func (w *writer) rs(v []byte) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, v...)
	w.b = append(w.b, '"')
	w.comma = true
}

// str writes s escaped as a string literal.
func (w *writer) str(s string) {
	w.sep()
	w.b = apierror.AppendString(w.b, s)
	w.comma = true
}

// strBytes writes b (unescaped text, such as JSON argument text) as a
// string literal.
func (w *writer) strBytes(b []byte) {
	w.sep()
	w.b = apierror.AppendString(w.b, b)
	w.comma = true
}

func (w *writer) int(n int64) {
	w.sep()
	w.b = strconv.AppendInt(w.b, n, 10)
	w.comma = true
}

func (w *writer) bool(v bool) {
	if v {
		w.lit("true")
	} else {
		w.lit("false")
	}
}

// rsOrEmpty writes v as rs does, or "" when v is absent (a member the
// target dialect requires, such as a thinking block's text).
func (w *writer) rsOrEmpty(v []byte) {
	if v != nil {
		w.rs(v)
		return
	}
	w.lit(`""`)
}

// Field helpers: write key and value only when the value is present.
func (w *writer) rsField(k string, v []byte) {
	if v != nil {
		w.key(k)
		w.rs(v)
	}
}

func (w *writer) rawField(k string, v []byte) {
	if v != nil {
		w.key(k)
		w.raw(v)
	}
}

// rsListField writes k with the raw strings of vs as an array, when there
// are any.
func (w *writer) rsListField(k string, vs [][]byte) {
	if len(vs) == 0 {
		return
	}
	w.key(k)
	w.arr()
	for _, v := range vs {
		w.rs(v)
	}
	w.end(']')
}

// rawString returns the raw string of the literal lit (quotes stripped),
// or nil when lit is not a string literal.
func rawString(lit []byte) []byte {
	if len(lit) < 2 || lit[0] != '"' {
		return nil
	}
	return lit[1 : len(lit)-1 : len(lit)-1]
}

// strRS consumes a string value and returns its raw string, or nil (the
// value not consumed) when it is not a string.
func strRS(c *jsonscan.Cursor) []byte { return rawString(c.Str()) }

// unescapeRS appends the value of raw string rs to dst.
func unescapeRS(dst, rs []byte) ([]byte, bool) {
	out, err := jsonscan.Unescape(dst, rs)
	return out, err == nil
}

// rsEquals reports whether raw string rs spells s (escapes compared as
// written; the vocabulary values converters compare are plain ASCII).
func rsEquals(rs []byte, s string) bool { return string(rs) == s }
