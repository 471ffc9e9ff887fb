package transport

import (
	"bytes"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/relayroute"
	"github.com/omniroute/gateway/transport/upstream"
)

// Limits on what a stream may hold back before committing to a target.
const (
	maxHeldEvents = 8
	maxHeldBytes  = 64 << 10
)

// prime reads a streaming answer up to its first content event
// (holdStartup), so that an error that arrives right after the start-up
// events still fails over instead of reaching the caller. Nothing has
// been written to the caller yet.
func (c *call) prime(x *upstream.Exchange) (messages.FailureClass, bool) {
	ev, err := c.holdStartup(x, 0, true)
	switch {
	case err != nil:
		return classifyStreamError(x, err), false
	case ev != nil:
		c.plan.Verdict = failure.AnalyzeEvent(ev.Data)
		return c.plan.Verdict.Class, false
	}
	return messages.OK, true
}

// holdStartup reads the stream of x up to its first content event,
// holding back content-free start-up events (Anthropic message_start,
// ping and content_block_start; Responses response.created, in_progress
// and the empty output item and part; a role-only chat delta), at most
// maxHeldEvents and maxHeldBytes of them. With idle set, each read has
// that long. An error event ends it: with failover it is returned
// unheld (the native path fails over on it), else it is held to be passed
// on (the Bifrost relay's). It returns the read error, if any. The native
// path and the Bifrost relay both commit through it.
func (c *call) holdStartup(x *upstream.Exchange, idle time.Duration, failover bool) (*sse.Event, error) {
	s := &c.stream
	s.rd.Reset(x.Body())
	s.pending, s.pendOff, s.terminal = s.pending[:0], s.pendOff[:0], false
	for n := 0; ; n++ {
		if idle > 0 {
			x.SetReadDeadline(time.Now().Add(idle))
		}
		ev, err := s.rd.Next()
		if err != nil {
			return nil, err
		}
		isErr := c.isErrorEvent(ev)
		if isErr && failover {
			return ev, nil
		}
		if c.att.MeterEvent(c, ev) {
			continue // the usage-only chunk the caller did not ask for
		}
		c.hold(ev)
		if c.isTerminal(ev) {
			s.terminal = true
			return nil, nil
		}
		if isErr || !c.isStartup(ev) || n+1 >= maxHeldEvents || len(s.pending) >= maxHeldBytes {
			return nil, nil
		}
	}
}

func (c *call) hold(ev *sse.Event) {
	if c.att.Translating() {
		if out := c.translateEvent(ev); len(out) > 0 {
			c.stream.pending = append(c.stream.pending, out...)
			c.stream.pendOff = append(c.stream.pendOff, len(c.stream.pending))
		}
		return
	}
	raw := ev.Raw
	if c.isErrorEvent(ev) { // the provider's own error event, passed on: redacted
		raw = c.g.redact.Bytes(raw)
	} else {
		raw = c.att.Renamed(raw)
	}
	c.stream.pending = append(c.stream.pending, raw...)
	c.stream.pendOff = append(c.stream.pendOff, len(c.stream.pending))
	if len(c.stream.respID) == 0 && dia.Of(dia.ID(c.surface)).AnnouncesID(ev) {
		c.stream.respID = append(c.stream.respID[:0], jsonStringField(ev.Data, `"id":"`)...)
	}
}

func classifyStreamError(x *upstream.Exchange, err error) messages.FailureClass {
	return attempt.Classify(x.Classify(err))
}

// commitStream writes the status and headers and hands the body to the
// relay (c.WriteTo), which fasthttp runs after the handler returns, each
// upstream read given idle. src is the stream's source when it is not a
// target (the Bifrost relay, transport/relayroute): it names itself in
// place of the target headers and words the frame of a break; nil for a
// target's stream.
func (c *call) commitStream(x *upstream.Exchange, idle time.Duration, src relayroute.Source) {
	ctx := c.ctx
	ctx.SetStatusCode(x.Resp.StatusCode())
	attempt.CopyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		ctx.Response.Header.SetBytesV("X-Upstream-Request-Id", up)
	}
	c.routed(x, src)
	c.stream.x, c.stream.src = x, src // x is released by finish
	c.stream.idle = idle
	ctx.SetBodyStream(c, -1)
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

