package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/engines"
	"github.com/omniroute/gateway/internal/ringbuf"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/transport/upstream"
)

// Limits of GET /api/services/<tool>/logs.
const (
	logsTailDefault = 200
	logsTailMax     = 1000
	logsFilterMax   = 200
	// logsBuffer is how many live lines a slow viewer may lag before lines
	// are dropped (and reported) for it.
	logsBuffer = 1024
)

// logsHeartbeat is the interval of heartbeat events on the logs stream.
var logsHeartbeat = 15 * time.Second

const servicesPrefix = "/api/services"

// isManagementPath reports the paths of the services and engines API.
func isManagementPath(path []byte) bool {
	return bytes.Equal(path, []byte(servicesPrefix)) || bytes.HasPrefix(path, []byte(servicesPrefix+"/")) ||
		bytes.Equal(path, []byte("/api/engines"))
}

// managementRoute serves /api/services... and /api/engines (see
// isManagementPath). It reports false for any other path.
func (g *Gateway) managementRoute(ctx *fasthttp.RequestCtx, path []byte, rid []byte, host context.Context) bool {
	const prefix = servicesPrefix
	if !isManagementPath(path) {
		return false
	}
	isServices := !bytes.Equal(path, []byte("/api/engines"))
	if !g.managementAccess(ctx, rid) {
		return true
	}
	if !isServices {
		if !ctx.IsGet() {
			g.mgmtMethod(ctx, rid, "GET")
			return true
		}
		cap := engines.Capability(ctx.QueryArgs().Peek("capability"))
		writeJSON(ctx, 200, map[string]any{"engines": g.engineViews(cap)})
		return true
	}
	rest := strings.Trim(string(path[len(prefix):]), "/")
	if rest == "" {
		if !ctx.IsGet() {
			g.mgmtMethod(ctx, rid, "GET")
			return true
		}
		list := []services.Status{}
		for _, h := range g.side.mgr.All() {
			list = append(list, h.Status())
		}
		writeJSON(ctx, 200, map[string]any{"services": list})
		return true
	}
	tool, action, _ := strings.Cut(rest, "/")
	h, ok := g.side.mgr.Get(tool)
	if !ok {
		writeMgmtError(ctx, rid, 404, "", "service_not_found", "Service '"+sanitize.Message(tool, "?")+"' not found; GET /api/services lists the configured services")
		return true
	}
	want := "POST"
	switch action {
	case "status", "logs":
		want = "GET"
	case "start", "stop", "restart", "auto-start", "install", "uninstall":
	default:
		writeMgmtError(ctx, rid, 404, "", "not_found", "no action "+strconv.Quote(sanitize.Message(action, "?"))+" for a service; use start, stop, restart, status, logs, auto-start, install or uninstall")
		return true
	}
	if string(ctx.Method()) != want {
		g.mgmtMethod(ctx, rid, want)
		return true
	}
	if want == "POST" && !managementBodyOK(ctx) {
		g.refuse(ctx, routeManagement, rid, errMgmtMediaType)
		return true
	}
	switch action {
	case "status":
		writeJSON(ctx, 200, h.Status())
	case "logs":
		g.serviceLogs(ctx, rid, h, host)
	case "start":
		g.serviceCommand(ctx, rid, h, h.StartWait(), h.Start)
	case "restart":
		g.serviceCommand(ctx, rid, h, h.StartWait(), h.Restart)
	case "stop":
		g.serviceCommand(ctx, rid, h, h.StopWait(), h.Stop)
	case "install":
		g.serviceCommand(ctx, rid, h, 10*time.Second, h.Install)
	case "uninstall":
		g.serviceCommand(ctx, rid, h, 10*time.Second, h.Uninstall)
	case "auto-start":
		g.serviceAutoStart(ctx, rid, h)
	}
	return true
}

func (g *Gateway) mgmtMethod(ctx *fasthttp.RequestCtx, rid []byte, allow string) {
	ctx.Response.Header.Set(fasthttp.HeaderAllow, allow)
	writeMgmtError(ctx, rid, 405, "", "method_not_allowed", "method not allowed; use "+allow)
}

