package jsonscan

import "bytes"

// AppendReplacingStrings appends doc to dst with the value of every
// member named key whose value is a string replaced by value (a JSON
// string literal, quotes included), at any depth, and returns the count
// replaced. doc must be valid JSON (an answer the provider sent). A
// "key": pattern inside a string is escaped there (\"key\"), so only
// real members match; the byte search makes a document without the key
// cost one scan.
func AppendReplacingStrings(dst, doc []byte, key string, value []byte) ([]byte, int) {
	var buf [64]byte
	pat := append(append(append(buf[:0], '"'), key...), '"')
	n, pos := 0, 0
	for from := 0; ; {
		i := bytes.Index(doc[from:], pat)
		if i < 0 {
			break
		}
		i += from
		from = i + len(pat)
		if escapedAt(doc, i) {
			continue
		}
		j := from
		j = SkipSpace(doc, j)
		if j >= len(doc) || doc[j] != ':' {
			continue
		}
		j = SkipSpace(doc, j+1)
		if j >= len(doc) || doc[j] != '"' {
			continue
		}
		end := StringEnd(doc, j)
		if end < 0 {
			break
		}
		dst = append(dst, doc[pos:j]...)
		dst = append(dst, value...)
		pos, from = end, end
		n++
	}
	return append(dst, doc[pos:]...), n
}

// escapedAt reports whether the byte at i is escaped by an odd run of
// backslashes before it.
func escapedAt(doc []byte, i int) bool {
	k := 0
	for j := i - 1; j >= 0 && doc[j] == '\\'; j-- {
		k++
	}
	return k%2 == 1
}

// StringEnd returns the index after the string literal starting at i
// (doc[i] is its opening quote), or -1 when it does not end.
func StringEnd(doc []byte, i int) int {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space (len(b) when there is none): the one white-space rule
// of every hand-written JSON reader of the gateway (this package's
// scanner, dialect's usage locator, tokenest's walker).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}
