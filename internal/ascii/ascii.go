// Package ascii holds the byte-level text helpers of protocol tokens,
// none of which allocates: it compares header names, class names and
// other tokens without regard to the case of their ASCII letters (the
// request path matches header names this way on every answer, where
// strings.EqualFold's Unicode folding and a conversion to string would
// cost a call and an allocation each), and reads a run of decimal digits
// (ParseDigits), which strconv would want as a string.
package ascii

// EqualFold reports whether b equals s ignoring the case of b's ASCII
// letters. s must be lower case (every caller passes a literal).
func EqualFold(b []byte, s string) bool {
	return len(b) == len(s) && HasPrefixFold(b, s)
}

// HasPrefixFold reports whether b begins with prefix ignoring the case of
// b's ASCII letters. prefix must be lower case.
func HasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}
