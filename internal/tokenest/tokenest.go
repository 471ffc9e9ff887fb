// Package tokenest estimates, without decoding and without allocating,
// whether a chat request body is structurally heavy: how many tokens its
// conversation and tool definitions hold, with a bounded walk that stops as
// soon as the answer is known.
//
// The estimate follows OmniRoute's admitChatStructure walk: every string
// value and object key contributes a quarter token per ASCII code point
// and one token per other code point; numbers, booleans and null
// contribute nothing. The conversation ("messages" and "input", each
// flattened one level; also "system" and "instructions", which hold the
// long prompts of Anthropic and Responses callers) is walked first, then
// "tools" with the remaining allowance. The walk visits at most MaxNodes
// values and never descends to MaxDepth (the top-level list is depth 0);
// running out of either with work left marks the result Exhausted, which
// the caller treats as heavy.
package tokenest

import (
	"encoding/binary"

	"github.com/omniroute/gateway/internal/jsonscan"
)

// Walk bounds.
const (
	MaxNodes = 10000
	MaxDepth = 12
)

// Result is the outcome of Estimate.
type Result struct {
	// Tokens is the estimate, capped at the limit.
	Tokens int
	// Exhausted is set when the walk stopped early for its node or depth
	// bound (or on malformed JSON) rather than because it was done.
	Exhausted bool
}

// Heavy reports whether the body reached the token limit or exhausted the
// walk.
func (r Result) Heavy(limit int) bool { return r.Exhausted || r.Tokens >= limit }

// Estimate walks body (a JSON object) with a token limit.
func Estimate(body []byte, limit int) Result {
	if limit <= 0 {
		return Result{}
	}
	w := walker{b: body, budget: int64(limit) * 4, nodes: MaxNodes}
	w.top()
	tokens := int(w.quarters / 4)
	if w.quarters >= w.budget {
		tokens = limit
	}
	return Result{Tokens: tokens, Exhausted: w.exhausted}
}

type walker struct {
	b         []byte
	i         int
	quarters  int64 // quarter tokens counted so far
	budget    int64 // quarter tokens at which the walk stops
	nodes     int   // values the walk may still visit
	exhausted bool
	stop      bool // limit reached or exhausted: unwind
}

// top finds the conversation and tools fields of the top-level object and
// walks them in order: conversation first, then tools.
func (w *walker) top() {
	w.ws()
	if !w.eat('{') {
		w.fail()
		return
	}
	var toolStart = -1
	var convo [4][2]int // spans of conversation fields
	nconvo := 0
	for {
		w.ws()
		if w.eat('}') {
			break
		}
		ks, ke, ok := w.key()
		if !ok {
			w.fail()
			return
		}
		w.ws()
		if !w.eat(':') {
			w.fail()
			return
		}
		w.ws()
		start := w.i
		if !w.skip() {
			w.fail()
			return
		}
		switch string(w.b[ks:ke]) {
		case "messages", "input", "system", "instructions":
			if nconvo < len(convo) {
				convo[nconvo] = [2]int{start, w.i}
				nconvo++
			}
		case "tools":
			toolStart = start
		}
		w.ws()
		if w.eat(',') {
			continue
		}
		if !w.eat('}') {
			w.fail()
			return
		}
		break
	}
	for k := 0; k < nconvo && !w.stop; k++ {
		w.i = convo[k][0]
		w.list(true)
	}
	if toolStart >= 0 && !w.stop {
		w.i = toolStart
		w.list(false)
	}
}

// list walks a field's value as the depth-0 list: an array's elements
// (with nested arrays inlined one level when flatten is set) are items at
// depth 1; any other value is one item.
func (w *walker) list(flatten bool) {
	w.ws()
	if w.peek() != '[' {
		w.value(1)
		return
	}
	w.i++
	for !w.stop {
		w.ws()
		if w.eat(']') {
			return
		}
		if flatten && w.peek() == '[' {
			w.i++
			for !w.stop {
				w.ws()
				if w.eat(']') {
					break
				}
				w.value(1)
				w.ws()
				if !w.eat(',') && w.peek() != ']' {
					w.fail()
				}
			}
		} else {
			w.value(1)
		}
		w.ws()
		if !w.eat(',') && w.peek() != ']' {
			w.fail()
		}
	}
}

