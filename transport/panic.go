package transport

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/ops"
)

// A panic while serving one request must not stop the gateway: fasthttp
// runs handlers without recover, so an unguarded panic ends the process and
// every other caller's request and stream with it. Every entry point the
// gateway hands to fasthttp (the handler, the Expect handler, the error
// handler, streaming bodies and hijack handlers) recovers, logs the panic
// with the request id and the stack (through the redacting logger), counts
// it in omniroute_request_panics_total, and answers 500 internal_error when
// nothing was written yet, else closes the connection.

// requestPanic carries a recovered panic, with the stack where it
// happened, through a cleanup that re-panics (call.abandonOnPanic).
type requestPanic struct {
	value any
	stack []byte
}

func (p *requestPanic) String() string { return fmt.Sprint(p.value) }

// recovered normalises a recovered value: the panic and its stack.
func recovered(p any) (value any, stack []byte) {
	if rp, ok := p.(*requestPanic); ok {
		return rp.value, rp.stack
	}
	return p, debug.Stack()
}

// notePanic logs and counts a recovered panic.
func (g *Gateway) notePanic(r route, rid string, where string, p any) {
	value, stack := recovered(p)
	g.metrics.routes[r].panics.Inc()
	g.log.Error("panic while serving a request; the request failed, the gateway keeps running",
		"requestId", rid, "route", routes[r].label, "where", where, "panic", fmt.Sprint(value), "stack", string(stack))
}

var errInternal = &apierror.Error{Status: 500, Type: "server_error", AnthropicType: "api_error", Code: "internal_error",
	Message: "the gateway failed while handling this request (logged with its request id); retry, and report it if it persists"}

// handlerPanic answers a request whose handler panicked: 500
// internal_error in the route's dialect, connection closed (the request
// may be half read).
func (g *Gateway) handlerPanic(ctx *fasthttp.RequestCtx, r route, rid []byte, start time.Time, p any) {
	g.notePanic(r, string(rid), "handler", p)
	ctx.Response.Reset() // closes a body stream the handler may have set
	ctx.Response.Header.SetBytesV("X-Request-Id", rid)
	if r == routeMessages {
		setAnthropicRequestID(&ctx.Response.Header, apierror.Anthropic, rid)
	}
	ctx.SetConnectionClose()
	if routes[r].dialect == dialectManagement {
		ops.WriteError(ctx, rid, 500, "", errInternal.Code, errInternal.Message)
	} else {
		writeError(ctx, r.format(), string(rid), errInternal)
	}
	g.metrics.finish(r, 500, time.Since(start))
}

// abandonOnPanic runs deferred in the handler that owns a call. On a
// panic it gives back what the call holds (so an ingest or lane lease
// cannot leak), takes the call out of circulation (its state may be
// inconsistent: it is not returned to the pool) and re-panics for the
// handler's guard, which answers the caller.
func (c *call) abandonOnPanic() {
	p := recover()
	if p == nil {
		return
	}
	if _, ok := p.(*requestPanic); !ok {
		p = &requestPanic{value: p, stack: debug.Stack()}
	}
	c.closing.Store(true) // a body stream set before the panic must not finish the call again
	c.panicked = true
	c.cancel.Cancel()
	func() {
		defer func() {
			if q := recover(); q != nil {
				c.g.log.Error("cleanup after a request panic panicked too; the request's leases may be lost",
					"requestId", string(c.rid), "panic", fmt.Sprint(q))
			}
		}()
		c.settle()
	}()
	panic(p)
}

// streamPanic recovers a panic of a streaming body (WriteTo runs after the
// handler returned, so the status is already sent): it is logged and
// counted, the upstream exchange is cancelled, and the error makes fasthttp
// close the connection, which the caller sees as a broken stream.
func (c *call) streamPanic(p any) error {
	c.g.notePanic(c.route, string(c.rid), "stream", p)
	c.cancel.Cancel()
	return errStreamPanic
}

var errStreamPanic = fmt.Errorf("the stream failed inside the gateway (see the panic logged with its request id)")

// closePanic recovers a panic of a body stream's Close (the call's finish).
func (c *call) closePanic(p any) {
	c.g.notePanic(c.route, string(c.rid), "close", p)
}

// panicProbe, when set, runs at the start of every request ("handler") and
// every relayed stream ("stream"): a test sets it to make them panic. It is
// nil in production (one atomic load).
var panicProbe atomic.Pointer[func(where string)]

func probePanic(where string) {
	if f := panicProbe.Load(); f != nil {
		(*f)(where)
	}
}
