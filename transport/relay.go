package transport

import (
	"io"
	"time"

	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/stream"
	"github.com/omniroute/gateway/transport/upstream"
)

// The relay stage (package transport/stream): the committed stream, its
// start-up events held back, then relayed event by event. This file is
// its glue: the dispatch loop's steps (prime, commitStream), the call as
// fasthttp's body writer (the stream's writer has to be the call, which
// Close finishes), and the call's side of the stage's port
// (stream.Request).

// prime reads a streaming answer up to its first content event
// (stream.State.HoldStartup), so that an error that arrives right after
// the start-up events still fails over instead of reaching the caller.
// Nothing has been written to the caller yet.
func (c *call) prime(x *upstream.Exchange) (messages.FailureClass, bool) {
	ev, err := c.stream.HoldStartup(c, &c.att, x, 0, true)
	switch {
	case err != nil:
		return stream.Classify(x, err), false
	case ev != nil:
		c.plan.Verdict = failure.AnalyzeEvent(ev.Data)
		return c.plan.Verdict.Class, false
	}
	return messages.OK, true
}

// commitStream writes the status and headers (stream.State.Commit, then
// routed) and hands the body to the relay (c.WriteTo), which fasthttp
// runs after the handler returns, each upstream read given idle. src is
// the stream's source when it is not a target (the Bifrost relay,
// transport/relayroute): it names itself in place of the target headers
// and words the frame of a break; nil for a target's stream.
func (c *call) commitStream(x *upstream.Exchange, idle time.Duration, src relayroute.Source) {
	c.stream.Commit(c.ctx, x, idle, src)
	c.routed(x, src)
	c.ctx.SetBodyStream(c, -1)
	c.bodyDone()
}

// routed writes the headers that name the answer's source: by's, or the
// target's routing and answer headers when by is nil. A source that is
// not a target is declared by the relay's port (relayroute.Routed, and
// relayroute.Source for a stream's), the only such source.
func (c *call) routed(x *upstream.Exchange, by relayroute.Routed) {
	h := &c.ctx.Response.Header
	if by != nil {
		by.RoutedBy(h, x)
		return
	}
	c.routingHeaders()
	c.att.AnswerHeaders(h)
}

// Read satisfies io.Reader for fasthttp's body stream; the relay is always
// driven through WriteTo.
func (c *call) Read([]byte) (int, error) { return 0, io.EOF }

// SupportsBodyWriteTo tells fasthttp to call WriteTo directly with its
// chunked writer, which flushes after every Write: one Write per SSE event
// gives one HTTP chunk per event and no extra goroutine.
func (c *call) SupportsBodyWriteTo() bool { return true }

// WriteTo relays the stream (stream.State.Relay) through the caller's
// deadline writer. fasthttp runs it after the handler returned, so it
// recovers its own panics (panic.go).
func (c *call) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.streamPanic(p)
		}
	}()
	edge.ProbePanic("stream")
	s := &c.stream
	return s.Relay(c, &c.att, c.g.edge.StreamWriter(s.Writer(), c.ctx, c.host != nil, w, s.Exchange().Deadline()))
}

// Close ends the call; fasthttp calls it once after WriteTo (or instead of
// it when the response could not be written).
func (c *call) Close() error {
	if c.stream.CloseOnce() {
		defer func() {
			if p := recover(); p != nil {
				c.closePanic(p)
			}
		}()
		c.finish()
	}
	return nil
}

// CallerDialect is the caller's API's dialect (stream.Request).
func (c *call) CallerDialect() *dia.Dialect { return dia.Of(dia.ID(c.surface)) }

// Redact redacts a provider's error event (stream.Request).
func (c *call) Redact(b []byte) []byte { return c.g.redact.Bytes(b) }

// CancelUpstream cancels the upstream exchange (stream.Request).
func (c *call) CancelUpstream() { c.cancel.Cancel() }

// Relayed counts the events a stream wrote (stream.Request).
func (c *call) Relayed(events int) { c.g.metrics.routes[c.route].events.Add(events) }

// CountCut counts a stream broken after the commit (stream.Request).
func (c *call) CountCut() { c.g.metrics.routes[c.route].cut.Inc() }

// ReportMidStream reports a target's stream broken after the commit
// (stream.Request).
func (c *call) ReportMidStream(class messages.FailureClass) { c.reportMidStream(class) }