// serviceCommand runs a lifecycle command and answers with the status.
func (g *Gateway) serviceCommand(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle, wait time.Duration, cmd func(context.Context) (services.Status, error)) {
	c, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := cmd(c)
	switch {
	case err == nil:
		writeJSON(ctx, 200, st)
	case errors.Is(err, services.ErrNotInstalled):
		writeMgmtError(ctx, rid, 409, "", "not_installed", h.Name()+" is not installed; install its program, then POST /api/services/"+h.Name()+"/install")
	case errors.Is(err, services.ErrNotInstallable):
		writeMgmtError(ctx, rid, 409, "", "not_installable", sanitize.Message(err.Error(), "the service cannot be installed here"))
	case errors.Is(err, services.ErrBusy):
		writeMgmtError(ctx, rid, 409, "", "service_running", h.Name()+" is "+string(st.State)+"; stop it first")
	case errors.Is(err, services.ErrTimeout):
		writeJSON(ctx, 202, st)
	case errors.Is(err, services.ErrClosed):
		writeMgmtError(ctx, rid, 503, "", "shutting_down", "the gateway is shutting down")
	default:
		writeMgmtError(ctx, rid, 500, "", "internal_error", sanitize.Message(err.Error(), "unexpected error"))
	}
}

func (g *Gateway) serviceAutoStart(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle) {
	body, ok := readSmallBody(ctx, 4<<10)
	if !ok {
		writeMgmtError(ctx, rid, 400, "", "invalid_body", "request body is too large or incomplete; send {\"enabled\": true|false}")
		return
	}
	enabled, code, msg := parseAutoStart(body)
	if code != "" {
		writeMgmtError(ctx, rid, 400, "", code, msg)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.SetAutoStart(c, enabled); err != nil {
		writeMgmtError(ctx, rid, 500, "", "internal_error", sanitize.Message(err.Error(), "could not save the setting"))
		return
	}
	ctx.SetStatusCode(204)
}

// parseAutoStart decodes exactly {"enabled": true|false}. On bad input it
// returns the error code and message to send with a 400.
func parseAutoStart(body []byte) (enabled bool, code, msg string) {
	var req struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, "invalid_json", "Invalid JSON body; send {\"enabled\": true|false}"
		}
		return false, "invalid_body", "body must be {\"enabled\": true|false}: " + sanitize.Message(err.Error(), "wrong shape")
	}
	if dec.More() || req.Enabled == nil {
		return false, "invalid_body", "body must be exactly {\"enabled\": true|false}"
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, "invalid_body", "body must be exactly {\"enabled\": true|false}"
	}
	return *req.Enabled, "", ""
}

// readSmallBody reads a request body of at most limit bytes.
func readSmallBody(ctx *fasthttp.RequestCtx, limit int) ([]byte, bool) {
	if !ctx.Request.IsBodyStream() {
		b := ctx.Request.Body()
		return b, len(b) <= limit
	}
	if ctx.Request.Header.ContentLength() > limit {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(ctx.RequestBodyStream(), int64(limit)+1))
	return b, err == nil && len(b) <= limit
}

// serviceLogs answers GET /api/services/<tool>/logs as server-sent events:
// "snapshot" (the last tail matching lines, as a JSON array), then "log"
// per new matching line, "dropped" when a slow viewer lost lines, and
// "heartbeat" every 15 s. It ends when the client leaves or the gateway
// shuts down.
func (g *Gateway) serviceLogs(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle, host context.Context) {
	args := ctx.QueryArgs()
	tail := logsTailDefault
	if v := args.Peek("tail"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n > logsTailMax {
			writeMgmtError(ctx, rid, 400, "", "invalid_tail", "tail must be a whole number from 0 to "+strconv.Itoa(logsTailMax)+" (default "+strconv.Itoa(logsTailDefault)+")")
			return
		}
		tail = n
	}
	filter := string(args.Peek("filter"))
	if len(filter) > logsFilterMax {
		writeMgmtError(ctx, rid, 400, "", "invalid_filter", "filter exceeds maximum length of "+strconv.Itoa(logsFilterMax)+" characters")
		return
	}
	snap, sub := h.Logs().Subscribe(tail, filter, logsBuffer)
	ls := &logStream{g: g, rid: string(rid), ctx: ctx, host: host != nil, snap: snap, sub: sub}
	var conn net.Conn
	if host == nil {
		conn = ctx.Conn()
	}
	ls.token = g.inflight.register(&ls.cancel, uint32(ctx.ConnID()), conn, time.Now())
	if host != nil {
		ls.stopCtx = context.AfterFunc(host, ls.cancel.Cancel)
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	ctx.SetBodyStream(ls, -1)
}

// logStream is the body of a logs response.
type logStream struct {
	g       *Gateway
	rid     string
	ctx     *fasthttp.RequestCtx // valid while fasthttp writes the body
	host    bool                 // behind net/http: no connection deadlines
	snap    []ringbuf.Line
	sub     *ringbuf.Sub
	cancel  upstream.Cancel // cancelled by the hang-up watcher or shutdown
	token   regToken
	stopCtx func() bool
	done    bool
}

func (l *logStream) Read([]byte) (int, error) { return 0, io.EOF }

// SupportsBodyWriteTo makes fasthttp flush after every Write.
func (l *logStream) SupportsBodyWriteTo() bool { return true }

// logsPoll is how often the stream checks for a hang-up or shutdown.
const logsPoll = 200 * time.Millisecond

func (l *logStream) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			l.g.notePanic(routeManagement, l.rid, "stream", p)
			err = errStreamPanic
		}
	}()
	return l.stream(l.g.streamWriter(&deadlineWriter{}, l.ctx, l.host, w, time.Time{}))
}

