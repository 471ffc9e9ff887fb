// Package intake is the ingest stage of the request pipeline: the
// process-wide ingest byte budget's reservation (actors/ingest) taken
// before a body is read, grown while a chunked body keeps coming, and
// given back when the body is no longer held and when the request ends;
// the structural stage (a conversation's length, a byte-light but
// structurally heavy body by its counts and token estimate); memory
// pressure's refusals; the internal self-loop bypass; the connections
// that linger after a refused upload; and the stage's operator parts (the
// chatAdmission health section, the omniroute_chat_admission_* and
// omniroute_resource_pressure_* series).
//
// Stage is the process-wide part (the ingest and pressure handles the
// composition root attached); State is one request's, a field of the
// pipeline's call. The stage declares what it needs of the rest of the
// pipeline as ports: Edge (the edge's in-flight registry and hang-up
// watcher, the panic log) and Request (the request being admitted), which
// transport implements. A refusal is returned for the pipeline to render
// in the caller's dialect.
package intake

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/ingest"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tokenest"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
)

// Admission system 1 in the request path.
//
// Byte stage, for every chat-shaped route, before any body byte is read:
// the internal self-loop bypass (still under the hard cap) → critical
// memory pressure: 503 resource_pressure → declared size over the hard cap:
// 413 → declared size at least the heavy threshold and larger than the
// whole budget: 413 body_exceeds_budget → reserve (fast path, else the
// ingest actor's fair queue) → read. An Expect: 100-continue upload is
// decided the same way in the server's ExpectHandler, so a rejected upload
// never sends its body. A chunked body reserves once its running total
// crosses the heavy threshold, grows its reservation as it keeps coming,
// and stops being read the moment a cap is crossed. Rejected unread bodies
// close the connection instead of being drained.
//
// Structural stage, after the JSON scan: a conversation over
// OMNIROUTE_CHAT_HARD_MAX_MESSAGES is refused (413); a byte-light but
// structurally heavy body (many messages or tools, or many estimated
// tokens) goes through the same gate.
//
// The reservation's bytes go back as soon as the body is no longer held
// (a stream that committed frees its body); its heavy-request slot goes
// back when the request finishes.

// Edge is the stage's port on the HTTP edge (transport implements it on
// the edge it built): the in-flight registry, in which a wait in the
// ingest queue and a lingering connection register so that a client's
// hang-up or a forced shutdown ends them; whether a socket's hang-up can
// be seen; and the panic log for the stage's own goroutine.
type Edge interface {
	Register(c edge.Canceler, hint uint32, conn net.Conn, now time.Time) edge.Token
	Unregister(t edge.Token)
	Watchable(conn net.Conn) bool
	// NotePanic logs and counts a panic recovered while serving ctx.
	NotePanic(ctx *fasthttp.RequestCtx, where string, p any)
}

// Request is the stage's port on the request being admitted (the
// pipeline's call implements it): who it is and where it came from, and
// how to stop its upload under critical pressure.
type Request interface {
	// Caller is the request's fasthttp context, the net/http host's
	// request context (nil on fasthttp) and the tenant it queues as.
	Caller() (ctx *fasthttp.RequestCtx, host context.Context, id tenant.ID)
	// AbortRead stops the upload being read: the blocked read returns at
	// once (ingest.Aborter; the ingest actor calls it).
	AbortRead()
}

// Config is what the stage reads of the configuration, fixed at Attach.
type Config struct {
	SelfLoopKey string // the internal self-loop's key; "" disables the bypass
	// The structural stage's limits: a conversation over HardMaxMessages
	// (0: none) is refused; HeavyMessages, HeavyTools or HeavyTokens make
	// a body heavy.
	HardMaxMessages, HeavyMessages, HeavyTools, HeavyTokens int
	CountCap                                                int // OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT, 0: none
	// Draining is the answer to a wait the stopping ingest actor ended.
	Draining *apierror.Error
}

// Stage is the ingest stage's process-wide state.
type Stage struct {
	ingest      *ingest.Handle
	pressure    *pressureactor.Handle
	edge        Edge
	cfg         Config
	selfLoopKey []byte
	lingering   atomic.Int64 // connections closing after a refused upload
}

