//go:build !race

package transport

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestServeKeepsRequestIDOnStack: the gateway's real front (the edge
// with transport's ports) serves a request with no allocation for its
// request id. An operator handler that let its id escape (through the ops
// Edge interface) once moved serve's id buffer to the heap on every
// request, model calls included; the edge now pools the buffer, and ops
// copies what it keeps. GET / is served with no other allocation, so any
// is the id's.
func TestServeKeepsRequestIDOnStack(t *testing.T) {
	g := allocGateway(t)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/")
	ctx.Request.Header.SetHost("127.0.0.1:20128")
	g.Handler(&ctx) // first use: the status's counter is created
	allocs := testing.AllocsPerRun(1000, func() {
		ctx.Response.Reset() // as fasthttp does between requests
		g.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("GET / answered %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	})
	if allocs != 0 {
		t.Fatalf("serving GET / allocates %v times per request", allocs)
	}
}