// value walks one value at depth d.
func (w *walker) value(d int) {
	if w.stop {
		return
	}
	if w.i >= len(w.b) {
		w.fail()
		return
	}
	if w.nodes == 0 {
		w.exhaust()
		return
	}
	w.nodes--
	switch w.peek() {
	case '"':
		w.str()
	case '{', '[':
		if d >= MaxDepth {
			w.exhaust()
			return
		}
		w.container(d)
	default: // number, true, false, null: no tokens
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return
			}
			w.i++
		}
	}
}

// container walks the object or array that opens at w.i, its values one
// level below d; an object's keys count like strings.
func (w *walker) container(d int) {
	closer, keyed := byte(']'), w.b[w.i] == '{'
	if keyed {
		closer = '}'
	}
	w.i++
	for !w.stop {
		w.ws()
		if w.eat(closer) {
			return
		}
		if keyed {
			if w.peek() != '"' {
				w.fail()
				return
			}
			w.str()
			w.ws()
			if !w.eat(':') {
				w.fail()
				return
			}
			w.ws()
		}
		w.value(d + 1)
		w.ws()
		if !w.eat(',') && w.peek() != closer {
			w.fail()
		}
	}
}

// str counts a string's code points; w.i is at its opening quote.
func (w *walker) str() {
	w.i++
	b := w.b
	q := w.quarters
	for w.i < len(b) {
		// Eight plain ASCII bytes at a time: one quarter token each.
		for w.i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[w.i:])) {
			w.i += 8
			if q += 8; q >= w.budget {
				w.add(q)
				return
			}
		}
		if w.i >= len(b) {
			break
		}
		c := b[w.i]
		switch {
		case c == '"':
			w.i++
			w.add(q)
			return
		case c == '\\':
			if w.i+1 >= len(b) {
				w.fail()
				return
			}
			if b[w.i+1] == 'u' && w.i+5 < len(b) {
				v := hex4(b[w.i+2 : w.i+6])
				switch {
				case v < 0:
					w.fail()
					return
				case v >= 0xDC00 && v <= 0xDFFF:
					// low surrogate: its pair was counted at the high half
				case v < 0x80:
					q++
				default:
					q += 4
				}
				w.i += 6
				continue
			}
			q++
			w.i += 2
		case c < 0x80:
			q++
			w.i++
		case c&0xC0 == 0x80:
			w.i++ // UTF-8 continuation byte
		default:
			q += 4
			w.i++
		}
		if q >= w.budget {
			w.add(q)
			return
		}
	}
	w.fail()
}

// special reports whether any of the eight bytes in x ends a plain ASCII
// run inside a string: a byte at or above 0x80, a quote or a backslash.
func special(x uint64) bool {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	if x&high != 0 {
		return true
	}
	q := x ^ (ones * '"')
	e := x ^ (ones * '\\')
	return ((q-ones)&^q|(e-ones)&^e)&high != 0
}

func (w *walker) add(q int64) {
	w.quarters = q
	if q >= w.budget {
		w.quarters = w.budget
		w.stop = true
	}
}

func hex4(b []byte) int {
	v := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}

func (w *walker) exhaust() { w.exhausted, w.stop = true, true }

// fail ends the walk on malformed input; the body counts as exhausted
// (heavy) rather than light, so a parser slip never lets a body through
// the gate unexamined.
func (w *walker) fail() {
	if !w.stop {
		w.exhaust()
	}
}

func (w *walker) ws() { w.i = jsonscan.SkipSpace(w.b, w.i) }

func (w *walker) peek() byte {
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

func (w *walker) eat(c byte) bool {
	if w.i < len(w.b) && w.b[w.i] == c {
		w.i++
		return true
	}
	return false
}

// key reads an object key of the top level (without counting it).
func (w *walker) key() (start, end int, ok bool) {
	if !w.eat('"') {
		return 0, 0, false
	}
	start = w.i
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case '\\':
			w.i += 2
			continue
		case '"':
			end = w.i
			w.i++
			return start, end, true
		}
		w.i++
	}
	return 0, 0, false
}

// skip passes over one value of the top-level object without counting.
func (w *walker) skip() bool {
	depth := 0
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch c {
		case '"':
			w.i++
			for w.i < len(w.b) && w.b[w.i] != '"' {
				if w.b[w.i] == '\\' {
					w.i++
				}
				w.i++
			}
			if w.i >= len(w.b) {
				return false
			}
			w.i++
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
			if depth == 0 {
				w.i++
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
		w.i++
	}
	return depth == 0
}
