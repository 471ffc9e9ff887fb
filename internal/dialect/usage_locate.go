package dialect

import "github.com/omniroute/gateway/internal/jsonscan"

// Finding a usage report in a whole answer or event. The report is near
// the end of an answer, so a backward scan for its key reaches it in a few
// dozen bytes where walking the document from its start (jsonscan.Get)
// costs ten times as much on a short chat answer (BenchmarkBodyUsage).
// These were internal/ledger's when it had a parser of its own; the
// counts are read by ParseUsage alone.

// lastUsageKey is bytes.LastIndex(data, `"usage"`) without its rolling
// hash: the report is near the end of an answer, and a plain backward
// scan for the quote reaches it in a few dozen bytes (the hash was 40 %
// of the old ledger parser).
func lastUsageKey(data []byte) int {
	const key = `"usage"`
	for i := len(data) - len(key); i >= 0; i-- {
		if data[i] == '"' && data[i+1] == 'u' && string(data[i:i+len(key)]) == key {
			return i
		}
	}
	return -1
}

// lastUsageObject returns the last `"usage": {…}` object that is a member
// of an object (preceded by '{' or ','), so a "usage" inside a string is
// never taken for the report.
func lastUsageObject(data []byte) []byte {
	const key = `"usage"`
	end := len(data)
	for {
		i := lastUsageKey(data[:end])
		if i < 0 {
			return nil
		}
		end = i
		p := i - 1
		for p >= 0 && jsonscan.IsSpace(data[p]) {
			p--
		}
		if p < 0 || (data[p] != '{' && data[p] != ',') {
			continue
		}
		j := jsonscan.SkipSpace(data, i+len(key))
		if j >= len(data) || data[j] != ':' {
			continue
		}
		j = jsonscan.SkipSpace(data, j+1)
		if j >= len(data) || data[j] != '{' {
			continue // "usage": null
		}
		k := valueEnd(data, j)
		if k < 0 {
			return nil
		}
		return data[j:k]
	}
}

// valueEnd returns the index after the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return jsonscan.StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := jsonscan.StringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !jsonscan.IsSpace(b[j]) {
		j++
	}
	return j
}
