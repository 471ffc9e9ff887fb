// Package jsonscan reads the few fields routing needs from a request body in
// one pass, without decoding it into Go values and without allocating, and
// rewrites the model name in place of its original bytes.
//
// The scan validates the whole document (RFC 8259 grammar, nesting bounded),
// so a body that passes is one the provider's JSON parser will accept too.
// Duplicate or escaped spellings of the fields the gateway routes on are
// rejected: upstream parsers take the last duplicate, so accepting
// {"model":"cheap","model":"expensive"} would let a caller pick a model the
// gateway never routed.
package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds nesting; deeper documents are rejected rather than walked.
const MaxDepth = 512

// Request is what the gateway reads from an inference request body.
type Request struct {
	// Model is the "model" string, unescaped. It aliases the body unless the
	// value contained escapes.
	Model []byte
	// ModelStart and ModelEnd delimit the model value token (with quotes)
	// in the body; both are -1 when the body has no model.
	ModelStart, ModelEnd int
	// ModelIsString is false when "model" is present but not a string.
	ModelIsString bool
	// Stream is the "stream" flag (false when absent or not true).
	Stream bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// StreamOptionsStart/End delimit the stream_options value; -1 if absent.
	StreamOptionsStart, StreamOptionsEnd int
	// MaxTokens is the largest of max_tokens, max_completion_tokens and
	// max_output_tokens present (a provider may honour any of them), or -1.
	// Each is a whole number from 0 to MaxTokensLimit, or null.
	MaxTokens int64
	// Messages counts entries of "messages", or of "input" when it is an
	// array (1 for a string input).
	Messages int
	// Tools counts entries of "tools" and "functions".
	Tools int

	scratch []byte
	// N is the requested number of answers ("n"), or 0.
	N int64

	// What identifies a conversation (transport's session affinity):
	// PromptCacheKey is prompt_cache_key's raw string contents (nil when
	// absent); MetadataStart/End delimit the metadata value, SystemStart/End
	// the system (Messages) or instructions (Responses) value, and
	// OpeningStart/End the first two entries of messages or input, the
	// conversation's opening that every later turn repeats; -1 when
	// absent.
	PromptCacheKey             []byte
	MetadataStart, MetadataEnd int
	SystemStart, SystemEnd     int
	OpeningStart, OpeningEnd   int

	// Members are the body's top-level members in order (a key written
	// with escapes is kept as written: its raw contents), so a later
	// stage can edit members without scanning the body again
	// (internal/fit).
	Members []Member
}

// Reset clears r for reuse.
func (r *Request) Reset() {
	s, m := r.scratch[:0], r.Members[:0]
	*r = Request{ModelStart: -1, ModelEnd: -1, StreamOptionsStart: -1, StreamOptionsEnd: -1, MaxTokens: -1, scratch: s, Members: m,
		MetadataStart: -1, MetadataEnd: -1, SystemStart: -1, SystemEnd: -1, OpeningStart: -1, OpeningEnd: -1}
}

// SyntaxError describes why a body is not acceptable JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// ErrNotObject is returned when the body is valid JSON but not an object.
var ErrNotObject = errors.New("request body must be a JSON object")

// MaxTokensLimit bounds max_tokens and its siblings: far above any
// model's output limit, far below what would overflow the token
// arithmetic of budgets and admission costs.
const MaxTokensLimit = 1 << 24

// MaxN bounds "n", the number of answers asked for (OpenAI's maximum).
const MaxN = 128

// FieldValueError is returned when a field the gateway prices or budgets
// on has a value it cannot use: the provider would read it differently
// from the gateway, or not at all.
type FieldValueError struct {
	Field string
	Want  string
}

func (e *FieldValueError) Error() string {
	return fmt.Sprintf("field %q must be %s", e.Field, e.Want)
}

// DuplicateFieldError is returned when a routed field appears twice.
type DuplicateFieldError struct{ Field string }

func (e *DuplicateFieldError) Error() string {
	return fmt.Sprintf("field %q appears more than once; send it once", e.Field)
}

// ScanRequest validates body and fills r. r is Reset first.
func ScanRequest(body []byte, r *Request) error {
	r.Reset()
	s := scanner{b: body}
	s.ws()
	if s.i >= len(s.b) {
		return &SyntaxError{Offset: 0, Msg: "empty body"}
	}
	if s.b[s.i] != '{' {
		if err := s.value(0); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return ErrNotObject
	}
	var seen uint16
	keyStart := 0
	err := s.objectKeys(0, func(at int) { keyStart = at }, func(key []byte, keyEscaped bool) error {
		vs := s.i
		if keyEscaped {
			k, err := unescape(r.scratch[:0], key)
			if err != nil {
				return &SyntaxError{Offset: s.i, Msg: "invalid escape in key"}
			}
			r.scratch = k
			if isRouted(k) {
				return fmt.Errorf("field %q is spelled with escape sequences; write it plainly", k)
			}
			if err := s.value(1); err != nil {
				return err
			}
		} else if err := r.field(&s, key, &seen); err != nil {
			return err
		}
		r.Members = append(r.Members, Member{Key: key, Start: keyStart, ValueStart: vs, End: s.i})
		return nil
	})
	if err != nil {
		return err
	}
	return s.end()
}

