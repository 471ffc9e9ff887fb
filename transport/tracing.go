package transport

import (
	"time"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/limits"
	"github.com/omniroute/gateway/transport/trace"
)

// The request's OpenTelemetry spans are package transport/trace's: this
// file is its glue, the call's thin hooks into it (each returns at once
// while tracing is off: no allocation, no clock read) and its port
// (trace.Request) on the call. Options.TracerProvider nil leaves
// Gateway.tracer without a tracer.

// traceStart opens the request's root span once its model is resolved
// (resolveModel), named for a configured model only (trace.State.Start).
func (c *call) traceStart() { c.trace.Start(&c.g.tracer, c) }

// traceEnd closes the root span with the answer's status and usage; settle
// defers it until the outcome is recorded.
func (c *call) traceEnd() { c.trace.End(c) }

// traceAdmissionWait records a finished admission wait as a child span.
func (c *call) traceAdmissionWait(t *catalog.Target, waited time.Duration) {
	c.trace.AdmissionWait(&c.g.tracer, t, c.lane.Class.String(), waited)
}

// traceAttemptStart opens the span of one upstream attempt; its outcome is
// set by traceAttemptOutcome (report) and it ends with the attempt.
func (c *call) traceAttemptStart(t *catalog.Target) { c.trace.AttemptStart(&c.g.tracer, t, c.surface) }

func (c *call) traceAttemptOutcome(class messages.FailureClass, status int, ttfb time.Duration) {
	c.trace.AttemptOutcome(class, status, ttfb)
}

func (c *call) traceAttemptEnd() { c.trace.AttemptEnd() }

// TraceRoot is what the root span opens with (trace.Request): the model
// as asked bounded like the request log's.
func (c *call) TraceRoot() trace.Root {
	asked := c.scan.Model
	return trace.Root{Surface: c.surface, Model: c.model, Asked: asked[:min(len(asked), limits.MaxLoggedModel)],
		Stream: c.scan.Stream, Route: c.ctx.Path(), RequestID: c.rid, Start: c.start}
}

// TraceOutcome is what the root span closes with (trace.Request).
func (c *call) TraceOutcome() trace.Outcome {
	u := &c.plan.Usage
	return trace.Outcome{Status: c.ctx.Response.StatusCode(), Fallbacks: c.att.Fallbacks, UsageSeen: u.Seen, Input: u.Input, Output: u.Output,
		Target: c.att.Target, Waited: c.lane.Waited, Cut: c.stream.Cut()}
}
