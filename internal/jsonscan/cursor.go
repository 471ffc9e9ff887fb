package jsonscan

import (
	"fmt"
	"strconv"
)

// Cursor walks a JSON document one member or element at a time, validating
// as it goes, so a converter can read the fields it knows, keep the raw
// bytes of the ones it passes on, and skip the rest in a single pass. Raw
// values it returns alias the document. Nothing is allocated unless a key
// or string is spelled with escapes and the caller asks for it unescaped
// (then a scratch buffer kept by the Cursor is reused).
//
// Usage:
//
//	c.Reset(body)
//	if !c.Object() { ... }
//	for key, ok := c.Key(); ok; key, ok = c.Key() {
//		switch string(key) {
//		case "model": raw := c.Skip()
//		default: c.Skip()
//		}
//	}
//	err := c.End()
//
// Every value after a Key, and every element after Next, must be consumed
// exactly once (Skip, Str, Int, Object, Array…). Once an error is recorded
// every method returns its zero result and Err reports the first error.
type Cursor struct {
	s       scanner
	depth   int
	err     error
	keyBuf  []byte
	textBuf []byte
}

// Reset starts the cursor on doc, keeping its scratch buffers.
func (c *Cursor) Reset(doc []byte) {
	*c = Cursor{s: scanner{b: doc}, keyBuf: c.keyBuf[:0], textBuf: c.textBuf[:0]}
}

// Err is the first error met, or nil.
func (c *Cursor) Err() error { return c.err }

// Offset is the byte offset of the cursor.
func (c *Cursor) Offset() int { return c.s.i }

// Fail records err (if none is recorded yet), which stops the walk; a
// converter uses it for a value of the wrong type.
func (c *Cursor) Fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *Cursor) fail(msg string) {
	if c.err == nil {
		c.err = &SyntaxError{Offset: c.s.i, Msg: msg}
	}
}

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', '-' or a digit), or 0 at the end of input or after an error.
func (c *Cursor) Peek() byte {
	if c.err != nil {
		return 0
	}
	c.s.ws()
	if c.s.i >= len(c.s.b) {
		return 0
	}
	return c.s.b[c.s.i]
}

// Object enters the object at the cursor. It reports false when the next
// value is not an object, consuming nothing: a value of another type is
// the caller's to judge, while a byte that starts no value is recorded as
// a syntax error.
func (c *Cursor) Object() bool { return c.enter('{') }

// Array enters the array at the cursor; like Object it reports false for
// a value of another type.
func (c *Cursor) Array() bool { return c.enter('[') }

// enter steps into the container that open starts, one level deeper.
func (c *Cursor) enter(open byte) bool {
	if p := c.Peek(); p != open {
		c.notValue(p)
		return false
	}
	if c.depth >= MaxDepth {
		c.fail("JSON nested too deeply")
		return false
	}
	c.depth++
	c.s.i++
	return true
}

// notValue records a syntax error unless p starts a JSON value.
func (c *Cursor) notValue(p byte) {
	switch {
	case p == '{', p == '[', p == '"', p == 't', p == 'f', p == 'n', p == '-', p >= '0' && p <= '9':
	case c.err == nil && c.s.i >= len(c.s.b):
		c.fail("unexpected end of JSON")
	default:
		c.fail("invalid character looking for a value")
	}
}

