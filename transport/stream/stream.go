// Package stream is the relay stage of the request pipeline: the
// committed stream. It holds back a stream's content-free start-up events
// until its first content event (so an error right after them still fails
// over), commits the answer's status and headers, and relays the held
// events and then every upstream event as it arrives, each one write (one
// HTTP chunk), metered, translated or renamed by the attempt that opened
// the stream, a provider's own error event redacted; a stream that breaks
// after the commit ends with an in-band error frame.
//
// State is one request's, a field of the pipeline's call (call.stream);
// nothing of the stage is process-wide but the redactor, which it reaches
// through its port, so it has no Stage. The stage reaches the rest of the
// request through the port it declares, Request, which transport's call
// implements (transport/relay.go, where the call stays fasthttp's body
// writer). It imports one other stage, the attempt's: a stream is the
// attempt's answer, and each of its events is metered, translated and
// renamed by the attempt's state (attempt.State) with no port between
// them on the path of every event. The Bifrost relay's stream
// (transport/relayroute) commits and is relayed through the same State,
// its source (Source) naming itself and wording its own frame.
package stream

import (
	"bytes"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/upstream"
)

// Limits on what a stream may hold back before committing to a target.
const (
	maxHeldEvents = 8
	maxHeldBytes  = 64 << 10
)

// Request is the stage's port on the request whose stream it relays (the
// pipeline's call implements it): what it needs of the call besides its
// own state and the attempt's.
type Request interface {
	// attempt.Request is the attempt stage's port, through which a
	// stream's events are metered; its RequestID names the request in
	// translated events and interrupt frames.
	attempt.Request
	// CallerDialect is the dialect of the caller's API: the frame of an
	// interrupt, the event that announces a Responses stream's id.
	CallerDialect() *dia.Dialect
	// Redact removes secrets from a provider's own error event before it
	// is passed on.
	Redact(b []byte) []byte
	// CancelUpstream cancels the upstream exchange: the caller's write
	// failed, nobody reads the rest.
	CancelUpstream()
	// Relayed counts the events a stream wrote to the caller, once,
	// however it ended.
	Relayed(events int)
	// CountCut counts a stream that broke after the commit.
	CountCut()
	// ReportMidStream reports the failure of a target's stream after the
	// commit against the target (the attempt was counted a success).
	ReportMidStream(class messages.FailureClass)
}

// Source is a committed stream's source when it is not a target (the
// Bifrost relay's, relayroute.Source): the frame the relay loop writes
// when the stream breaks after the commit (class; eof: it ended without
// its final event), having counted the cut; the source words it and does
// what a break means for it.
type Source interface {
	Interrupt(buf []byte, class messages.FailureClass, eof bool, rid string) []byte
}

// State is the relay stage's state: the committed exchange and its event
// reader, the events held back before the commit (pending, ended at the
// offsets pendOff), whether the terminal event was read, the idle limit,
// the body stream's close-once flag, a Responses stream's id (for its
// interrupt frame), the caller's deadline writer, and whether the stream
// was cut short, and its source when it is not a target.
type State struct {
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
	src      Source // the source when it is not a target (Commit), else nil
}

// Recycle gives the exchange back and returns the state for the next
// call, keeping the reader and the hold buffers.
func (s *State) Recycle() State {
	if s.x != nil {
		s.x.Release()
	}
	return State{rd: s.rd, pending: s.pending[:0], pendOff: s.pendOff[:0]}
}

// Exchange is the committed exchange (nil before the commit); the call
// releases it when it ends (Recycle).
func (s *State) Exchange() *upstream.Exchange { return s.x }

// Writer is the stream's deadline writer, for the edge to set up
// (edge.Edge.StreamWriter) when fasthttp starts the body.
func (s *State) Writer() *edge.DeadlineWriter { return &s.dw }

// Terminal reports whether the stream's final event was read.
func (s *State) Terminal() bool { return s.terminal }

// Cut reports whether a target's stream broke after the commit.
func (s *State) Cut() bool { return s.cut }

// CloseOnce reports true the first time it is called: the body stream's
// Close finishes the call once.
func (s *State) CloseOnce() bool { return s.closing.CompareAndSwap(false, true) }

// MarkClosed keeps a body stream set before a panic from finishing the
// call again: the panic guard finishes it.
func (s *State) MarkClosed() { s.closing.Store(true) }

