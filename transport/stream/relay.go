package stream

import (
	"bytes"
	"io"
	"strconv"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/upstream"
)

// Relay is the one relay loop of every committed stream, a target's or
// the Bifrost relay's: the held events, then every upstream event as it
// arrives, metered, translated or renamed, and redacted when it is the
// provider's own error event; an upstream that ends without its final
// event after a finish reason gets the done marker it forgot, any other
// break the source's in-band error frame (interrupt). The events written
// are counted once, however it ends. A caller write failure cancels the
// upstream exchange.
func (s *State) Relay(r Request, att *attempt.State, w io.Writer) (int64, error) {
	total, err := s.writeHeld(r, w)
	if err != nil {
		return total, err
	}
	total, events, err := s.relayEvents(r, att, w, total)
	r.Relayed(len(s.pendOff) + events)
	return total, err
}

// relayEvents relays the events after the held ones, returning the
// bytes written in all (from total) and how many events it wrote.
func (s *State) relayEvents(r Request, att *attempt.State, w io.Writer, total int64) (int64, int, error) {
	x := s.x
	events := 0
	var ar attempt.Request = r // converted once, not per event
	rid := r.RequestID()
	// Some OpenAI-compatible servers end without [DONE]: the done
	// marker is supplied when a finish reason was seen, held or relayed.
	doneSentinel := att.Dialect().DoneSentinel
	sawFinish := doneSentinel && bytes.Contains(s.pending, finishReasonSet)
	var lastArm time.Time
	for !s.terminal {
		now := time.Now()
		if now.Sub(lastArm) > 100*time.Millisecond {
			x.SetReadDeadline(now.Add(s.idle))
			lastArm = now
		}
		ev, err := s.rd.Next()
		if err != nil {
			if err == io.EOF && att.Translating() {
				if out, ok := att.End(); ok {
					n, werr := w.Write(out)
					x.MarkEOF()
					return total + int64(n), events, werr
				}
			} else if err == io.EOF && sawFinish {
				n, werr := w.Write(dia.DoneFrame)
				x.MarkEOF()
				return total + int64(n), events, werr
			}
			n, werr := s.interrupt(r, att, w, err, len(s.pendOff)+events)
			return total + int64(n), events, werr
		}
		if att.MeterEvent(ar, ev) {
			continue // the usage-only chunk the caller did not ask for
		}
		raw, isErr := ev.Raw, isErrorEvent(att, ev)
		if att.Translating() {
			if isErr {
				ev.Data = r.Redact(ev.Data)
			}
			if raw = s.translate(att, ev, rid); len(raw) == 0 {
				if isErr || isTerminal(att, ev) {
					s.terminal = true
				}
				continue // nothing for the caller (an empty write would end the chunked body)
			}
		} else if isErr { // the provider's own error event, passed on: redacted
			raw = r.Redact(raw)
		} else {
			raw = att.Renamed(raw)
		}
		n, werr := w.Write(raw)
		total += int64(n)
		if werr != nil {
			r.CancelUpstream()
			return total, events, werr
		}
		events++
		if !sawFinish && doneSentinel && bytes.Contains(ev.Data, finishReasonSet) {
			sawFinish = true
		}
		if isErr || isTerminal(att, ev) {
			s.terminal = true
		}
	}
	s.drain(x)
	return total, events, nil
}

// writeHeld writes the events held back before the commit, one write
// (one HTTP chunk) each; a failed write cancels the upstream exchange.
func (s *State) writeHeld(r Request, w io.Writer) (int64, error) {
	var total int64
	prev := 0
	for _, off := range s.pendOff {
		n, err := w.Write(s.pending[prev:off])
		total += int64(n)
		if err != nil {
			r.CancelUpstream()
			return total, err
		}
		prev = off
	}
	return total, nil
}

var finishReasonSet = []byte(`"finish_reason":"`)

// drain reads what follows the terminal event (normally just the end of
// the chunked body) so the upstream connection can be reused.
func (s *State) drain(x *upstream.Exchange) {
	x.SetReadDeadline(time.Now().Add(time.Second))
	for i := 0; i < 4; i++ {
		if _, err := s.rd.Next(); err != nil {
			if err == io.EOF {
				x.MarkEOF()
			}
			return
		}
	}
}

// interrupt writes the in-band error frame after an upstream failure
// mid-stream: the source's (the Bifrost relay's), or, for a target's
// stream, the surface's, the failure reported against the target. seq is
// the number of events already relayed.
func (s *State) interrupt(r Request, att *attempt.State, w io.Writer, err error, seq int) (int, error) {
	x := s.x
	class := Classify(x, err)
	if class == messages.Canceled {
		return 0, nil // the caller is gone; nobody to tell
	}
	r.CountCut()
	buf := make([]byte, 0, 512)
	rid := r.RequestID()
	if src := s.src; src != nil {
		return w.Write(src.Interrupt(buf, class, err == io.EOF, string(rid)))
	}
	s.cut = true
	r.ReportMidStream(class)
	msg := "the upstream provider ended the stream before completing it; the answer is incomplete, retry the request"
	switch {
	case class == messages.Timeout && !time.Now().Before(x.Deadline()):
		msg = "the stream reached its time limit (OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS, or the caller's own deadline) and was cut off; the answer is incomplete"
	case class == messages.Timeout:
		msg = "the upstream provider sent no data for " + strconv.FormatInt(int64(s.idle/time.Second), 10) + "s; the answer is incomplete, retry the request"
	case class == messages.Protocol:
		msg = "the upstream provider sent an event larger than the gateway accepts; the answer is incomplete"
	}
	e := apierror.New(apierror.CodeStreamInterrupted, msg)
	if att.Translating() {
		return w.Write(att.Interrupt(buf, e, rid))
	}
	pos := dia.StreamPosition{Seq: seq, ResponseID: s.respID}
	return w.Write(r.CallerDialect().AppendInterrupt(buf, e, string(rid), pos))
}
