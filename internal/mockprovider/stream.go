package mockprovider

import (
	"errors"
	"io"

	"github.com/valyala/fasthttp"
)

var (
	errClientGone    = errors.New("mockprovider: client closed the connection")
	errServerClosing = errors.New("mockprovider: server shutting down")
	errInjectedReset = errors.New("mockprovider: injected connection reset")
)

// startStream answers 200 with a server-sent-event body. mode is the fault to
// inject (FailNone for a complete stream).
func (q *request) startStream(ctx *fasthttp.RequestCtx, mode string) {
	var plan *streamPlan
	switch {
	case q.r.tool != nil:
		plan = q.r.toolStream(q.ep)
	case q.ep == endpointMessages:
		plan = q.r.messagesStream()
	case q.ep == endpointResponses:
		plan = q.r.responsesStream()
	default:
		plan = q.r.chatStream()
	}
	st := &sseStream{q: *q, plan: plan, mode: mode, limit: len(plan.frames)}
	q.ended = true // ownership of the outcome moves to the stream
	if mode != FailNone {
		st.limit = 0 // a negative AfterChunks fails before the first frame
		if after := q.beh.b.Fail.AfterChunks; after >= 0 {
			st.limit = plan.contentStart + min(after, plan.contentCount)
		}
	}
	q.applyRate(ctx, fasthttp.StatusOK)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeSSE)
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStream(st, -1)
}

// sseStream writes a rendered stream one frame per HTTP chunk. It implements
// fasthttp.BodyWriterTo, so fasthttp hands WriteTo a chunked writer that
// flushes after every Write, on the connection's own goroutine: pacing and
// faults need no extra goroutine, and a departed client shows up as a write
// error (or, during a gap, through the socket peek).
type sseStream struct {
	q     request
	plan  *streamPlan
	mode  string
	limit int // frames sent before the fault (all of them without one)
	next  int
	// afterLimit is set once the frame at limit (the fault's error frame) was
	// produced.
	afterLimit bool
	pending    []byte
}

var _ fasthttp.BodyWriterTo = (*sseStream)(nil)

// SupportsBodyWriteTo lets fasthttp call WriteTo instead of Read.
func (*sseStream) SupportsBodyWriteTo() bool { return true }

// step returns the next frame, nil at a clean end, or the error that ends
// the stream abnormally; last is set on the frame that completes the stream
// (terminal event, error event, or the final frame before a truncation). It
// performs the pacing waits.
func (st *sseStream) step() (frame []byte, last bool, err error) {
	i := st.next
	p := st.plan
	if st.afterLimit || (i >= st.limit && st.mode != FailErrorEvent && st.mode != FailReset) {
		return nil, false, nil
	}
	// The gap precedes every content delta but the first and whatever
	// follows the last one (closing events, or the injected fault).
	gapped := st.q.beh.gap > 0 && i > p.contentStart && i <= p.contentStart+p.contentCount
	if gapped {
		if res := st.q.s.wait(&st.q.watch, st.q.beh.gap, nil, nil); res != waitElapsed {
			return nil, false, waitErr(res)
		}
	} else if st.q.s.isClosing() {
		return nil, false, errServerClosing
	}
	if i < st.limit {
		st.next++
		return p.frames[i], i == st.limit-1 && st.mode != FailErrorEvent && st.mode != FailReset, nil
	}
	if st.mode == FailReset {
		return nil, false, errInjectedReset
	}
	st.afterLimit = true
	return p.errFrame(i), true, nil
}

func waitErr(res waitResult) error {
	if res == waitClosing {
		return errServerClosing
	}
	return errClientGone
}

// WriteTo writes every frame, pacing and injecting the configured fault.
// The outcome is recorded just before the frame that ends the stream is
// written, so anyone who has seen the end of the stream also sees it in the
// stats.
func (st *sseStream) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		frame, last, err := st.step()
		if err != nil {
			st.finish(err)
			return n, err
		}
		if frame == nil {
			st.finish(nil)
			return n, nil
		}
		if last {
			st.finish(nil)
		}
		k, err := w.Write(frame)
		n += int64(k)
		if err != nil {
			st.finish(errClientGone)
			return n, err
		}
	}
}

// Read serves fasthttp paths that cannot use WriteTo; pacing and faults are
// the same, only write errors are not seen (Close then counts the request as
// cancelled if it did not finish).
func (st *sseStream) Read(p []byte) (int, error) {
	for len(st.pending) == 0 {
		frame, last, err := st.step()
		if err != nil {
			st.finish(err)
			return 0, err
		}
		if frame == nil {
			st.finish(nil)
			return 0, io.EOF
		}
		if last {
			st.finish(nil)
		}
		st.pending = frame
	}
	n := copy(p, st.pending)
	st.pending = st.pending[n:]
	return n, nil
}

// Close is called by fasthttp when the response is done with; a stream that
// never finished writing lost its client.
func (st *sseStream) Close() error {
	st.q.end(outcomeCancelled)
	return nil
}

// finish applies the end of the stream: the injected reset and the outcome.
func (st *sseStream) finish(err error) {
	switch {
	case errors.Is(err, errInjectedReset):
		st.q.end(outcomeFailed)
		resetConn(st.q.watch.conn)
	case errors.Is(err, errClientGone):
		st.q.end(outcomeCancelled)
	case err != nil:
		st.q.end(outcomeFailed)
	case st.mode != FailNone:
		st.q.end(outcomeFailed)
	default:
		st.q.end(outcomeCompleted)
	}
}