// WriteTo relays the stream: the held events, then every upstream event as
// it arrives. An upstream failure after the commit ends the stream with an
// in-band error the official SDKs report; a caller write failure cancels
// the upstream exchange. fasthttp runs it after the handler returned, so
// it recovers its own panics (panic.go).
func (c *call) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.streamPanic(p)
		}
	}()
	edge.ProbePanic("stream")
	return c.relay(c.g.edge.StreamWriter(&c.stream.dw, c.ctx, c.host != nil, w, c.stream.x.Deadline()))
}

// relay is the one relay loop of every committed stream, a target's or
// the Bifrost relay's: the held events, then every upstream event as it
// arrives, metered, translated or renamed, and redacted when it is the
// provider's own error event; an upstream that ends without its final
// event after a finish reason gets the done marker it forgot, any other
// break the source's in-band error frame (interrupt). The events written
// are counted once, however it ends.
func (c *call) relay(w io.Writer) (int64, error) {
	total, err := c.writeHeld(w)
	if err != nil {
		return total, err
	}
	total, events, err := c.relayEvents(w, total)
	c.g.metrics.routes[c.route].events.Add(len(c.stream.pendOff) + events)
	return total, err
}

// relayEvents relays the events after the held ones, returning the
// bytes written in all (from total) and how many events it wrote.
func (c *call) relayEvents(w io.Writer, total int64) (int64, int, error) {
	x := c.stream.x
	events := 0
	// Some OpenAI-compatible servers end without [DONE]: the done
	// marker is supplied when a finish reason was seen, held or relayed.
	doneSentinel := c.att.Dialect().DoneSentinel
	sawFinish := doneSentinel && bytes.Contains(c.stream.pending, finishReasonSet)
	var lastArm time.Time
	for !c.stream.terminal {
		now := time.Now()
		if now.Sub(lastArm) > 100*time.Millisecond {
			x.SetReadDeadline(now.Add(c.stream.idle))
			lastArm = now
		}
		ev, err := c.stream.rd.Next()
		if err != nil {
			if err == io.EOF && c.att.Translating() {
				if out, ok := c.att.End(); ok {
					n, werr := w.Write(out)
					x.MarkEOF()
					return total + int64(n), events, werr
				}
			} else if err == io.EOF && sawFinish {
				n, werr := w.Write(dia.DoneFrame)
				x.MarkEOF()
				return total + int64(n), events, werr
			}
			n, werr := c.interrupt(w, x, err, len(c.stream.pendOff)+events)
			return total + int64(n), events, werr
		}
		if c.att.MeterEvent(c, ev) {
			continue // the usage-only chunk the caller did not ask for
		}
		raw, isErr := ev.Raw, c.isErrorEvent(ev)
		if c.att.Translating() {
			if isErr {
				ev.Data = c.g.redact.Bytes(ev.Data)
			}
			if raw = c.translateEvent(ev); len(raw) == 0 {
				if isErr || c.isTerminal(ev) {
					c.stream.terminal = true
				}
				continue // nothing for the caller (an empty write would end the chunked body)
			}
		} else if isErr { // the provider's own error event, passed on: redacted
			raw = c.g.redact.Bytes(raw)
		} else {
			raw = c.att.Renamed(raw)
		}
		n, werr := w.Write(raw)
		total += int64(n)
		if werr != nil {
			c.cancel.Cancel()
			return total, events, werr
		}
		events++
		if !sawFinish && doneSentinel && bytes.Contains(ev.Data, finishReasonSet) {
			sawFinish = true
		}
		if isErr || c.isTerminal(ev) {
			c.stream.terminal = true
		}
	}
	c.drain(x)
	return total, events, nil
}

// writeHeld writes the events held back before the commit, one write
// (one HTTP chunk) each; a failed write cancels the upstream exchange.
func (c *call) writeHeld(w io.Writer) (int64, error) {
	var total int64
	prev := 0
	for _, off := range c.stream.pendOff {
		n, err := w.Write(c.stream.pending[prev:off])
		total += int64(n)
		if err != nil {
			c.cancel.Cancel()
			return total, err
		}
		prev = off
	}
	return total, nil
}

var finishReasonSet = []byte(`"finish_reason":"`)

