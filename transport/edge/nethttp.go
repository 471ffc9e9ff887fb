package edge

import (
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// HTTPHandler returns the gateway as a net/http handler, for hosts that
// serve with net/http. Request bodies stream from r.Body; SSE responses are
// flushed per event through http.ResponseController; a client disconnect
// (r.Context) cancels the upstream exchange. The fasthttp Handler is
// faster; this adapter trades some speed for fitting an existing mux.
func (e *Edge) HTTPHandler() http.Handler { return httpAdapter{e} }

type httpAdapter struct{ e *Edge }

func (a httpAdapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req fasthttp.Request
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.RequestURI())
	req.Header.SetHost(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, remoteTCPAddr(r.RemoteAddr), nil)
	if r.Body != nil && r.Body != http.NoBody {
		ctx.Request.SetBodyStream(r.Body, int(r.ContentLength))
	}
	a.e.serve(&ctx, r.Context())

	h := w.Header()
	for k, v := range ctx.Response.Header.All() {
		switch string(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Date", "Server":
			continue
		}
		h.Add(string(k), string(v))
	}
	if ct := ctx.Response.Header.ContentType(); len(ct) > 0 {
		h.Set("Content-Type", string(ct))
	}
	if !ctx.Response.IsBodyStream() {
		body := ctx.Response.Body()
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(ctx.Response.StatusCode())
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(ctx.Response.StatusCode())
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if wt, ok := ctx.Response.BodyStream().(io.WriterTo); ok {
		_, _ = wt.WriteTo(flushWriter{w: w, rc: rc})
	} else {
		_, _ = io.Copy(flushWriter{w: w, rc: rc}, ctx.Response.BodyStream())
	}
	_ = ctx.Response.CloseBodyStream()
}

// flushWriter flushes after every write: one SSE event per flush.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

func remoteTCPAddr(s string) net.Addr {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	return &net.TCPAddr{IP: net.ParseIP(host), Port: p}
}
