package jsonscan

// Member is one top-level member of an object: its key (unescaped; it may
// alias the body) and the byte spans of the whole member (from the key's
// opening quote to the end of the value) and of the value.
type Member struct {
	Key                    []byte
	Start, ValueStart, End int
}

// Members validates body as a JSON object and calls fn for each top-level
// member in order. Escaped keys are unescaped into scratch space, so
// "t\u006fols" is reported as tools.
func Members(body []byte, fn func(m Member) error) error {
	s := scanner{b: body}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		if s.i >= len(s.b) {
			return &SyntaxError{Offset: 0, Msg: "empty body"}
		}
		return ErrNotObject
	}
	var scratch []byte
	keyStart := 0
	err := s.objectKeys(0, func(start int) { keyStart = start }, func(key []byte, escaped bool) error {
		if escaped {
			k, err := unescape(scratch[:0], key)
			if err != nil {
				return &SyntaxError{Offset: s.i, Msg: "invalid escape in key"}
			}
			scratch, key = k, k
		}
		vs := s.i
		if err := s.value(1); err != nil {
			return err
		}
		return fn(Member{Key: key, Start: keyStart, ValueStart: vs, End: s.i})
	})
	if err != nil {
		return err
	}
	return s.end()
}

// objectKeys is object with a callback (if not nil) at each key's opening
// quote.
func (s *scanner) objectKeys(depth int, atKey func(int), fn func(key []byte, escaped bool) error) error {
	if depth >= MaxDepth {
		return s.errf("JSON nested too deeply")
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.errf("expected a string key")
		}
		if atKey != nil {
			atKey(s.i)
		}
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.errf("expected ':' after object key")
		}
		s.i++
		s.ws()
		if s.i >= len(s.b) {
			return s.errf("unexpected end of JSON")
		}
		if err := fn(key, escaped); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.errf("unexpected end of JSON in object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errf("expected ',' or '}' in object")
		}
	}
}

// AppendWithout appends body to dst without the top-level members whose
// key drop reports; each kept member keeps its bytes. body must be a
// JSON object.
func AppendWithout(dst, body []byte, drop func(key []byte) bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, '{')
	first := true
	err := Members(body, func(m Member) error {
		if drop(m.Key) {
			return nil
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, body[m.Start:m.End]...)
		return nil
	})
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '}'), nil
}