// Attach hands the stage the spawned pressure and ingest actors (the
// composition root subscribed ingest to pressure), its configuration and
// the edge's port.
func (s *Stage) Attach(ph *pressureactor.Handle, ih *ingest.Handle, cfg Config, e Edge) {
	s.pressure, s.ingest, s.cfg, s.edge = ph, ih, cfg, e
	if cfg.SelfLoopKey != "" {
		s.selfLoopKey = []byte(cfg.SelfLoopKey)
	}
}

// Ingest returns the ingest actor's handle (nil before Attach).
func (s *Stage) Ingest() *ingest.Handle { return s.ingest }

// Pressure returns the resource-pressure actor's handle (nil before
// Attach).
func (s *Stage) Pressure() *pressureactor.Handle { return s.pressure }

// Stop stops the ingest and pressure actors, if attached.
func (s *Stage) Stop() {
	if s.ingest != nil {
		s.ingest.Stop()
	}
	if s.pressure != nil {
		s.pressure.Stop()
	}
}

// Health is the chatAdmission section of the health report: degraded
// under critical memory pressure.
func (s *Stage) Health() (any, string) {
	snap := s.ingest.Snapshot()
	status := "ok"
	if snap.PressureSeverity == pressure.Critical.String() {
		status = "degraded"
	}
	return snap, status
}

// bypassHeader marks OmniRoute's internal self-loop requests.
const bypassHeader = "X-Omniroute-Admission-Bypass"

// reasonHeader names why admission refused a request.
const reasonHeader = "X-Omniroute-Admission-Reason"

// isBypass reports the internal self-loop: x-omniroute-admission-bypass:
// internal together with the configured self-loop key as Bearer token
// (compared in constant time). Without a configured key there is no bypass.
func (s *Stage) isBypass(h *fasthttp.RequestHeader) bool {
	if s.selfLoopKey == nil {
		return false
	}
	v := bytes.TrimSpace(h.Peek(bypassHeader))
	if !bytes.EqualFold(v, []byte("internal")) {
		return false
	}
	a := h.Peek(fasthttp.HeaderAuthorization)
	if len(a) < 7 || !bytes.EqualFold(a[:7], []byte("bearer ")) {
		return false
	}
	return subtle.ConstantTimeCompare(bytes.TrimSpace(a[7:]), s.selfLoopKey) == 1
}

// ByteStage decides a request before any byte of its body is read. It
// returns the reservation (nil for a light body), whether the self-loop
// bypass applies, or the rejection. For a body under the heavy threshold
// it costs a few loads and never talks to the actor. host is the net/http
// host's request context (nil on fasthttp, and for the ExpectHandler).
func (s *Stage) ByteStage(ctx *fasthttp.RequestCtx, id tenant.ID, host context.Context) (*ingest.Lease, bool, *apierror.Error) {
	h := s.ingest
	cl := int64(ctx.Request.Header.ContentLength())
	if s.isBypass(&ctx.Request.Header) {
		if cl > h.HardMax() {
			return nil, false, edge.ErrBodyTooLarge(h.HardMax())
		}
		return nil, true, nil
	}
	if h.Critical() {
		h.Shed(messages.ShedResourcePressure)
		return nil, false, errPressure
	}
	if cl > h.HardMax() {
		return nil, false, edge.ErrBodyTooLarge(h.HardMax())
	}
	if cl < h.LargeBody() { // light, or of unknown length (chunked)
		return nil, false, nil
	}
	if cl > h.Budget().Bytes {
		h.Shed(messages.ShedBodyExceedsBudget)
		return nil, false, errExceedsBudget(h.Budget().Bytes)
	}
	if l, ok := h.TryAcquire(cl, true); ok {
		return l, false, nil
	}
	l, out := s.acquireWaiting(ctx, host, id, cl, nil)
	if l == nil {
		return nil, false, s.busy(out)
	}
	return l, false, nil
}

// admitWait lets a client hang-up (through the hang-up watcher) or a
// forced shutdown end a wait in the ingest queue.
type admitWait struct{ gone chan struct{} }

