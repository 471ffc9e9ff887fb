// Package refproxy is the minimal reference proxy the benchmark compares the
// gateway against: a fasthttp server that forwards every request to one
// upstream through a fasthttp HostClient, buffering JSON answers and
// relaying event streams with one flush per read. It does nothing else (no
// auth, routing, admission or accounting), so its throughput and CPU per
// request are the ceiling for a proxy hop on the machine it runs on.
package refproxy

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// Proxy forwards to one upstream address.
type Proxy struct {
	hc *fasthttp.HostClient
}

// New returns a proxy to upstream (host:port).
func New(upstream string) *Proxy {
	return &Proxy{hc: &fasthttp.HostClient{
		Addr:                          upstream,
		MaxConns:                      2048,
		ReadTimeout:                   5 * time.Minute,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		Dial: func(addr string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", addr)
		},
	}}
}

// Handler serves one request.
func (p *Proxy) Handler(ctx *fasthttp.RequestCtx) {
	req := fasthttp.AcquireRequest()
	ctx.Request.CopyTo(req)
	req.Header.Del("Connection")
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	if err := p.hc.Do(req, resp); err != nil {
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		ctx.Error("upstream: "+err.Error(), fasthttp.StatusBadGateway)
		return
	}
	fasthttp.ReleaseRequest(req)
	ctx.SetStatusCode(resp.StatusCode())
	ctx.Response.Header.SetContentTypeBytes(resp.Header.ContentType())
	body := resp.BodyStream()
	if string(resp.Header.ContentType()) != "text/event-stream" || body == nil {
		b, _ := io.ReadAll(body)
		ctx.SetBody(b)
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		return
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		buf := make([]byte, 16<<10)
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					break
				}
				if w.Flush() != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
	})
}

// Close drops idle upstream connections.
func (p *Proxy) Close() { p.hc.CloseIdleConnections() }
