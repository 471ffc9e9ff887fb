// Package ledger holds the pure parts of the pre-request token budget:
// estimating what a request may cost before it is sent, and reading what
// it really cost from the provider's usage report. The windows the
// estimate is reserved in are internal/rolling's.
//
// Reserve-then-settle beats charging after completion: concurrent requests
// see each other's reservations, so fifty requests started in the same
// millisecond cannot together overshoot a per-minute budget.
package ledger

import "bytes"

// DefaultOutputTokens is reserved for the answer when the request sets no
// max_tokens.
const DefaultOutputTokens = 1024

// ImageTokens is charged per inline base64 image instead of its bytes
// (a large image costs providers about this many tokens).
const ImageTokens = 1600

// Estimate returns the input and output tokens to reserve for body. Input
// is a quarter token per byte of the body, deliberately conservative (JSON
// punctuation counts too), except inline base64 images, which count
// ImageTokens each; output is maxTokens when positive, else defaultOutput,
// for each of the answers the request asks for (OpenAI's n: 128 answers
// may cost 128 times max_tokens; answers below 1 count as one).
func Estimate(body []byte, maxTokens, answers, defaultOutput int64) (input, output int64) {
	n := int64(len(body))
	images := int64(0)
	marker := []byte(";base64,")
	rest := body
	for {
		i := bytes.Index(rest, marker)
		if i < 0 {
			break
		}
		rest = rest[i+len(marker):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			break
		}
		n -= int64(end)
		images++
		rest = rest[end:]
	}
	input = (n+3)/4 + images*ImageTokens
	output = maxTokens
	if output <= 0 {
		output = defaultOutput
	}
	return input, output * max(answers, 1)
}

// Usage is a provider's token report. Fields hold the latest value seen:
// Anthropic's message_delta usage is cumulative, so later reports replace
// earlier ones instead of adding to them.
type Usage struct {
	Input         int64
	Output        int64
	CacheRead     int64
	CacheCreation int64
	// InputCached is OpenAI's prompt_tokens_details.cached_tokens (Chat)
	// or input_tokens_details.cached_tokens (Responses): cache reads that
	// Input already counts, unlike Anthropic's CacheRead, which it does
	// not. Total leaves it out for that reason.
	InputCached int64
	Seen        bool
}

// Total is what the request consumed against a token budget.
func (u *Usage) Total() int64 { return u.Input + u.CacheRead + u.CacheCreation + u.Output }

// ParseUsage finds the last "usage" object in data (a response body or one
// SSE event) and merges its token counts into u. It reports whether a usage
// object with at least one count was found. OpenAI's prompt_tokens and
// completion_tokens and Anthropic's and the Responses API's input_tokens,
// output_tokens and cache fields are understood; of the nested detail
// objects only OpenAI's cached_tokens is read (into InputCached).
func ParseUsage(data []byte, u *Usage) bool {
	obj := lastUsageObject(data)
	if obj == nil {
		return false
	}
	found := false
	i := 1
	for i < len(obj) {
		i = skipWS(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			break
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return found
		}
		kEnd := stringEnd(obj, i)
		if kEnd < 0 {
			return found
		}
		key := obj[i+1 : kEnd-1]
		i = skipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return found
		}
		i = skipWS(obj, i+1)
		vEnd := valueEnd(obj, i)
		if vEnd < 0 {
			return found
		}
		switch string(key) {
		case "prompt_tokens_details", "input_tokens_details":
			if n, ok := memberInt(obj[i:vEnd], "cached_tokens"); ok {
				u.InputCached = n
			}
		}
		if n, ok := integer(obj[i:vEnd]); ok {
			switch string(key) {
			case "prompt_tokens", "input_tokens":
				u.Input, found = n, true
			case "completion_tokens", "output_tokens":
				u.Output, found = n, true
			case "cache_read_input_tokens":
				u.CacheRead, found = n, true
			case "cache_creation_input_tokens":
				u.CacheCreation, found = n, true
			}
		}
		i = vEnd
	}
	if found {
		u.Seen = true
	}
	return found
}

// memberInt returns the integer member name of the JSON object obj (a
// top-level member: nested objects are skipped whole).
func memberInt(obj []byte, name string) (int64, bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return 0, false
	}
	for i := 1; i < len(obj); {
		i = skipWS(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return 0, false
		}
		if obj[i] == ',' {
			i++
			continue
		}
		kEnd := stringEnd(obj, i)
		if obj[i] != '"' || kEnd < 0 {
			return 0, false
		}
		key := obj[i+1 : kEnd-1]
		i = skipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return 0, false
		}
		i = skipWS(obj, i+1)
		vEnd := valueEnd(obj, i)
		if vEnd < 0 {
			return 0, false
		}
		if string(key) == name {
			return integer(obj[i:vEnd])
		}
		i = vEnd
	}
	return 0, false
}

// lastUsageKey is bytes.LastIndex(data, `"usage"`) without its rolling
// hash: the report is near the end of an answer, and a plain backward
// scan for the quote reaches it in a few dozen bytes (the hash was 40 %
// of ParseUsage).
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
		for p >= 0 && isWS(data[p]) {
			p--
		}
		if p < 0 || (data[p] != '{' && data[p] != ',') {
			continue
		}
		j := skipWS(data, i+len(key))
		if j >= len(data) || data[j] != ':' {
			continue
		}
		j = skipWS(data, j+1)
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

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index after the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
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
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isWS(b[j]) {
		j++
	}
	return j
}

// integer parses a non-negative JSON integer of at most 15 digits.
func integer(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