func (w *admitWait) Cancel() {
	select {
	case w.gone <- struct{}{}:
	default:
	}
}

var admitWaitPool = sync.Pool{New: func() any { return &admitWait{gone: make(chan struct{}, 1)} }}

// acquireWaiting queues for a reservation (or, with grow, for more of
// one) while watching for the client leaving.
func (s *Stage) acquireWaiting(ctx *fasthttp.RequestCtx, host context.Context, id tenant.ID, n int64, grow *ingest.Lease) (*ingest.Lease, messages.IngestOutcome) {
	var gone <-chan struct{}
	var w *admitWait
	var token edge.Token
	if host != nil {
		gone = host.Done()
	} else {
		w = admitWaitPool.Get().(*admitWait)
		select {
		case <-w.gone:
		default:
		}
		token = s.edge.Register(w, uint32(ctx.ConnID()), ctx.Conn(), time.Now())
		gone = w.gone
	}
	var l *ingest.Lease
	var out messages.IngestOutcome
	if grow != nil {
		if out = grow.Grow(id, n, gone); out == messages.IngestAdmitted {
			l = grow
		}
	} else {
		l, out = s.ingest.Acquire(id, n, true, gone)
	}
	if w != nil {
		s.edge.Unregister(token)
		admitWaitPool.Put(w)
	}
	return l, out
}

// busy maps a failed reservation to its answer.
func (s *Stage) busy(out messages.IngestOutcome) *apierror.Error {
	switch out {
	case messages.ShedBodyExceedsBudget:
		return errExceedsBudget(s.ingest.Budget().Bytes)
	case messages.IngestCanceled:
		return errClientGone
	case messages.IngestStopped:
		return s.cfg.Draining
	}
	return errBusy(out.String(), s.ingest.RetryAfter(2))
}

// admissionKey is the fasthttp user-value key under which the
// ExpectHandler leaves its decision for the handler: an *ingest.Lease, or
// admittedLight for a body that needs none.
type admissionKey struct{}

type admissionMark struct{ bypass bool }

var (
	admittedLight  = &admissionMark{}
	admittedBypass = &admissionMark{bypass: true}
)

// Leave records the ExpectHandler's decision (ByteStage's lease and
// bypass) in ctx for the handler, whose AdmitBytes adopts it. A lease
// left there is released by the handler, or by fasthttp (it is an
// io.Closer) if the handler never runs.
func Leave(ctx *fasthttp.RequestCtx, l *ingest.Lease, bypass bool) {
	switch {
	case l != nil:
		ctx.SetUserValue(admissionKey{}, l)
	case bypass:
		ctx.SetUserValue(admissionKey{}, admittedBypass)
	default:
		ctx.SetUserValue(admissionKey{}, admittedLight)
	}
}

// Decided reports whether the ExpectHandler left its decision in ctx
// (Leave) for the handler to adopt.
func Decided(ctx *fasthttp.RequestCtx) bool { return ctx.UserValue(admissionKey{}) != nil }

// State is one request's ingest state: the ingest budget's reservation
// (nil for a light body) and whether the internal self-loop bypass
// applies.
type State struct {
	lease  *ingest.Lease
	bypass bool
}

// AdmitBytes runs the byte stage for r, or adopts the decision the
// ExpectHandler already took (Leave). A refusal has closed the connection
// where the body is unread (Refuse); the pipeline answers it.
func (st *State) AdmitBytes(s *Stage, r Request) *apierror.Error {
	ctx, host, id := r.Caller()
	if v := ctx.UserValue(admissionKey{}); v != nil {
		ctx.RemoveUserValue(admissionKey{})
		switch d := v.(type) {
		case *ingest.Lease:
			st.lease = d
		case *admissionMark:
			st.bypass = d.bypass
		}
		return nil
	}
	l, bypass, e := s.ByteStage(ctx, id, host)
	if e != nil {
		return s.Refuse(ctx, e, false)
	}
	st.lease, st.bypass = l, bypass
	return nil
}