// Classify is the failure class of a stream's read error.
func Classify(x *upstream.Exchange, err error) messages.FailureClass {
	return attempt.Classify(x.Classify(err))
}

// HoldStartup reads the stream of x up to its first content event,
// holding back content-free start-up events (Anthropic message_start,
// ping and content_block_start; Responses response.created, in_progress
// and the empty output item and part; a role-only chat delta), at most
// maxHeldEvents and maxHeldBytes of them. With idle set, each read has
// that long. An error event ends it: with failover it is returned
// unheld (the native path fails over on it), else it is held to be passed
// on (the Bifrost relay's). It returns the read error, if any. The native
// path and the Bifrost relay both commit through it.
func (s *State) HoldStartup(r Request, att *attempt.State, x *upstream.Exchange, idle time.Duration, failover bool) (*sse.Event, error) {
	s.rd.Reset(x.Body())
	s.pending, s.pendOff, s.terminal = s.pending[:0], s.pendOff[:0], false
	var ar attempt.Request = r // converted once, not per event
	for n := 0; ; n++ {
		if idle > 0 {
			x.SetReadDeadline(time.Now().Add(idle))
		}
		ev, err := s.rd.Next()
		if err != nil {
			return nil, err
		}
		isErr := isErrorEvent(att, ev)
		if isErr && failover {
			return ev, nil
		}
		if att.MeterEvent(ar, ev) {
			continue // the usage-only chunk the caller did not ask for
		}
		s.hold(r, att, ev)
		if isTerminal(att, ev) {
			s.terminal = true
			return nil, nil
		}
		if isErr || !isStartup(att, ev) || n+1 >= maxHeldEvents || len(s.pending) >= maxHeldBytes {
			return nil, nil
		}
	}
}

func (s *State) hold(r Request, att *attempt.State, ev *sse.Event) {
	if att.Translating() {
		if out := s.translate(att, ev, r.RequestID()); len(out) > 0 {
			s.pending = append(s.pending, out...)
			s.pendOff = append(s.pendOff, len(s.pending))
		}
		return
	}
	raw := ev.Raw
	if isErrorEvent(att, ev) { // the provider's own error event, passed on: redacted
		raw = r.Redact(raw)
	} else {
		raw = att.Renamed(raw)
	}
	s.pending = append(s.pending, raw...)
	s.pendOff = append(s.pendOff, len(s.pending))
	if len(s.respID) == 0 && r.CallerDialect().AnnouncesID(ev) {
		s.respID = append(s.respID[:0], jsonStringField(ev.Data, `"id":"`)...)
	}
}

// translate converts one upstream stream event into the caller's frames
// (attempt.State.TranslateEvent); a stream the translator cannot read
// ends there.
func (s *State) translate(att *attempt.State, ev *sse.Event, rid []byte) []byte {
	out, cut := att.TranslateEvent(ev, rid)
	if cut {
		s.terminal = true
	}
	return out
}

// Commit writes the answer's status and headers for a stream (the
// upstream's, filtered, as an event stream that no proxy buffers) and
// keeps x for the relay, each upstream read given idle. src is the
// stream's source when it is not a target (the Bifrost relay's), which
// words the frame of a break; nil for a target's stream. The headers that
// name the answer's source are the pipeline's to write after it.
func (s *State) Commit(ctx *fasthttp.RequestCtx, x *upstream.Exchange, idle time.Duration, src Source) {
	ctx.SetStatusCode(x.Resp.StatusCode())
	attempt.CopyResponseHeaders(&ctx.Response.Header, &x.Resp.Header)
	ctx.Response.Header.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	if up := x.Resp.Header.Peek("X-Request-Id"); len(up) > 0 {
		ctx.Response.Header.SetBytesV("X-Upstream-Request-Id", up)
	}
	s.x, s.src = x, src // x is released by Recycle
	s.idle = idle
}

// isTerminal, isErrorEvent and isStartup read the upstream dialect's
// stream grammar from the table: the event that completes a stream, an
// in-stream error sent by the provider, a content-free event that may be
// held back.
func isTerminal(att *attempt.State, ev *sse.Event) bool   { return att.Dialect().IsTerminal(ev) }
func isErrorEvent(att *attempt.State, ev *sse.Event) bool { return att.Dialect().IsError(ev) }
func isStartup(att *attempt.State, ev *sse.Event) bool    { return att.Dialect().IsStartup(ev) }

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
