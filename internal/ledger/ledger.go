// Package ledger holds the pure parts of the pre-request token budget:
// estimating what a request may cost before it is sent, and reading what
// it really cost from the provider's usage report. The windows the
// estimate is reserved in are internal/rolling's.
//
// Reserve-then-settle beats charging after completion: concurrent requests
// see each other's reservations, so fifty requests started in the same
// millisecond cannot together overshoot a per-minute budget.
package ledger

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
)

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

// Usage is the provider's token report the ledger settles: the dialect
// table's one form (internal/dialect), whose Tokens the budget counts.
// The report is read by the table's parser (dialect.ParseUsage), the only
// one; this name stays for the settlement's callers.
type Usage = dialect.Usage