// Refuse prepares the answer to an admission refusal e before the body
// was (fully) read, and returns e for the pipeline to answer: the
// connection is closed rather than drained, unless the whole body
// already arrived with the headers (fasthttp reads up to 8 KiB of it
// before the handler runs) and the pipeline did not start reading it
// (reading), when keeping the connection costs nothing; the refusal's
// reason is named in X-Omniroute-Admission-Reason.
func (s *Stage) Refuse(ctx *fasthttp.RequestCtx, e *apierror.Error, reading bool) *apierror.Error {
	if cl := ctx.Request.Header.ContentLength(); cl < 0 || cl > prefetchedBody || reading {
		s.CloseUnread(ctx)
	}
	if e.Reason != "" {
		ctx.Response.Header.Set(reasonHeader, e.Reason)
	}
	return e
}

// prefetchedBody is how much of a body fasthttp reads with the headers.
const prefetchedBody = 8 << 10

// Lingering after a refused upload: until the client closes, at most
// lingerMax; at most maxLingering connections at once (beyond that they
// close after the answer at once).
const (
	lingerMax    = 5 * time.Second
	maxLingering = 1024
)

// lingerDelay is the linger when the client's close cannot be watched.
const lingerDelay = 500 * time.Millisecond

// CloseUnread closes the connection after the answer instead of draining
// the unread body. Closing a socket that still has unread input makes the
// kernel send a reset, which can destroy the answer before the client read
// it (clients then report "connection reset" or "broken pipe" instead of
// the 413 or 503). So the answer is written, the write side is shut, and
// the socket is closed once the client closed its side (the hang-up
// watcher reports it) or lingerMax passed. Nothing more is read.
//
// fasthttp closes a Connection: close response's socket at once, so the
// answer is written from a hijack handler instead (it runs on its own
// goroutine once the handler returned; the context stays valid until it
// ends).
func (s *Stage) CloseUnread(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(conn net.Conn) { s.lingerClose(ctx, conn) })
}

func (s *Stage) lingerClose(ctx *fasthttp.RequestCtx, c net.Conn) {
	defer func() { // a hijack handler runs on its own goroutine: a panic there would end the process
		if p := recover(); p != nil {
			s.edge.NotePanic(ctx, "linger", p)
		}
	}()
	raw := c
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		raw = u.UnsafeConn()
	}
	_ = raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	bw := bufio.NewWriterSize(raw, 4096)
	if err := ctx.Response.Write(bw); err != nil || bw.Flush() != nil {
		return
	}
	cw, ok := raw.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if s.lingering.Add(1) > maxLingering {
		s.lingering.Add(-1)
		return
	}
	defer s.lingering.Add(-1)
	w := admitWaitPool.Get().(*admitWait)
	select {
	case <-w.gone:
	default:
	}
	token := s.edge.Register(w, 0, raw, time.Now())
	t := time.NewTimer(lingerMax)
	if !s.edge.Watchable(raw) {
		t.Reset(lingerDelay)
	}
	select {
	case <-w.gone:
	case <-t.C:
	}
	t.Stop()
	s.edge.Unregister(token)
	admitWaitPool.Put(w)
}

// StartReading makes an admitted upload abortable under critical
// pressure: the ingest actor then calls r's AbortRead.
func (st *State) StartReading(r Request) {
	if st.lease != nil {
		st.lease.StartReading(r)
	}
}

// DoneReading ends the abortable phase.
func (st *State) DoneReading() {
	if st.lease != nil {
		st.lease.DoneReading()
	}
}

