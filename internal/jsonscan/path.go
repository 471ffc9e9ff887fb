package jsonscan

import "bytes"

// Get returns the raw value found by following keys through nested
// objects from the top of doc (a JSON value; whitespace around it is
// allowed), or nil when a key is missing, a step is not an object, or doc
// is not valid JSON along the way. When a key repeats, the last one wins,
// as in the parsers providers use. It does not allocate (unless a key on
// the path is spelled with escapes).
func Get(doc []byte, keys ...string) []byte {
	v := bytes.TrimSpace(doc)
	for _, k := range keys {
		if len(v) == 0 || v[0] != '{' {
			return nil
		}
		var found []byte
		if Members(v, func(m Member) error {
			if string(m.Key) == k {
				found = v[m.ValueStart:m.End]
			}
			return nil
		}) != nil {
			return nil
		}
		if found == nil {
			return nil
		}
		v = found
	}
	return v
}

// Elements calls fn with each element (raw, trimmed) of the JSON array
// arr, stopping when fn returns false. It reports false when arr is not a
// valid array.
func Elements(arr []byte, fn func(el []byte) bool) bool {
	s := scanner{b: bytes.TrimSpace(arr)}
	if len(s.b) == 0 || s.b[0] != '[' {
		return false
	}
	s.i = 1
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		return s.i+1 == len(s.b)
	}
	for {
		s.ws()
		start := s.i
		if s.value(1) != nil {
			return false
		}
		if !fn(s.b[start:s.i]) {
			return true
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			return s.i+1 == len(s.b)
		default:
			return false
		}
	}
}

// AppendString appends the unescaped contents of the JSON string raw to
// dst. ok is false (and dst unchanged) when raw is not a valid string.
func AppendString(dst, raw []byte) (out []byte, ok bool) {
	s := scanner{b: bytes.TrimSpace(raw)}
	if len(s.b) < 2 || s.b[0] != '"' {
		return dst, false
	}
	body, escaped, err := s.str()
	if err != nil || s.i != len(s.b) {
		return dst, false
	}
	if !escaped {
		return append(dst, body...), true
	}
	u, err := unescape(dst, body)
	if err != nil {
		return dst, false
	}
	return u, true
}

// IsString reports whether raw is a JSON string equal to s (without
// escapes; an escaped spelling reports false).
func IsString(raw []byte, s string) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == len(s)+2 && raw[0] == '"' && raw[len(raw)-1] == '"' && string(raw[1:len(raw)-1]) == s
}