// first reports whether the cursor sits right after the opening bracket of
// its container: the previous non-space byte is '{' or '['. A value never
// ends in either, so this needs no state per level.
func (c *Cursor) first() bool {
	j := c.s.i - 1
	for j >= 0 {
		switch c.s.b[j] {
		case ' ', '\t', '\n', '\r':
			j--
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

// Key reads the next member's key of the current object and leaves the
// cursor at its value. At the closing brace it consumes it and reports
// false. An escaped key is returned unescaped, valid until the next Key.
func (c *Cursor) Key() ([]byte, bool) {
	if c.err != nil {
		return nil, false
	}
	s := &c.s
	s.ws()
	if s.i >= len(s.b) {
		c.fail("unexpected end of JSON in object")
		return nil, false
	}
	if s.b[s.i] == '}' {
		s.i++
		c.depth--
		return nil, false
	}
	if !c.first() {
		if s.b[s.i] != ',' {
			c.fail("expected ',' or '}' in object")
			return nil, false
		}
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		c.fail("expected a string key")
		return nil, false
	}
	key, escaped, err := s.str()
	if err != nil {
		c.Fail(err)
		return nil, false
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		c.fail("expected ':' after object key")
		return nil, false
	}
	s.i++
	s.ws()
	if escaped {
		k, err := unescape(c.keyBuf[:0], key)
		if err != nil {
			c.fail("invalid escape in key")
			return nil, false
		}
		c.keyBuf = k
		key = k
	}
	return key, true
}

// Next moves to the next element of the current array. At the closing
// bracket it consumes it and reports false.
func (c *Cursor) Next() bool {
	if c.err != nil {
		return false
	}
	s := &c.s
	s.ws()
	if s.i >= len(s.b) {
		c.fail("unexpected end of JSON in array")
		return false
	}
	if s.b[s.i] == ']' {
		s.i++
		c.depth--
		return false
	}
	if !c.first() {
		if s.b[s.i] != ',' {
			c.fail("expected ',' or ']' in array")
			return false
		}
		s.i++
		s.ws()
	}
	return true
}

// Skip validates the next value and returns its raw bytes.
func (c *Cursor) Skip() []byte {
	if c.err != nil {
		return nil
	}
	c.s.ws()
	start := c.s.i
	if err := c.s.value(c.depth); err != nil {
		c.Fail(err)
		return nil
	}
	return c.s.b[start:c.s.i]
}

// Str consumes the next value when it is a string and returns its raw
// literal, quotes included (valid JSON, fit to copy into output). It
// returns nil, consuming nothing, when the value is not a string.
func (c *Cursor) Str() []byte {
	if c.Peek() != '"' {
		return nil
	}
	start := c.s.i
	if _, _, err := c.s.str(); err != nil {
		c.Fail(err)
		return nil
	}
	return c.s.b[start:c.s.i]
}

// Text consumes the next value when it is a string and returns its
// contents unescaped (aliasing the document when it has no escapes, else
// valid until the next Text). ok is false, consuming nothing, for a
// non-string.
func (c *Cursor) Text() (text []byte, ok bool) {
	if c.Peek() != '"' {
		return nil, false
	}
	raw, escaped, err := c.s.str()
	if err != nil {
		c.Fail(err)
		return nil, false
	}
	if !escaped {
		return raw, true
	}
	u, err := unescape(c.textBuf[:0], raw)
	if err != nil {
		c.fail("invalid escape in string")
		return nil, false
	}
	c.textBuf = u
	return u, true
}

// Int consumes the next value and returns it as an integer; ok is false
// for anything but an integer in int64 range (the value is consumed all
// the same, so a caller never has to skip it).
func (c *Cursor) Int() (n int64, ok bool) {
	p := c.Peek()
	if p != '-' && (p < '0' || p > '9') {
		c.Skip()
		return 0, false
	}
	start := c.s.i
	if err := c.s.number(); err != nil {
		c.Fail(err)
		return 0, false
	}
	n, err := strconv.ParseInt(string(c.s.b[start:c.s.i]), 10, 64)
	return n, err == nil
}

// Number consumes the next value when it is a number and returns its raw
// bytes; a non-number is not consumed and gives nil.
func (c *Cursor) Number() []byte {
	p := c.Peek()
	if p != '-' && (p < '0' || p > '9') {
		return nil
	}
	start := c.s.i
	if err := c.s.number(); err != nil {
		c.Fail(err)
		return nil
	}
	return c.s.b[start:c.s.i]
}

// Bool consumes true or false; ok is false, consuming nothing, otherwise.
func (c *Cursor) Bool() (v, ok bool) {
	switch c.Peek() {
	case 't':
		if err := c.s.lit(litTrue); err != nil {
			c.Fail(err)
			return false, false
		}
		return true, true
	case 'f':
		if err := c.s.lit(litFalse); err != nil {
			c.Fail(err)
			return false, false
		}
		return false, true
	}
	return false, false
}

// Null consumes null and reports whether it was there.
func (c *Cursor) Null() bool {
	if c.Peek() != 'n' {
		return false
	}
	if err := c.s.lit(litNull); err != nil {
		c.Fail(err)
		return false
	}
	return true
}

// End checks that nothing but whitespace follows the top-level value and
// returns the first error of the walk.
func (c *Cursor) End() error {
	if c.err != nil {
		return c.err
	}
	if c.depth != 0 {
		return &SyntaxError{Offset: c.s.i, Msg: fmt.Sprintf("%d containers left open", c.depth)}
	}
	return c.s.end()
}

// Unescape appends the value of a JSON string to dst, given the string's
// contents between the quotes as written (escapes intact).
func Unescape(dst, contents []byte) ([]byte, error) { return unescape(dst, contents) }
