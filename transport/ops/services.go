package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/ringbuf"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/transport/edge"
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

// The services and engines API's paths: ServicesPath and everything
// under it, and EnginesPath.
const (
	ServicesPath = edge.ServicesPath
	EnginesPath  = edge.EnginesPath
)

// IsServicesPath reports the paths of the services and engines API (the
// edge's route table says which).
func IsServicesPath(path []byte) bool { return edge.Is(path, edge.HandleServices) }

// Services serves /api/services... and /api/engines (see
// IsServicesPath; host is the net/http request context, nil on
// fasthttp). It reports false for any other path.
func (a *API) Services(ctx *fasthttp.RequestCtx, path []byte, edgeRID []byte, host context.Context) bool {
	rid := own(edgeRID)
	const prefix = ServicesPath
	if !IsServicesPath(path) {
		return false
	}
	isServices := !bytes.Equal(path, []byte(EnginesPath))
	if !a.edge.Access(ctx, rid) {
		return true
	}
	if !isServices {
		if !ctx.IsGet() {
			methodNotAllowed(ctx, rid, "GET")
			return true
		}
		writeJSON(ctx, 200, map[string]any{"engines": a.svc.Engines(string(ctx.QueryArgs().Peek("capability")))})
		return true
	}
	rest := strings.Trim(string(path[len(prefix):]), "/")
	if rest == "" {
		if !ctx.IsGet() {
			methodNotAllowed(ctx, rid, "GET")
			return true
		}
		list := []services.Status{}
		for _, h := range a.svc.All() {
			list = append(list, h.Status())
		}
		writeJSON(ctx, 200, map[string]any{"services": list})
		return true
	}
	tool, action, _ := strings.Cut(rest, "/")
	h, ok := a.svc.Get(tool)
	if !ok {
		WriteError(ctx, rid, apierror.CodeServiceNotFound, sanitize.Message(tool, "?"))
		return true
	}
	want := "POST"
	switch action {
	case "status", "logs":
		want = "GET"
	case "start", "stop", "restart", "auto-start", "install", "uninstall":
	default:
		WriteError(ctx, rid, apierror.CodeNotFound, "no action "+strconv.Quote(sanitize.Message(action, "?"))+" for a service; use start, stop, restart, status, logs, auto-start, install or uninstall")
		return true
	}
	if string(ctx.Method()) != want {
		methodNotAllowed(ctx, rid, want)
		return true
	}
	if want == "POST" && !a.edge.Body(ctx, rid) {
		return true
	}
	switch action {
	case "status":
		writeJSON(ctx, 200, h.Status())
	case "logs":
		a.serviceLogs(ctx, rid, h, host)
	case "start":
		serviceCommand(ctx, rid, h, h.StartWait(), h.Start)
	case "restart":
		serviceCommand(ctx, rid, h, h.StartWait(), h.Restart)
	case "stop":
		serviceCommand(ctx, rid, h, h.StopWait(), h.Stop)
	case "install":
		serviceCommand(ctx, rid, h, 10*time.Second, h.Install)
	case "uninstall":
		serviceCommand(ctx, rid, h, 10*time.Second, h.Uninstall)
	case "auto-start":
		serviceAutoStart(ctx, rid, h)
	}
	return true
}

// serviceCommand runs a lifecycle command and answers with the status.
func serviceCommand(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle, wait time.Duration, cmd func(context.Context) (services.Status, error)) {
	c, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := cmd(c)
	switch {
	case err == nil:
		writeJSON(ctx, 200, st)
	case errors.Is(err, services.ErrNotInstalled):
		WriteError(ctx, rid, apierror.CodeNotInstalled, h.Name(), h.Name())
	case errors.Is(err, services.ErrNotInstallable):
		WriteError(ctx, rid, apierror.CodeNotInstallable, sanitize.Message(err.Error(), "the service cannot be installed here"))
	case errors.Is(err, services.ErrBusy):
		WriteError(ctx, rid, apierror.CodeServiceRunning, h.Name(), string(st.State))
	case errors.Is(err, services.ErrTimeout):
		writeJSON(ctx, 202, st)
	case errors.Is(err, services.ErrClosed):
		WriteError(ctx, rid, apierror.CodeShuttingDown, "the gateway is shutting down")
	default:
		WriteError(ctx, rid, apierror.CodeInternalError, sanitize.Message(err.Error(), "unexpected error"))
	}
}

func serviceAutoStart(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle) {
	body, ok := readSmallBody(ctx, 4<<10)
	if !ok {
		WriteError(ctx, rid, apierror.CodeInvalidBody, "request body is too large or incomplete; send {\"enabled\": true|false}")
		return
	}
	enabled, code, msg := parseAutoStart(body)
	if code != 0 {
		WriteError(ctx, rid, code, msg)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.SetAutoStart(c, enabled); err != nil {
		WriteError(ctx, rid, apierror.CodeInternalError, sanitize.Message(err.Error(), "could not save the setting"))
		return
	}
	ctx.SetStatusCode(204)
}

// parseAutoStart decodes exactly {"enabled": true|false}. On bad input it
// returns the error code and message to send with a 400.
func parseAutoStart(body []byte) (enabled bool, code apierror.Code, msg string) {
	var req struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, apierror.CodeInvalidJSON, "Invalid JSON body; send {\"enabled\": true|false}"
		}
		return false, apierror.CodeInvalidBody, "body must be {\"enabled\": true|false}: " + sanitize.Message(err.Error(), "wrong shape")
	}
	if dec.More() || req.Enabled == nil {
		return false, apierror.CodeInvalidBody, "body must be exactly {\"enabled\": true|false}"
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, apierror.CodeInvalidBody, "body must be exactly {\"enabled\": true|false}"
	}
	return *req.Enabled, 0, ""
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
func (a *API) serviceLogs(ctx *fasthttp.RequestCtx, rid []byte, h *services.Handle, host context.Context) {
	args := ctx.QueryArgs()
	tail := logsTailDefault
	if v := args.Peek("tail"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n > logsTailMax {
			WriteError(ctx, rid, apierror.CodeInvalidTail, logsTailMax, logsTailDefault)
			return
		}
		tail = n
	}
	filter := string(args.Peek("filter"))
	if len(filter) > logsFilterMax {
		WriteError(ctx, rid, apierror.CodeInvalidFilter, logsFilterMax)
		return
	}
	snap, sub := h.Logs().Subscribe(tail, filter, logsBuffer)
	ctx.SetStatusCode(200)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	a.edge.Stream(ctx, rid, host, &logStream{snap: snap, sub: sub, heartbeat: a.heartbeat})
}

// logStream is the body of a logs response.
type logStream struct {
	snap      []ringbuf.Line
	sub       *ringbuf.Sub
	heartbeat time.Duration
}

// logsPoll is how often the stream checks for a hang-up or shutdown.
const logsPoll = 200 * time.Millisecond

func (l *logStream) Stream(w io.Writer, stopped func() bool) (int64, error) {
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
	hb := time.NewTicker(l.heartbeat)
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
			if stopped() {
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

// Close unsubscribes.
func (l *logStream) Close() { l.sub.Close() }
