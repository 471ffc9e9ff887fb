package mockprovider

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// endpoint is one of the model-serving APIs.
type endpoint uint8

const (
	endpointChat endpoint = iota
	endpointMessages
	endpointResponses
	endpointEmbeddings
)

func (e endpoint) family() family {
	if e == endpointMessages {
		return familyAnthropic
	}
	return familyOpenAI
}

var (
	adminPrefix     = []byte("/_mock/")
	v1Prefix        = []byte("/v1/")
	contentTypeJSON = []byte("application/json")
	contentTypeSSE  = []byte("text/event-stream")
)

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if s.isClosing() {
		ctx.SetConnectionClose() // no keep-alive once Close has begun
	}
	path := ctx.Path()
	if bytes.HasPrefix(path, adminPrefix) {
		s.admin(ctx, string(path[len(adminPrefix):]))
		return
	}
	p := path
	if bytes.HasPrefix(p, v1Prefix) {
		p = p[len(v1Prefix)-1:]
	}
	switch string(p) {
	case "/chat/completions":
		s.serveModel(ctx, endpointChat)
	case "/messages":
		s.serveModel(ctx, endpointMessages)
	case "/responses":
		s.serveModel(ctx, endpointResponses)
	case "/embeddings":
		s.serveModel(ctx, endpointEmbeddings)
	case "/models":
		s.serveModelList(ctx)
	case "/messages/count_tokens":
		s.serveCountTokens(ctx)
	case "/key", "/api/v1/key":
		s.serveQuotaAPI(ctx, "key")
	case "/credits", "/api/v1/credits":
		s.serveQuotaAPI(ctx, "credits")
	case "/user/balance":
		s.serveQuotaAPI(ctx, "balance")
	default:
		writeError(ctx, familyOpenAI, errInfo{status: fasthttp.StatusNotFound, code: "unknown_url",
			msg: "mockprovider: no route for " + string(ctx.Method()) + " " + string(path)})
	}
}

// serveModel runs one request through admission (validation, rate limit,
// slots), the latency wait and then success or the injected failure.
func (s *Server) serveModel(ctx *fasthttp.RequestCtx, ep endpoint) {
	if !ctx.IsPost() {
		writeError(ctx, ep.family(), errInfo{status: fasthttp.StatusMethodNotAllowed,
			msg: "mockprovider: " + string(ctx.Path()) + " accepts POST only"})
		return
	}
	body := ctx.PostBody()
	seq := s.seq.Add(1)
	info, perr := parseRequest(body)
	var m *modelEntry
	name := ""
	if perr == nil {
		m = s.entry(info.model)
		name = m.name
	}
	sum := sha256.Sum256(body)
	s.bodies.add(seq, ctx.Path(), name, len(body), &sum, &ctx.Request.Header)
	s.totals.requests.Add(1)
	s.totals.bytesIn.Add(int64(len(body)))
	if perr != nil {
		s.totals.failed.Add(1)
		writeError(ctx, ep.family(), errInfo{status: fasthttp.StatusBadRequest, msg: "mockprovider: " + perr.Error()})
		return
	}
	m.c.requests.Add(1)
	m.c.bytesIn.Add(int64(len(body)))
	var emb *embeddingsRequest
	if ep == endpointEmbeddings {
		var err error
		if emb, err = parseEmbeddings(body); err != nil {
			s.totals.failed.Add(1)
			m.c.failed.Add(1)
			writeError(ctx, familyOpenAI, errInfo{status: fasthttp.StatusBadRequest, msg: "mockprovider: " + err.Error()})
			return
		}
		info.stream = false // embeddings never stream
	}

	beh := s.table.Load().lookup(info.model)
	if beh.b.Strict && ep != endpointEmbeddings {
		if e, ok := strictCheck(ep, body, string(info.model)); !ok {
			s.totals.failed.Add(1)
			m.c.failed.Add(1)
			writeError(ctx, ep.family(), e)
			return
		}
	}
	q := request{s: s, m: m, ep: ep, beh: beh, stream: info.stream, watch: connWatch{conn: ctx.Conn()},
		logIdx: s.requests.arrive(seq, ctx.Path(), name, &ctx.Request.Header)}
	q.emb = emb
	q.fail = beh.failing()
	q.r = render{n: seq, created: time.Now().Unix(), modelRaw: info.modelRaw, p: (len(body) + 3) / 4,
		c: beh.completion, beh: beh, includeUsage: info.stream && info.includeUsage}
	if beh.tool != nil && ep != endpointEmbeddings {
		q.scriptTool(body)
	}

	if beh.rl.family != "" || beh.rl.enforce {
		out := int64(q.r.c)
		if q.fail {
			out = 0
		}
		q.rate = m.charge(beh, time.Now(), int64(q.r.p), out)
		q.hasRate = true
		if q.rate.exhausted {
			ctx.Response.Header.Set("Retry-After", itoa(q.rate.retryAfterSeconds()))
			q.replyError(ctx, errInfo{status: fasthttp.StatusTooManyRequests, code: beh.b.Fail.Code,
				msg: "mockprovider: rate limit window exhausted"})
			return
		}
	}

	if beh.b.Slots > 0 && !q.takeSlot(ctx) {
		return
	}
	q.enter()
	latency := beh.latency
	if beh.b.LatencyJitterMS > 0 {
		latency += time.Duration(rand.Int64N(int64(beh.b.LatencyJitterMS)*int64(time.Millisecond) + 1))
	}
	if res := s.wait(&q.watch, latency, nil, nil); res != waitElapsed {
		q.interrupted(ctx, res)
		return
	}
	if q.fail {
		q.serveFailure(ctx)
		return
	}
	q.succeed(ctx)
}

