package transport

import (
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/edge"
)

// TimeoutHeader states the caller's deadline in whole milliseconds, for
// clients that do not send the SDKs' X-Stainless-Timeout.
const TimeoutHeader = edge.TimeoutHeader

// readDeadline sets c.deadline from what the caller says it will wait
// (edge.CallerTimeout: X-Stainless-Timeout and x-omniroute-timeout-ms,
// the earlier wins). The request never waits for admission or a cooling
// target past it and is never sent upstream after it. An unreadable
// gateway header is a 400. A step of the entry walk (inference.go),
// before ingest: an unreadable header is refused before the body is
// admitted and read.
func (c *call) readDeadline() bool {
	d, e := edge.CallerTimeout(&c.ctx.Request.Header)
	if e != nil {
		c.fail(e)
		return false
	}
	if d > 0 {
		c.deadline = c.g.clk.Now().Add(d)
	}
	return true
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

func errDeadline(what string) *apierror.Error {
	return apierror.New(apierror.CodeAdmissionDeadline,
		"the request could not be answered within its deadline (X-Stainless-Timeout or x-omniroute-timeout-ms): "+what+"; retry with a longer timeout or later").Retry(1)
}
