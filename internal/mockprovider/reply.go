package mockprovider

// Replies other than the streaming success path: injected failures, errors
// and the non-stream success body.

import (
	"github.com/valyala/fasthttp"
)

// serveFailure answers with the injected failure mode.
func (q *request) serveFailure(ctx *fasthttp.RequestCtx) {
	f := q.beh.b.Fail
	switch f.Mode {
	case FailHang:
		if res := q.s.wait(&q.watch, -1, nil, q.beh.retired); res != waitReleased {
			q.interrupted(ctx, res)
			return
		}
		q.succeed(ctx) // the behaviour changed: the stall is over
	case FailReset:
		if q.stream && f.AfterChunks >= 0 {
			q.startStream(ctx, FailReset)
			return
		}
		q.end(outcomeFailed) // before the client can observe the reset
		resetConn(ctx.Conn())
		ctx.SetConnectionClose()
	case FailTruncate:
		if q.stream {
			q.startStream(ctx, FailTruncate)
			return
		}
		q.truncateBody(ctx)
	case FailErrorEvent:
		if q.stream {
			q.startStream(ctx, FailErrorEvent)
			return
		}
		q.replyStatusFailure(ctx, f)
	default: // FailStatus
		q.replyStatusFailure(ctx, f)
	}
}

func (q *request) replyStatusFailure(ctx *fasthttp.RequestCtx, f FailSpec) {
	status := f.Status
	if status == 0 {
		status = fasthttp.StatusInternalServerError
	}
	if f.RetryAfter != "" {
		ctx.Response.Header.Set("Retry-After", f.RetryAfter)
	}
	if f.RetryAfterMS > 0 {
		ctx.Response.Header.Set("retry-after-ms", itoa(int64(f.RetryAfterMS)))
	}
	for k, v := range f.Headers {
		ctx.Response.Header.Set(k, v)
	}
	if f.Body != "" {
		q.applyRate(ctx, status)
		ctx.SetStatusCode(status)
		ctx.SetContentTypeBytes(contentTypeJSON)
		ctx.SetBodyString(f.Body)
		q.end(outcomeFailed)
		return
	}
	q.replyError(ctx, errInfo{status: status, code: f.Code, msg: statusMessage(status)})
}

// interrupted ends a request whose wait did not run its course.
func (q *request) interrupted(ctx *fasthttp.RequestCtx, res waitResult) {
	switch res {
	case waitGone:
		ctx.SetConnectionClose()
		q.end(outcomeCancelled)
	case waitClosing:
		ctx.SetConnectionClose()
		q.replyError(ctx, errInfo{status: fasthttp.StatusServiceUnavailable, msg: "mockprovider: shutting down"})
	default: // callers handle waitElapsed and waitAcquired themselves
		q.end(outcomeCompleted)
	}
}

// replyBody writes the non-stream success body from the templates.
func (q *request) replyBody(ctx *fasthttp.RequestCtx) {
	q.applyRate(ctx, fasthttp.StatusOK)
	bp := q.s.getBuf()
	*bp = q.appendBody((*bp)[:0])
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(*bp)
	q.s.putBuf(bp)
}

func (q *request) appendBody(dst []byte) []byte {
	switch q.ep {
	case endpointMessages:
		return q.r.appendMessage(dst, true)
	case endpointResponses:
		return q.r.appendResponse(dst, true)
	case endpointEmbeddings:
		return appendEmbeddings(dst, q.emb, q.r.modelRaw)
	default:
		return q.r.appendChatCompletion(dst)
	}
}

// truncateBody sends the headers of a complete non-stream answer but only
// half of its body, then closes the connection: the client sees a body
// shorter than its Content-Length. The bytes go straight to the socket
// because fasthttp would never send a response it knows is incomplete.
func (q *request) truncateBody(ctx *fasthttp.RequestCtx) {
	body := q.appendBody(nil)
	q.applyRate(ctx, fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.Header.SetContentLength(len(body))
	raw := append(ctx.Response.Header.Header(), body[:len(body)/2]...)
	q.end(outcomeFailed)
	conn := ctx.Conn()
	_, _ = conn.Write(raw)
	_ = conn.Close()
	ctx.SetConnectionClose()
}

// replyError answers with an error body of the endpoint's family and counts
// the request as failed.
func (q *request) replyError(ctx *fasthttp.RequestCtx, e errInfo) {
	q.applyRate(ctx, e.status)
	writeError(ctx, q.ep.family(), e)
	q.end(outcomeFailed)
}

func (q *request) applyRate(ctx *fasthttp.RequestCtx, status int) {
	if q.hasRate && q.rate.conf.family != "" {
		q.rate.apply(&ctx.Response.Header, status)
	}
}

func writeError(ctx *fasthttp.RequestCtx, f family, e errInfo) {
	ctx.SetStatusCode(e.status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	var buf [512]byte
	ctx.SetBody(appendErrorBody(buf[:0], f, e))
}

func itoa(v int64) string { return string(appendInt(nil, v)) }
