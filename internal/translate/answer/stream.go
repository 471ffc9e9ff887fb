package answer

import (
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Streams translate one upstream event at a time: a decoder for the
// upstream dialect reads the event into IR stream events (the methods of
// stream below: start, partStart, delta, signature, partStop, finish,
// complete, fail), and the encoder for the caller's dialect writes each as
// the caller's frames. At most one part is open at a time. Nothing of the
// answer is buffered except what the caller's grammar repeats at the end
// (a Responses caller's *.done events and response.completed carry the
// full text), a custom tool call's input (whose shape differs), and the
// few ids later frames repeat.

// stream is a Converter's per-stream state.
type stream struct {
	includeUsage bool // the chat caller asked for the usage chunk

	started, done, failed bool
	id, model             []byte // the upstream answer's, copied
	created               int64
	usage                 dialect.Usage
	stop                  ir.StopReason
	stopSeq               []byte
	finished              bool // finish was seen
	sawCall               bool

	// The open part.
	open     ir.Kind
	custom   bool   // the open tool call is to a caller's custom tool
	redacted bool   // the open reasoning part is redacted thinking
	callID   []byte // the open tool call's id
	name     []byte // the open tool call's name
	partID   []byte // the open reasoning part's upstream item id
	acc      []byte // text/arguments of the open part (Responses callers, custom calls)
	sig      []byte // signature of the open reasoning part; a custom call's extracted input
	nParts   int    // parts started

	// Decoder state.
	chatTool     int    // chat upstream: tool_calls index of the open call (-1: none)
	genID        []byte // chat upstream: an id made for a call that came without one
	skipBlock    bool   // Anthropic upstream: inside a block the caller cannot see
	skipItem     bool   // Responses upstream: inside an item the caller cannot see
	summaryParts int    // Responses upstream: summary parts of the open reasoning item

	// Encoder state.
	seq      int    // events written (Responses sequence_number)
	chatCall int    // chat caller: index of the open tool call in tool_calls
	items    []byte // Responses caller: the output items done so far, comma-joined
	respID   []byte // Responses caller: the response id as announced
}

func (s *stream) reset() {
	*s = stream{
		id: s.id[:0], model: s.model[:0], stopSeq: s.stopSeq[:0], callID: s.callID[:0], name: s.name[:0],
		partID: s.partID[:0], acc: s.acc[:0], sig: s.sig[:0], items: s.items[:0], respID: s.respID[:0], genID: s.genID[:0],
		chatTool: -1, chatCall: -1,
	}
}

// Event translates one upstream stream event, appending the caller's
// frames (often exactly one, sometimes none or a few) to dst. An event the
// converter cannot read is an error saying what it could not read; the
// caller then ends the stream with Interrupt. An upstream error event
// becomes the caller's in-band error and ends the stream (Done reports true).
func (t *Converter) Event(dst []byte, ev *sse.Event) ([]byte, error) {
	if t.st.done {
		return dst, nil
	}
	w := ir.Writer{B: dst}
	var err error
	switch t.to {
	case dialect.Chat:
		err = t.decodeChat(&w, ev)
	case dialect.Messages:
		err = t.decodeMessages(&w, ev)
	default:
		err = t.decodeResponses(&w, ev)
	}
	if err != nil {
		return dst, err
	}
	return w.B, nil
}

// End handles the upstream stream ending without its terminal event. A
// chat upstream that already gave its finish_reason is complete (some
// OpenAI-compatible servers omit [DONE]): the caller's closing frames are
// appended and ok is true. Otherwise ok is false and the caller must end
// the stream with Interrupt.
func (t *Converter) End(dst []byte) (out []byte, ok bool) {
	if t.st.done {
		return dst, !t.st.failed
	}
	if t.to == dialect.Chat && t.st.finished {
		w := ir.Writer{B: dst}
		t.complete(&w)
		return w.B, true
	}
	return dst, false
}

// Done reports whether the caller's stream is complete (terminal event or
// in-band error written).
func (t *Converter) Done() bool { return t.st.done }

// Started reports whether the caller has been sent any frame.
func (t *Converter) Started() bool { return t.st.started }

// Usage is the usage reported by the upstream so far.
func (t *Converter) Usage() dialect.Usage { return t.st.usage }

// Interrupt appends the caller's in-band error frames that end a stream
// broken after its first byte (the gateway's own failure: upstream cut,
// idle timeout, unreadable event). rid is the gateway's request id.
func (t *Converter) Interrupt(dst []byte, e *apierror.Error, rid string) []byte {
	if t.st.done {
		return dst
	}
	t.st.done, t.st.failed = true, true
	pos := dialect.StreamPosition{Seq: t.st.seq, ResponseID: t.st.respID}
	t.st.seq += 2
	return dialect.Of(t.from).AppendInterrupt(dst, e, rid, pos)
}

// IR stream events.

// start begins the caller's answer once (decoders call it when the
// upstream announces its answer, or lazily before the first content).
func (t *Converter) start(w *ir.Writer) {
	s := &t.st
	if s.started {
		return
	}
	s.started = true
	switch t.from {
	case dialect.Chat:
		t.chatStart(w)
	case dialect.Messages:
		t.anthropicStart(w)
	default:
		t.responsesStart(w)
	}
}

// partStart opens a part (closing any open one). For a tool call, id and
// name are raw strings; for reasoning, id is the upstream item id.
func (t *Converter) partStart(w *ir.Writer, k ir.Kind, id, name []byte, custom bool) {
	t.start(w)
	s := &t.st
	if s.open != 0 {
		t.partStop(w)
	}
	s.open, s.custom, s.redacted = k, custom, false
	s.acc, s.sig = s.acc[:0], s.sig[:0]
	switch k {
	case ir.KindToolCall:
		s.callID = append(s.callID[:0], id...)
		s.name = append(s.name[:0], name...)
		s.custom = custom || t.isCustom(name)
		s.sawCall = true
	case ir.KindReasoning:
		s.partID = append(s.partID[:0], id...)
	}
	s.nParts++ // the open part is number nParts-1
	switch t.from {
	case dialect.Chat:
		t.chatPartStart(w)
	case dialect.Messages:
		t.anthropicPartStart(w)
	default:
		t.responsesPartStart(w)
	}
}

// delta adds raw string d to the open part of kind k, opening one when
// none of that kind is open.
func (t *Converter) delta(w *ir.Writer, k ir.Kind, d []byte) {
	if len(d) == 0 {
		return
	}
	s := &t.st
	if s.open != k {
		t.partStart(w, k, nil, nil, false)
	}
	switch t.from {
	case dialect.Chat:
		t.chatDelta(w, d)
	case dialect.Messages:
		t.anthropicDelta(w, d)
	default:
		t.responsesDelta(w, d)
	}
}

// signature adds opaque reasoning state (raw string) to the open
// reasoning part. It is written when the part ends, wrapped for the
// caller's dialect (see envelope).
func (t *Converter) signature(sig []byte) {
	s := &t.st
	if s.open == ir.KindReasoning {
		s.sig = append(s.sig, sig...)
	}
}

// partStop closes the open part, if any.
func (t *Converter) partStop(w *ir.Writer) {
	s := &t.st
	if s.open == 0 {
		return
	}
	switch t.from {
	case dialect.Chat:
		t.chatPartStop(w)
	case dialect.Messages:
		t.anthropicPartStop(w)
	default:
		t.responsesPartStop(w)
	}
	s.open = 0
}

// finish records why the model stopped, closing the open part. A chat
// caller sees its finish chunk now; the others at complete.
func (t *Converter) finish(w *ir.Writer, stop ir.StopReason, seq []byte) {
	s := &t.st
	t.start(w)
	t.partStop(w)
	if s.finished {
		return
	}
	s.finished = true
	s.stop = finalStop(stop, s.sawCall)
	s.stopSeq = append(s.stopSeq[:0], seq...)
	if seq == nil {
		s.stopSeq = s.stopSeq[:0:0]
	}
	if t.from == dialect.Chat {
		t.chatFinish(w)
	}
}

// complete ends the caller's stream with its terminal frames.
func (t *Converter) complete(w *ir.Writer) {
	s := &t.st
	if s.done {
		return
	}
	if !s.finished {
		t.finish(w, ir.StopEnd, nil)
	}
	s.done = true
	switch t.from {
	case dialect.Chat:
		t.chatComplete(w)
	case dialect.Messages:
		t.anthropicComplete(w)
	default:
		t.responsesComplete(w)
	}
}

// fail ends the caller's stream with the upstream's in-band error, mapped
// to the caller's vocabulary.
func (t *Converter) fail(w *ir.Writer, e *apierror.Error) {
	s := &t.st
	if s.done {
		return
	}
	s.done, s.failed = true, true
	m := dialect.Of(t.from).MapError(t.to, e)
	switch t.from {
	case dialect.Chat:
		w.B = append(w.B, "data: "...)
		w.B = m.Append(w.B, apierror.OpenAI, "")
		w.B = append(w.B, "\n\n"...)
	case dialect.Messages:
		w.B = append(w.B, "event: error\ndata: "...)
		w.B = m.Append(w.B, apierror.Anthropic, "")
		w.B = append(w.B, "\n\n"...)
	default:
		t.responsesFail(w, m)
	}
}