func (l *logStream) stream(w io.Writer) (int64, error) {
	var total int64
	send := func(event string, v any) error {
		b, _ := json.Marshal(v)
		buf := make([]byte, 0, len(b)+len(event)+16)
		buf = append(append(append(buf, "event: "...), event...), "\ndata: "...)
		buf = append(append(buf, b...), "\n\n"...)
		n, err := w.Write(buf)
		total += int64(n)
		return err
	}
	snap := l.snap
	if snap == nil {
		snap = []ringbuf.Line{}
	}
	if err := send("snapshot", snap); err != nil {
		return total, err
	}
	l.snap = nil
	hb := time.NewTicker(logsHeartbeat)
	defer hb.Stop()
	poll := time.NewTicker(logsPoll)
	defer poll.Stop()
	var reported uint64
	for {
		select {
		case line, ok := <-l.sub.C():
			if !ok {
				return total, nil
			}
			if err := send("log", line); err != nil {
				return total, err
			}
		case t := <-hb.C:
			if err := send("heartbeat", map[string]any{"ts": t.UTC()}); err != nil {
				return total, err
			}
		case <-poll.C:
			if l.cancel.Cancelled() || l.g.draining.Load() {
				return total, nil
			}
			if d := l.sub.Dropped(); d > reported {
				if err := send("dropped", map[string]any{"dropped": d - reported}); err != nil {
					return total, err
				}
				reported = d
			}
		}
	}
}

// Close unsubscribes and unregisters; fasthttp calls it once.
func (l *logStream) Close() error {
	if l.done {
		return nil
	}
	l.done = true
	l.sub.Close()
	if l.stopCtx != nil {
		l.stopCtx()
	}
	l.g.inflight.unregister(l.token)
	return nil
}

// writeMgmtError writes the management error body
// {"error":{"message","type","code"},"requestId"}. The type follows the
// reference: given, else server_error (5xx), not_found (404), conflict
// (409), invalid_request (others).
func writeMgmtError(ctx *fasthttp.RequestCtx, rid []byte, status int, typ, code, msg string) {
	writeMgmtFieldError(ctx, rid, status, typ, code, "", msg)
}

// writeMgmtFieldError is writeMgmtError naming the field to blame (as
// "field", when not empty) for a body that failed validation.
func writeMgmtFieldError(ctx *fasthttp.RequestCtx, rid []byte, status int, typ, code, field, msg string) {
	if typ == "" {
		switch {
		case status >= 500:
			typ = "server_error"
		case status == 404:
			typ = "not_found"
		case status == 409:
			typ = "conflict"
		default:
			typ = "invalid_request"
		}
	}
	ctx.Response.ResetBody()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b := append([]byte(nil), `{"error":{"message":`...)
	b = apierror.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = apierror.AppendString(b, typ)
	b = append(b, `,"code":`...)
	b = apierror.AppendString(b, code)
	if field != "" {
		b = append(b, `,"field":`...)
		b = apierror.AppendString(b, field)
	}
	b = append(b, `},"requestId":`...)
	b = apierror.AppendString(b, string(rid))
	ctx.SetBody(append(b, '}'))
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeMgmtError(ctx, nil, 500, "", "internal_error", "response could not be encoded")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}
