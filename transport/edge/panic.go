package edge

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// A panic while serving one request must not stop the gateway: fasthttp
// runs handlers without recover, so an unguarded panic ends the process and
// every other caller's request and stream with it. Every entry point the
// gateway hands to fasthttp (the handler, the Expect handler, the error
// handler, streaming bodies and hijack handlers) recovers, logs the panic
// with the request id and the stack (Pipeline.Panicked, through the
// redacting logger), counts it in omniroute_request_panics_total, and
// answers 500 internal_error when nothing was written yet, else closes the
// connection.

// RequestPanic carries a recovered panic, with the stack where it
// happened, through a cleanup that re-panics (the pipeline's release of a
// call's leases).
type RequestPanic struct {
	Value any
	Stack []byte
}

func (p *RequestPanic) String() string { return fmt.Sprint(p.Value) }

// Recovered normalises a recovered value: the panic and its stack.
func Recovered(p any) (value any, stack []byte) {
	if rp, ok := p.(*RequestPanic); ok {
		return rp.Value, rp.Stack
	}
	return p, debug.Stack()
}

// handlerPanic answers a request whose handler panicked: 500
// internal_error in the route's dialect, connection closed (the request
// may be half read).
func (e *Edge) handlerPanic(ctx *fasthttp.RequestCtx, r Route, rid []byte, start time.Time, p any) {
	e.pipe.Panicked(r, string(rid), "handler", p)
	ctx.Response.Reset() // closes a body stream the handler may have set
	ctx.Response.Header.SetBytesV("X-Request-Id", rid)
	if routes[r].Dialect == DialectAnthropic {
		SetAnthropicRequestID(&ctx.Response.Header, apierror.Anthropic, rid)
	}
	ctx.SetConnectionClose()
	writeIn(ctx, r, rid, ErrInternal)
	e.pipe.Finished(r, 500, time.Since(start))
}

// ErrStreamPanic ends a body stream whose writer panicked: fasthttp closes
// the connection, which the caller sees as a broken stream.
var ErrStreamPanic = fmt.Errorf("the stream failed inside the gateway (see the panic logged with its request id)")

// panicProbe, when set, runs at the start of every request ("handler") and
// every relayed stream ("stream"): a test sets it to make them panic. It is
// nil in production (one atomic load).
var panicProbe atomic.Pointer[func(where string)]

// ProbePanic runs the test probe, if one is set, at where.
func ProbePanic(where string) { probePanic(where) }

func probePanic(where string) {
	if f := panicProbe.Load(); f != nil {
		(*f)(where)
	}
}

// SetPanicProbe makes requests ("handler") and streams ("stream") run f
// first, so a test can make them panic; the returned func removes it.
func SetPanicProbe(f func(where string)) (restore func()) {
	panicProbe.Store(&f)
	return func() { panicProbe.Store(nil) }
}