// succeed answers with the success body or stream.
func (q *request) succeed(ctx *fasthttp.RequestCtx) {
	if q.stream {
		q.startStream(ctx, FailNone)
		return
	}
	q.replyBody(ctx)
	q.end(outcomeCompleted)
}

// takeSlot acquires one of the model's slots, queueing (FIFO) or rejecting
// when all are busy. It returns false when the request has already been
// answered.
func (q *request) takeSlot(ctx *fasthttp.RequestCtx) bool {
	pool := q.m.slots(q.beh.b.Slots)
	if pool.tryAcquire() {
		q.slot = pool
		return true
	}
	if q.beh.b.OverSlots == "reject" {
		ctx.Response.Header.Set("Retry-After", "1")
		q.replyError(ctx, errInfo{status: fasthttp.StatusTooManyRequests,
			msg: "mockprovider: all " + itoa(int64(pool.capacity())) + " slots of this model are busy"})
		return false
	}
	q.m.c.queue(1)
	q.s.totals.queue(1)
	w := pool.enqueue()
	res := q.s.wait(&q.watch, -1, w.granted, nil)
	q.m.c.queue(-1)
	q.s.totals.queue(-1)
	if res != waitAcquired {
		pool.cancel(w)
		q.interrupted(ctx, res)
		return false
	}
	q.slot = pool
	return true
}

// serveCountTokens answers Anthropic's POST /v1/messages/count_tokens with
// a deterministic count: one token per 4 bytes of the body, at least 1,
// so a test can tell the provider's answer from the gateway's estimate.
func (s *Server) serveCountTokens(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		writeError(ctx, familyAnthropic, errInfo{status: fasthttp.StatusMethodNotAllowed,
			msg: "mockprovider: " + string(ctx.Path()) + " accepts POST only"})
		return
	}
	body := ctx.PostBody()
	sum := sha256.Sum256(body)
	info, perr := parseRequest(body)
	s.bodies.add(s.seq.Add(1), ctx.Path(), string(info.model), len(body), &sum, &ctx.Request.Header)
	// A model scripted to fail a status (FailStatus, FailErrorEvent: no
	// stream here) fails its counts too, so a gateway's failover of
	// count_tokens can be tested; hangs, resets and truncation are for
	// the inference endpoints.
	if perr == nil {
		if beh := s.table.Load().lookup(info.model); (beh.b.Fail.Mode == FailStatus || beh.b.Fail.Mode == FailErrorEvent) && beh.failing() {
			f := beh.b.Fail
			status := f.Status
			if status == 0 {
				status = fasthttp.StatusInternalServerError
			}
			if f.RetryAfter != "" {
				ctx.Response.Header.Set("Retry-After", f.RetryAfter)
			}
			writeError(ctx, familyAnthropic, errInfo{status: status, code: f.Code, msg: statusMessage(status)})
			return
		}
	}
	n := len(body)/4 + 1
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBodyString(`{"input_tokens":` + strconv.Itoa(n) + `}`)
}
