package dialect

import (
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sse"
)

// Usage is a token report in one normal form for every dialect, and the
// gateway's only one: the meter reads it (transport), the budget ledger
// settles and pricing prices it (ledger.Usage and pricing.Usage are this
// type), the translators carry it between dialects. The dialects disagree
// on what "input" means (OpenAI's prompt_tokens includes cached tokens,
// Anthropic's input_tokens excludes cache reads and writes), so Input here
// is always the whole prompt and the cache counts are parts of it; Output
// is every generated token and Reasoning the part of it spent thinking.
// That is the rule docs/tenants.md states for tokens_in and for the cost:
// OpenAI's cached_tokens and Anthropic's cache reads are Cached, priced as
// cached_input; Anthropic's cache writes are CacheWrite; reasoning is
// priced as reasoning.
type Usage struct {
	Input      int64 // every prompt token, cached ones included
	Output     int64 // every generated token, reasoning included
	Cached     int64 // of Input, read from the prompt cache
	CacheWrite int64 // of Input, written to the prompt cache (Anthropic)
	Reasoning  int64 // of Output, spent on reasoning
	Seen       bool  // a report was found
}

// Tokens is what the request consumed against a token budget or a
// tokens-per-minute limit: the whole prompt and the whole answer (counts
// below zero, which no provider sends, count as zero).
func (u Usage) Tokens() int64 { return max(u.Input, 0) + max(u.Output, 0) }

var usageKey = []byte(`"usage"`)

// BodyUsage reads the usage report of a non-stream answer body into u:
// the last "usage" object that is a member of an object (lastUsageObject).
func (d *Dialect) BodyUsage(body []byte, u *Usage) bool {
	return d.ParseUsage(lastUsageObject(body), u)
}

// EventUsage reads the usage report an event carries into u: the chat
// usage chunk, Anthropic's message_start and cumulative message_delta, the
// Responses terminal response. Later reports replace earlier counts they
// repeat, as the providers' reports are cumulative.
func (d *Dialect) EventUsage(ev *sse.Event, u *Usage) bool {
	if !d.IsUsage(ev) {
		return false
	}
	// Each usage event carries one report (message_start's in message,
	// the Responses terminal's in response), so the last usage object is
	// it, found without walking a terminal event's whole response.
	return d.ParseUsage(lastUsageObject(ev.Data), u)
}

// ParseUsage merges the usage object obj (in the dialect's own field names)
// into u. nil or a non-object (e.g. "usage":null) reports false, and so
// does a malformed object, which leaves u as it was; a negative count is
// not a count.
func (d *Dialect) ParseUsage(obj []byte, dst *Usage) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	v := *dst
	u := &v
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
			if n, ok := c.Int(); ok && countable(n) {
				in, found = n, true
			}
		case "completion_tokens", "output_tokens":
			if n, ok := c.Int(); ok && countable(n) {
				u.Output, found = n, true
			}
		case "cache_read_input_tokens":
			if n, ok := c.Int(); ok && countable(n) {
				read, found = n, true
			}
		case "cache_creation_input_tokens":
			if n, ok := c.Int(); ok && countable(n) {
				write, found = n, true
			}
		case "prompt_tokens_details", "input_tokens_details":
			if n, ok := detail(&c, "cached_tokens"); ok && countable(n) {
				read, found = n, true
			}
		case "completion_tokens_details", "output_tokens_details":
			if n, ok := detail(&c, "reasoning_tokens"); ok && countable(n) {
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
			base := u.Input - u.Cached - u.CacheWrite
			if in >= 0 {
				base = in
			}
			if read >= 0 {
				u.Cached = read
			}
			if write >= 0 {
				u.CacheWrite = write
			}
			u.Input = base + u.Cached + u.CacheWrite
		}
	} else {
		if in >= 0 {
			u.Input = in
		}
		if read >= 0 {
			u.Cached = read
		}
	}
	if found {
		u.Seen = true
		*dst = v
	}
	return found
}

// maxCount bounds a token count: 15 digits, far above any request, low
// enough that the sums over a report (Input plus its cache parts) never
// overflow. A larger number, like a negative one, is not a count.
const maxCount = 999_999_999_999_999

func countable(n int64) bool { return n >= 0 && n <= maxCount }

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
