package tenantpolicy

import "fmt"

// ValidPattern checks a model name or glob pattern: 1-128 characters of
// letters, digits and ._:/@+- (the characters of a model name), plus * (any
// run of characters, '/' included) and ? (any one character).
func ValidPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty model pattern; want a name such as gpt-4o or a glob such as claude-*")
	}
	if len(p) > MaxPatternLen {
		return fmt.Errorf("model pattern is %d characters; at most %d", len(p), MaxPatternLen)
	}
	for i := 0; i < len(p); i++ {
		if !patternChar(p[i]) {
			return fmt.Errorf("model pattern %q has %q at %d; want letters, digits, ._:/@+- and the wildcards * and ?", p, p[i], i)
		}
	}
	return nil
}

func patternChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '.', '_', ':', '/', '@', '+', '-', '*', '?':
		return true
	}
	return false
}

// Match reports whether name matches pattern (see ValidPattern), case
// sensitively, without allocating. It is linear in practice: on a mismatch
// it backtracks only to the last star.
func Match(pattern string, name []byte) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case star >= 0:
			mark++
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MatchString is Match for a string name.
func MatchString(pattern, name string) bool {
	// A conversion to []byte in a call argument that does not escape is
	// done on the stack for short names; callers on the hot path use Match.
	return Match(pattern, []byte(name))
}

// IsGlob reports whether p has a wildcard.
func IsGlob(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '*' || p[i] == '?' {
			return true
		}
	}
	return false
}

// LiteralLen is the number of non-wildcard characters of p: the more a
// pattern spells out, the more specific it is.
func LiteralLen(p string) int {
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '*' && p[i] != '?' {
			n++
		}
	}
	return n
}

// MoreSpecific orders patterns for lookup, most specific first: exact
// names before globs, then globs with more literal characters before
// those with fewer, then by text (for a stable order). The price table
// and the model table look a name up in this order.
func MoreSpecific(a, b string) bool {
	ga, gb := IsGlob(a), IsGlob(b)
	if ga != gb {
		return !ga
	}
	if la, lb := LiteralLen(a), LiteralLen(b); la != lb {
		return la > lb
	}
	return a < b
}