// drain reads what follows the terminal event (normally just the end of
// the chunked body) so the upstream connection can be reused.
func (c *call) drain(x *upstream.Exchange) {
	x.SetReadDeadline(time.Now().Add(time.Second))
	for i := 0; i < 4; i++ {
		if _, err := c.stream.rd.Next(); err != nil {
			if err == io.EOF {
				x.MarkEOF()
			}
			return
		}
	}
}

// Close ends the call; fasthttp calls it once after WriteTo (or instead of
// it when the response could not be written).
func (c *call) Close() error {
	if c.stream.closing.CompareAndSwap(false, true) {
		defer func() {
			if p := recover(); p != nil {
				c.closePanic(p)
			}
		}()
		c.finish()
	}
	return nil
}

// interrupt writes the in-band error frame after an upstream failure
// mid-stream: the source's (the Bifrost relay's), or, for a target's
// stream, the surface's, the failure reported against the target. seq is
// the number of events already relayed.
func (c *call) interrupt(w io.Writer, x *upstream.Exchange, err error, seq int) (int, error) {
	class := classifyStreamError(x, err)
	if class == messages.Canceled {
		return 0, nil // the caller is gone; nobody to tell
	}
	c.g.metrics.routes[c.route].cut.Inc()
	buf := make([]byte, 0, 512)
	if src := c.stream.src; src != nil {
		return w.Write(src.Interrupt(buf, class, err == io.EOF, string(c.rid)))
	}
	c.stream.cut = true
	c.reportMidStream(class)
	msg := "the upstream provider ended the stream before completing it; the answer is incomplete, retry the request"
	switch {
	case class == messages.Timeout && !time.Now().Before(x.Deadline()):
		msg = "the stream reached its time limit (OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS, or the caller's own deadline) and was cut off; the answer is incomplete"
	case class == messages.Timeout:
		msg = "the upstream provider sent no data for " + strconv.FormatInt(int64(c.stream.idle/time.Second), 10) + "s; the answer is incomplete, retry the request"
	case class == messages.Protocol:
		msg = "the upstream provider sent an event larger than the gateway accepts; the answer is incomplete"
	}
	e := apierror.New(apierror.CodeStreamInterrupted, msg)
	if c.att.Translating() {
		return w.Write(c.att.Interrupt(buf, e, c.rid))
	}
	pos := dia.StreamPosition{Seq: seq, ResponseID: c.stream.respID}
	return w.Write(dia.Of(dia.ID(c.surface)).AppendInterrupt(buf, e, string(c.rid), pos))
}

// isTerminal, isErrorEvent and isStartup read the upstream dialect's
// stream grammar from the table: the event that completes a stream, an
// in-stream error sent by the provider, a content-free event that may be
// held back.
func (c *call) isTerminal(ev *sse.Event) bool   { return c.att.Dialect().IsTerminal(ev) }
func (c *call) isErrorEvent(ev *sse.Event) bool { return c.att.Dialect().IsError(ev) }
func (c *call) isStartup(ev *sse.Event) bool    { return c.att.Dialect().IsStartup(ev) }

// jsonStringField returns the raw string value after key (e.g. `"id":"`),
// up to the closing quote, without unescaping.
func jsonStringField(d []byte, key string) []byte {
	i := bytes.Index(d, []byte(key))
	if i < 0 {
		return nil
	}
	d = d[i+len(key):]
	j := bytes.IndexByte(d, '"')
	if j < 0 {
		return nil
	}
	return d[:j]
}

// streamState is the relay stage's state: the committed exchange and its
// event reader, the events held back before the commit (pending, ended
// at the offsets pendOff), whether the terminal event was read, the idle
// limit, the body stream's close-once flag, a Responses stream's id (for
// its interrupt frame), the caller's deadline writer, and whether the
// stream was cut short, and its source when it is not a target.
type streamState struct {
	x        *upstream.Exchange
	rd       sse.Reader
	pending  []byte
	pendOff  []int
	terminal bool
	idle     time.Duration
	closing  atomic.Bool
	respID   []byte
	dw       edge.DeadlineWriter // the stream's writer with its write deadline (edge/deadlines.go)
	cut      bool
	src      relayroute.Source // the source when it is not a target (commitStream), else nil
}

// recycle gives the exchange back and returns the state for the next
// call, keeping the reader and the hold buffers.
func (s *streamState) recycle() streamState {
	if s.x != nil {
		s.x.Release()
	}
	return streamState{rd: s.rd, pending: s.pending[:0], pendOff: s.pendOff[:0]}
}
