package dialect

import (
	"bytes"

	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/sse"
)

// Usage is a token report in one normal form for every dialect. The
// dialects disagree on what "input" means (OpenAI's prompt_tokens includes
// cached tokens, Anthropic's input_tokens excludes cache reads and writes),
// so Input here is always the whole prompt and the cache counts are parts
// of it; Output is every generated token and Reasoning the part of it spent
// thinking.
type Usage struct {
	Input      int64 // every prompt token, cached ones included
	Output     int64 // every generated token, reasoning included
	CacheRead  int64 // of Input, read from the prompt cache
	CacheWrite int64 // of Input, written to the prompt cache (Anthropic)
	Reasoning  int64 // of Output, spent on reasoning
	Seen       bool  // a report was found
}

// Ledger converts u to the budget ledger's form, whose Input excludes the
// cache counts (so Total stays Input+Output).
func (u *Usage) Ledger() ledger.Usage {
	return ledger.Usage{Input: u.Input - u.CacheRead - u.CacheWrite, Output: u.Output,
		CacheRead: u.CacheRead, CacheCreation: u.CacheWrite, Seen: u.Seen}
}

var usageKey = []byte(`"usage"`)

// BodyUsage reads the usage report of a non-stream answer body into u.
func (d *Dialect) BodyUsage(body []byte, u *Usage) bool {
	return d.ParseUsage(jsonscan.Get(body, "usage"), u)
}

// EventUsage reads the usage report an event carries into u: the chat
// usage chunk, Anthropic's message_start and cumulative message_delta, the
// Responses terminal response. Later reports replace earlier counts they
// repeat, as the providers' reports are cumulative.
func (d *Dialect) EventUsage(ev *sse.Event, u *Usage) bool {
	if !d.IsUsage(ev) {
		return false
	}
	switch d.ID {
	case Messages:
		if bytes.Equal(ev.Name, []byte("message_start")) {
			return d.ParseUsage(jsonscan.Get(ev.Data, "message", "usage"), u)
		}
		return d.ParseUsage(jsonscan.Get(ev.Data, "usage"), u)
	case Responses:
		return d.ParseUsage(jsonscan.Get(ev.Data, "response", "usage"), u)
	}
	return d.ParseUsage(jsonscan.Get(ev.Data, "usage"), u)
}

// ParseUsage merges the usage object obj (in the dialect's own field names)
// into u. nil or a non-object (e.g. "usage":null) reports false.
func (d *Dialect) ParseUsage(obj []byte, u *Usage) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	var c jsonscan.Cursor
	c.Reset(obj)
	c.Object()
	found := false
	// Anthropic splits the prompt into three counts; a cumulative
	// message_delta may repeat only some of them.
	var in, read, write int64 = -1, -1, -1
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "prompt_tokens", "input_tokens":
			if n, ok := c.Int(); ok {
				in, found = n, true
			}
		case "completion_tokens", "output_tokens":
			if n, ok := c.Int(); ok {
				u.Output, found = n, true
			}
		case "cache_read_input_tokens":
			if n, ok := c.Int(); ok {
				read, found = n, true
			}
		case "cache_creation_input_tokens":
			if n, ok := c.Int(); ok {
				write, found = n, true
			}
		case "prompt_tokens_details", "input_tokens_details":
			if n, ok := detail(&c, "cached_tokens"); ok {
				read, found = n, true
			}
		case "completion_tokens_details", "output_tokens_details":
			if n, ok := detail(&c, "reasoning_tokens"); ok {
				u.Reasoning, found = n, true
			}
		default:
			c.Skip()
		}
	}
	if c.End() != nil {
		return false
	}
	if d.Family == Anthropic {
		if in >= 0 || read >= 0 || write >= 0 {
			base := u.Input - u.CacheRead - u.CacheWrite
			if in >= 0 {
				base = in
			}
			if read >= 0 {
				u.CacheRead = read
			}
			if write >= 0 {
				u.CacheWrite = write
			}
			u.Input = base + u.CacheRead + u.CacheWrite
		}
	} else {
		if in >= 0 {
			u.Input = in
		}
		if read >= 0 {
			u.CacheRead = read
		}
	}
	if found {
		u.Seen = true
	}
	return found
}

// detail reads one integer member of a nested details object (or skips a
// null).
func detail(c *jsonscan.Cursor, key string) (n int64, found bool) {
	if c.Peek() != '{' {
		c.Skip()
		return 0, false
	}
	c.Object()
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if string(k) != key {
			c.Skip()
		} else if v, ok := c.Int(); ok {
			n, found = v, true
		}
	}
	return n, found
}
