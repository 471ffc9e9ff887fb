package transport

import (
	"fmt"
	"runtime/debug"

	"github.com/omniroute/gateway/transport/edge"
)

// The pipeline's part of panic recovery (the edge recovers the handler and
// answers 500, edge/panic.go): a call gives back what it holds before the
// edge answers, and a stream's panic is contained where fasthttp writes
// it.

// notePanic logs and counts a recovered panic.
func (g *Gateway) notePanic(r edge.Route, rid string, where string, p any) {
	value, stack := edge.Recovered(p)
	g.metrics.routes[r].panics.Inc()
	g.log.Error("panic while serving a request; the request failed, the gateway keeps running",
		"requestId", rid, "route", r.String(), "where", where, "panic", fmt.Sprint(value), "stack", string(stack))
}

// abandonOnPanic runs deferred in the handler that owns a call. On a
// panic it gives back what the call holds (so an ingest or lane lease
// cannot leak), takes the call out of circulation (its state may be
// inconsistent: it is not returned to the pool) and re-panics for the
// edge's guard, which answers the caller.
func (c *call) abandonOnPanic() {
	p := recover()
	if p == nil {
		return
	}
	if _, ok := p.(*edge.RequestPanic); !ok {
		p = &edge.RequestPanic{Value: p, Stack: debug.Stack()}
	}
	c.stream.MarkClosed() // a body stream set before the panic must not finish the call again
	c.life.panicked = true
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
	return edge.ErrStreamPanic
}

// closePanic recovers a panic of a body stream's Close (the call's finish).
func (c *call) closePanic(p any) {
	c.g.notePanic(c.route, string(c.rid), "close", p)
}