// Progress runs after every read of the body with the running total.
// It stops an aborted upload, reserves for a chunked body once it crosses
// the heavy threshold, and grows that reservation as the body keeps
// coming. A refusal is returned, the connection already set to close
// (Refuse).
func (st *State) Progress(s *Stage, r Request, total int64) *apierror.Error {
	if st.bypass {
		return nil
	}
	ctx, host, id := r.Caller()
	h := s.ingest
	if st.lease != nil {
		if st.lease.Aborted() {
			h.Shed(messages.ShedResourcePressure)
			return s.Refuse(ctx, errPressure, true)
		}
		if total <= st.lease.Bytes() {
			return nil
		}
	} else if total < h.LargeBody() {
		return nil
	}
	// A chunked body: reserve what was read, rounded up to the threshold,
	// before reading more.
	if total > h.Budget().Bytes {
		h.Shed(messages.ShedBodyExceedsBudget)
		return s.Refuse(ctx, errExceedsBudget(h.Budget().Bytes), true)
	}
	step := h.LargeBody()
	target := min((total+step-1)/step*step, h.HardMax(), h.Budget().Bytes)
	if st.lease == nil {
		if l, ok := h.TryAcquire(target, true); ok {
			st.lease = l
		} else if l, out := s.acquireWaiting(ctx, host, id, target, nil); l != nil {
			st.lease = l
		} else {
			return s.Refuse(ctx, s.busy(out), true)
		}
		st.lease.StartReading(r)
		return nil
	}
	if _, out := s.acquireWaiting(ctx, host, id, target, st.lease); out != messages.IngestAdmitted {
		return s.Refuse(ctx, s.busy(out), true)
	}
	return nil
}

// Structure runs the structural stage after the JSON scan, on the scan's
// message and tool counts and the body: a conversation over the message
// limit is refused, and a byte-light but structurally heavy body takes a
// heavy slot as a large one does.
func (st *State) Structure(s *Stage, r Request, messageCount, tools int, body []byte) *apierror.Error {
	c := &s.cfg
	if limit := c.HardMaxMessages; limit > 0 && messageCount > limit {
		return errHistoryTooLong(limit)
	}
	if st.bypass || st.lease != nil {
		return nil
	}
	heavy := messageCount >= c.HeavyMessages || tools >= c.HeavyTools
	if !heavy && !tokenest.Estimate(body, c.HeavyTokens).Heavy(c.HeavyTokens) {
		return nil
	}
	h := s.ingest
	l, ok := h.TryAcquire(h.LargeBody(), true)
	if !ok {
		ctx, host, id := r.Caller()
		var out messages.IngestOutcome
		if l, out = s.acquireWaiting(ctx, host, id, h.LargeBody(), nil); l == nil {
			e := errStructureBusy(h.RetryAfter(1))
			switch out {
			case messages.IngestCanceled:
				e = errClientGone
			case messages.IngestStopped:
				e = s.cfg.Draining
			}
			if out.IsShed() {
				ctx.Response.Header.Set(reasonHeader, out.String())
			}
			return e
		}
	}
	l.DoneReading() // the body is already read: nothing to abort
	st.lease = l
	return nil
}

// BodyDone returns the body's bytes to the budget once the pipeline no
// longer holds the body (a stream committed: no further failover); the
// heavy-request slot stays until the request finishes.
func (st *State) BodyDone() {
	if st.lease != nil {
		st.lease.ReleaseBytes()
	}
}

// Release returns the reservation at the end of the request.
func (st *State) Release() {
	if st.lease != nil {
		st.lease.Release()
		st.lease = nil
	}
}

// Admission errors: status, type, code and message as OmniRoute answers
// them, in the caller's dialect.
var (
	errPressure   = apierror.New(apierror.CodeResourcePressure).WithReason(messages.ShedResourcePressure.String()).Retry(2)
	errClientGone = apierror.New(apierror.CodeClientClosedRequest)
)

func errExceedsBudget(b int64) *apierror.Error {
	return apierror.New(apierror.CodeBodyExceedsBudget, max(1, b>>20)).WithReason(messages.ShedBodyExceedsBudget.String())
}

func errBusy(reason string, retryAfter int) *apierror.Error {
	return apierror.New(apierror.CodeChatAdmissionBusy, "Chat admission capacity is temporarily unavailable. Retry shortly.").WithReason(reason).Retry(retryAfter)
}

func errStructureBusy(retryAfter int) *apierror.Error {
	return apierror.New(apierror.CodeChatAdmissionBusy, "Local chat admission capacity is busy for this structurally heavy request; upstream provider routing was not attempted. Retry shortly.").
		WithReason(messages.BusyStructureLimit.String()).Retry(retryAfter)
}

func errHistoryTooLong(limit int) *apierror.Error {
	return apierror.New(apierror.CodeChatHistoryTooLarge, limit).WithReason(messages.RefusedMessageLimit.String())
}