const (
	seenModel = 1 << iota
	seenStream
	seenStreamOptions
	seenMessages
	seenInput
	seenMaxTokens
	seenMaxCompletionTokens
	seenMaxOutputTokens
	seenN
)

// isRouted lists the fields that may appear only once and only in plain
// spelling: the gateway routes, prices or budgets on them.
func isRouted(k []byte) bool {
	switch string(k) {
	case "model", "stream", "stream_options", "messages", "input", "max_tokens", "max_completion_tokens", "max_output_tokens", "n":
		return true
	}
	return false
}

// wholeNumber reads a value that must be null or a JSON integer from 0 to
// limit: -1 for null.
func (s *scanner) wholeNumber(field string, limit int64, want string) (int64, error) {
	start := s.i
	if err := s.value(1); err != nil {
		return 0, err
	}
	raw := s.b[start:s.i]
	if bytes.Equal(raw, litNull) {
		return -1, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > limit {
		return 0, &FieldValueError{Field: field, Want: want}
	}
	return n, nil
}

func (r *Request) field(s *scanner, key []byte, seen *uint16) error {
	once := func(bit uint16, name string) error {
		if *seen&bit != 0 {
			return &DuplicateFieldError{Field: name}
		}
		*seen |= bit
		return nil
	}
	switch string(key) {
	case "model":
		if err := once(seenModel, "model"); err != nil {
			return err
		}
		start := s.i
		if s.i < len(s.b) && s.b[s.i] == '"' {
			raw, escaped, err := s.str()
			if err != nil {
				return err
			}
			r.ModelStart, r.ModelEnd, r.ModelIsString = start, s.i, true
			if escaped {
				u, err := unescape(r.scratch[:0], raw)
				if err != nil {
					return &SyntaxError{Offset: start, Msg: "invalid escape in model"}
				}
				r.scratch = u
				r.Model = u
			} else {
				r.Model = raw
			}
			return nil
		}
		r.ModelStart = start
		err := s.value(1)
		r.ModelEnd = s.i
		return err
	case "stream":
		if err := once(seenStream, "stream"); err != nil {
			return err
		}
		if bytes.HasPrefix(s.b[s.i:], litTrue) {
			r.Stream = true
		}
		return s.value(1)
	case "stream_options":
		if err := once(seenStreamOptions, "stream_options"); err != nil {
			return err
		}
		r.StreamOptionsStart = s.i
		if s.i < len(s.b) && s.b[s.i] == '{' {
			err := s.object(1, func(k []byte, _ bool) error {
				if string(k) == "include_usage" && bytes.HasPrefix(s.b[s.i:], litTrue) {
					r.IncludeUsage = true
				}
				return s.value(2)
			})
			r.StreamOptionsEnd = s.i
			return err
		}
		err := s.value(1)
		r.StreamOptionsEnd = s.i
		return err
	case "max_tokens", "max_completion_tokens", "max_output_tokens":
		bit, name := uint16(seenMaxTokens), "max_tokens"
		switch string(key) {
		case "max_completion_tokens":
			bit, name = seenMaxCompletionTokens, "max_completion_tokens"
		case "max_output_tokens":
			bit, name = seenMaxOutputTokens, "max_output_tokens"
		}
		if err := once(bit, name); err != nil {
			return err
		}
		n, err := s.wholeNumber(name, MaxTokensLimit, tokensWant)
		if err != nil {
			return err
		}
		r.MaxTokens = max(r.MaxTokens, n)
		return nil
	case "messages":
		if err := once(seenMessages, "messages"); err != nil {
			return err
		}
		r.OpeningStart = s.i
		n, err := s.countArray(1, &r.OpeningEnd)
		r.Messages += n
		return err
	case "input":
		if err := once(seenInput, "input"); err != nil {
			return err
		}
		r.OpeningStart = s.i
		if s.i < len(s.b) && s.b[s.i] == '"' {
			r.Messages++
			err := s.value(1)
			r.OpeningEnd = s.i
			return err
		}
		n, err := s.countArray(1, &r.OpeningEnd)
		r.Messages += n
		return err
	case "system", "instructions":
		r.SystemStart = s.i
		err := s.value(1)
		r.SystemEnd = s.i
		return err
	case "metadata":
		r.MetadataStart = s.i
		err := s.value(1)
		r.MetadataEnd = s.i
		return err
	case "prompt_cache_key":
		if s.i < len(s.b) && s.b[s.i] == '"' {
			raw, _, err := s.str()
			r.PromptCacheKey = raw
			return err
		}
		return s.value(1)
	case "tools", "functions":
		n, err := s.countArray(1, nil)
		r.Tools += n
		return err
	case "n":
		if err := once(seenN, "n"); err != nil {
			return err
		}
		n, err := s.wholeNumber("n", MaxN, nWant)
		if err != nil {
			return err
		}
		r.N = max(n, 0)
		return nil
	}
	return s.value(1)
}

var (
	tokensWant = fmt.Sprintf("a whole number from 0 to %d, or null", MaxTokensLimit)
	nWant      = fmt.Sprintf("a whole number from 0 to %d, or null", MaxN)
)

// AppendWithModel appends body to dst with the model value replaced by the
// JSON string of model. model must need no escaping (config validation
// guarantees it for upstream names).
func AppendWithModel(dst, body []byte, r *Request, model string) []byte {
	if r.ModelStart < 0 {
		return append(dst, body...)
	}
	dst = append(dst, body[:r.ModelStart]...)
	dst = append(dst, '"')
	dst = append(dst, model...)
	dst = append(dst, '"')
	return append(dst, body[r.ModelEnd:]...)
}

var (
	litTrue  = []byte("true")
	litFalse = []byte("false")
	litNull  = []byte("null")
)

type scanner struct {
	b []byte
	i int
}

func (s *scanner) errf(msg string) error { return &SyntaxError{Offset: s.i, Msg: msg} }

func (s *scanner) ws() { s.i = SkipSpace(s.b, s.i) }

func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errf("unexpected data after the JSON value")
	}
	return nil
}

