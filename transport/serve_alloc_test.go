//go:build !race

package transport

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestServeKeepsRequestIDOnStack: serving a request allocates nothing for
// its request id. The id is built in a buffer on serve's stack; an
// operator handler that let its id escape (through the ops Edge
// interface) once moved that buffer to the heap on every request, model
// calls included. GET / is served with no other allocation, so any is the
// id's.
func TestServeKeepsRequestIDOnStack(t *testing.T) {
	g := allocGateway(t)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/")
	ctx.Request.Header.SetHost("127.0.0.1:20128")
	g.serve(&ctx, nil) // first use: the status's counter is created
	allocs := testing.AllocsPerRun(1000, func() {
		ctx.Response.Reset() // as fasthttp does between requests
		g.serve(&ctx, nil)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("GET / answered %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	})
	if allocs != 0 {
		t.Fatalf("serving GET / allocates %v times per request", allocs)
	}
}
