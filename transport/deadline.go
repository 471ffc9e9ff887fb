package transport

import (
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/quota"
)

// TimeoutHeader states the caller's deadline in whole milliseconds, for
// clients that do not send the SDKs' X-Stainless-Timeout.
const TimeoutHeader = "X-Omniroute-Timeout-Ms"

// maxCallerTimeout bounds a stated deadline (a day), so an absurd value
// cannot overflow the clock arithmetic.
const maxCallerTimeout = 24 * time.Hour

// readDeadline sets c.deadline from what the caller says it will wait:
// X-Stainless-Timeout (seconds, sent by the official OpenAI and Anthropic
// SDKs) and x-omniroute-timeout-ms; the earlier wins. The request never
// waits for admission or a cooling target past it and is never sent
// upstream after it. An unreadable X-Stainless-Timeout is ignored (it is
// the SDK's header, not ours); an unreadable gateway header is a 400.
func (c *call) readDeadline() bool {
	var d time.Duration
	if v := c.ctx.Request.Header.Peek("X-Stainless-Timeout"); len(v) > 0 {
		if s, ok := quota.ParseSeconds(v); ok && s > 0 {
			d = s
		}
	}
	if v := c.ctx.Request.Header.Peek(TimeoutHeader); len(v) > 0 {
		ms, ok := parseMillis(v)
		if !ok {
			c.fail(errInvalidTimeout)
			return false
		}
		if d == 0 || ms < d {
			d = ms
		}
	}
	if d > 0 {
		c.deadline = c.g.clk.Now().Add(min(d, maxCallerTimeout))
	}
	return true
}

// parseMillis reads a positive whole number of milliseconds.
func parseMillis(v []byte) (time.Duration, bool) {
	if len(v) == 0 || len(v) > 12 {
		return 0, false
	}
	var n int64
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	if n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// remaining is the time left before the caller's deadline at now, and
// whether the caller stated one.
func (c *call) remaining(now time.Time) (time.Duration, bool) {
	if c.deadline.IsZero() {
		return 0, false
	}
	return c.deadline.Sub(now), true
}

// expired reports whether the caller's deadline has passed.
func (c *call) expired() bool {
	left, ok := c.remaining(c.g.clk.Now())
	return ok && left <= 0
}

var errInvalidTimeout = &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_timeout",
	Message: "the x-omniroute-timeout-ms header must be a positive whole number of milliseconds, such as 30000"}

func errDeadline(what string) *apierror.Error {
	return &apierror.Error{Status: 503, Type: "server_error", AnthropicType: "overloaded_error", Code: "admission_deadline", RetryAfter: 1,
		Message: "the request could not be answered within its deadline (X-Stainless-Timeout or x-omniroute-timeout-ms): " + what + "; retry with a longer timeout or later"}
}