// value validates one JSON value starting at s.i (after whitespace).
func (s *scanner) value(depth int) error {
	s.ws()
	if s.i >= len(s.b) {
		return s.errf("unexpected end of JSON")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth, func([]byte, bool) error { return s.value(depth + 1) })
	case c == '[':
		_, err := s.countArray(depth, nil)
		return err
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.lit(litTrue)
	case c == 'f':
		return s.lit(litFalse)
	case c == 'n':
		return s.lit(litNull)
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.errf(fmt.Sprintf("invalid character %q looking for a value", c))
	}
}

func (s *scanner) lit(l []byte) error {
	if !bytes.HasPrefix(s.b[s.i:], l) {
		return s.errf("invalid literal")
	}
	s.i += len(l)
	return nil
}

// object walks an object at s.i; fn is called with s.i at each member's
// value (whitespace skipped) and must consume it.
func (s *scanner) object(depth int, fn func(key []byte, escaped bool) error) error {
	return s.objectKeys(depth, nil, fn)
}

// countArray counts an array's elements; when opening is not nil it gets
// the offset after the array's second element (its first, or the
// array's end, when it has fewer).
func (s *scanner) countArray(depth int, opening *int) (int, error) {
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return 0, s.value(depth)
	}
	if depth >= MaxDepth {
		return 0, s.errf("JSON nested too deeply")
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return 0, nil
	}
	n := 0
	for {
		if err := s.value(depth + 1); err != nil {
			return n, err
		}
		n++
		if opening != nil && n <= 2 {
			*opening = s.i
		}
		s.ws()
		if s.i >= len(s.b) {
			return n, s.errf("unexpected end of JSON in array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return n, nil
		default:
			return n, s.errf("expected ',' or ']' in array")
		}
	}
}

// str validates a string at s.i and returns its raw contents (without
// quotes) and whether it contains escapes.
func (s *scanner) str() ([]byte, bool, error) {
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, s.errf("unterminated escape")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return nil, false, s.errf("invalid \\u escape")
				}
				s.i += 6
			default:
				return nil, false, s.errf("invalid escape character")
			}
		case c < 0x20:
			return nil, false, s.errf("control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.errf("unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return s.errf("invalid number")
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if s.b[s.i] >= '1' && s.b[s.i] <= '9' {
		s.digits()
	} else {
		return s.errf("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.errf("invalid number: digits expected after '.'")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.errf("invalid number: digits expected in exponent")
		}
	}
	return nil
}

// digits steps over a run of decimal digits and reports how many.
func (s *scanner) digits() int {
	d := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - d
}

// unescape decodes the JSON string contents raw into dst.
func unescape(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return dst, errors.New("bad escape")
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if i+5 > len(raw) {
				return dst, errors.New("bad escape")
			}
			r1, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 32)
			if err != nil {
				return dst, err
			}
			i += 4
			r := rune(r1)
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if r2, err := strconv.ParseUint(string(raw[i+3:i+7]), 16, 32); err == nil && r2 >= 0xDC00 && r2 < 0xE000 {
					r = (r-0xD800)<<10 + (rune(r2) - 0xDC00) + 0x10000
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, errors.New("bad escape")
		}
	}
	return dst, nil
}

// HasTopLevelKey reports whether body is a JSON object with key among its
// top-level members. Invalid JSON reports false.
func HasTopLevelKey(body []byte, key string) bool {
	s := scanner{b: body}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	found := false
	err := s.object(0, func(k []byte, _ bool) error {
		if string(k) == key {
			found = true
		}
		return s.value(1)
	})
	return err == nil && found
}
