package edge

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// StreamBody is the content of a long-lived answer that is not a model's
// (the services' logs stream, package ops): Stream answers with it.
type StreamBody interface {
	// Stream writes to w until the stream ends, the write fails, or
	// stopped reports that the caller hung up or the gateway is draining.
	Stream(w io.Writer, stopped func() bool) (int64, error)
	// Close releases what the stream holds; the edge calls it once.
	Close()
}

// Stream answers ctx with body as a long-lived stream: the hang-up
// watcher and Shutdown end it (it is registered in the in-flight registry
// like an upstream exchange), every write carries the stream's write
// deadline, a panic while it writes is contained (logged and counted on
// the management route), and body is closed once. host is the net/http
// request context behind HTTPHandler, nil on fasthttp.
func (e *Edge) Stream(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, body StreamBody) {
	s := &stream{e: e, rid: string(rid), ctx: ctx, host: host != nil, body: body}
	var conn net.Conn
	if host == nil {
		conn = ctx.Conn()
	}
	s.token = e.inflight.Register(&s.cancel, uint32(ctx.ConnID()), conn, time.Now())
	if host != nil {
		s.stopCtx = context.AfterFunc(host, s.cancel.Cancel)
	}
	ctx.SetBodyStream(s, -1)
}

// cancelFlag is a stream's cancel handle in the in-flight registry: the
// hang-up watcher or Shutdown sets it, the stream reads it between writes.
type cancelFlag struct{ atomic.Bool }

func (c *cancelFlag) Cancel() { c.Store(true) }

// stream is the body of an operator stream: the edge's part (hang-up
// registration, write deadlines, the panic guard) around the content.
type stream struct {
	e       *Edge
	rid     string
	ctx     *fasthttp.RequestCtx // valid while fasthttp writes the body
	host    bool                 // behind net/http: no connection deadlines
	body    StreamBody
	cancel  cancelFlag // set by the hang-up watcher or shutdown
	token   Token
	stopCtx func() bool
	done    bool
}

func (s *stream) Read([]byte) (int, error) { return 0, io.EOF }

// SupportsBodyWriteTo makes fasthttp flush after every Write.
func (s *stream) SupportsBodyWriteTo() bool { return true }

func (s *stream) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.e.pipe.Panicked(Management, s.rid, "stream", p)
			err = ErrStreamPanic
		}
	}()
	return s.body.Stream(s.e.StreamWriter(&DeadlineWriter{}, s.ctx, s.host, w, time.Time{}), s.stopped)
}

// stopped reports that the caller hung up or the gateway is draining.
func (s *stream) stopped() bool { return s.cancel.Load() || s.e.Draining() }

// Close closes the content and unregisters; fasthttp calls it once.
func (s *stream) Close() error {
	if s.done {
		return nil
	}
	s.done = true
	s.body.Close()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.e.inflight.Unregister(s.token)
	return nil
}
