// Package admit is the admit stage of the request pipeline: each attempt's
// lease on its target's upstream in the tenant's lane (actors/lanes), the
// request's priority class, the refusals as the caller sees them, the
// targets skipped for want of room, and the stage's operator parts (the
// adaptiveAdmission health section and its brief, the omniroute_admission_*
// series, the snapshot they share).
//
// Stage is the process-wide part (the lanes handle the composition root
// attached); State is one request's, a field of the pipeline's call. The
// stage reaches the rest of the request through the port it declares,
// Request, which transport's call implements; it imports no other stage.
package admit

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
)

// PriorityHeader chooses a request's priority class.
const PriorityHeader = "X-Omniroute-Priority"

// MaxSkipNames bounds the targets named in X-OmniRoute-Skipped-Targets.
const MaxSkipNames = 16

// Request is the stage's port on the request it admits (the pipeline's
// call implements it): what every attempt's ticket carries besides the
// upstream, class and cost, and where an admission wait is traced.
type Request interface {
	// AdmissionTicket is the request's part of each attempt's ticket
	// (tenant, stream, deadline, abort) and the features its cost is
	// priced from.
	AdmissionTicket() (lanes.Ticket, admission.Features)
	// AdmissionWaited reports a wait on t's upstream that ended in a
	// lease (the request's trace records it).
	AdmissionWaited(t *catalog.Target, waited time.Duration)
}

// Stage is the admit stage's process-wide state: the lanes actor's
// handle and the default class, attached once by the composition root,
// and the snapshot the health section, the metrics and the operator APIs
// share.
type Stage struct {
	lanes        *lanes.Handle
	defaultClass admission.Class
	snap         snapCache
}

// Attach hands the stage the spawned lanes actor and the default
// priority class (OMNIROUTE_PRIORITY_DEFAULT_CLASS).
func (s *Stage) Attach(h *lanes.Handle, defaultClass admission.Class) {
	s.lanes, s.defaultClass = h, defaultClass
}

// Lanes returns the lanes actor's handle (nil before Attach).
func (s *Stage) Lanes() *lanes.Handle { return s.lanes }

// DefaultClass is the class of a request whose tenant and header name
// none.
func (s *Stage) DefaultClass() admission.Class { return s.defaultClass }

// Stop stops the lanes actor, if attached.
func (s *Stage) Stop() {
	if s.lanes != nil {
		s.lanes.Stop()
	}
}

// State is one request's admit state: the current attempt's lease on its
// upstream, the priority class, why admission refused, if it did, the
// time queued and the targets skipped.
type State struct {
	Lease        lanes.Lease
	Class        admission.Class
	Refusal      lanes.Reason
	RefusalRetry int
	Waited       time.Duration // queued for admission, over all attempts
	Skips        int
	skipped      [MaxSkipNames]int32 // target ids skipped, for the header
}

// Priority decides the request's class: the tenant's policy's class
// (tenantClass, when fixed), else the default; the header may choose
// either class, except that a tenant configured as batch cannot raise
// itself. It writes the class header, or returns the error for a bad
// header value. The pipeline runs it as the last step of the model walk:
// the lanes queue by it.
func (st *State) Priority(s *Stage, ctx *fasthttp.RequestCtx, tenantClass admission.Class, fixed bool) *apierror.Error {
	base := s.defaultClass
	if fixed {
		base = tenantClass
	}
	st.Class = base
	if v := ctx.Request.Header.Peek(PriorityHeader); len(v) > 0 {
		want, ok := admission.ParseClassBytes(v)
		if !ok {
			return errPriority
		}
		if !fixed || base != admission.Batch {
			st.Class = want
		}
	}
	ctx.Response.Header.Set("X-OmniRoute-Priority", st.Class.String())
	return nil
}

// ticket is r's ticket for an attempt on t's upstream, priced (see
// admission.CostConfig) by what it holds at the provider: its estimated
// input and the number of answers it asks for.
func (st *State) ticket(s *Stage, r Request, t *catalog.Target) lanes.Ticket {
	tk, f := r.AdmissionTicket()
	tk.Upstream, tk.Class, tk.Cost = t.ID, st.Class, s.lanes.Config().Cost.Cost(f)
	return tk
}

// TryAdmit takes t's upstream into l for the next attempt if it has room
// now (a fan-out probe, or spill-over to a later candidate).
func (st *State) TryAdmit(s *Stage, r Request, t *catalog.Target, l *lanes.Lease) bool {
	return s.lanes.TryAcquire(st.ticket(s, r, t), l) == lanes.None
}

// Admit waits for room on t's upstream (in the tenant's lane), bounded by
// the max wait and the caller's deadline, and reports the refusal, if
// any. A wait that ended in a lease is traced and added to the
// X-OmniRoute-Admission-Wait-Ms header.
func (st *State) Admit(s *Stage, r Request, ctx *fasthttp.RequestCtx, t *catalog.Target, l *lanes.Lease) lanes.Reason {
	reason := s.lanes.Acquire(st.ticket(s, r, t), l)
	if reason == lanes.None && l.Waited > 0 {
		r.AdmissionWaited(t, l.Waited)
		st.Waited += l.Waited
		var b [20]byte
		ctx.Response.Header.SetBytesV("X-OmniRoute-Admission-Wait-Ms", strconv.AppendInt(b[:0], st.Waited.Milliseconds(), 10))
	}
	return reason
}

// Release ends the current attempt's lease with its outcome.
func (st *State) Release(s *Stage, o lanes.Outcome, drop bool) {
	if st.Lease.Held() {
		s.lanes.Release(&st.Lease, lanes.Completion{Outcome: o, Drop: drop})
	}
}

// ReleaseLease ends a lease the request holds besides its attempt's (a
// fusion panel member's) with its outcome; a lease not held is only
// cleared.
func (s *Stage) ReleaseLease(l *lanes.Lease, o lanes.Outcome, drop bool) {
	s.lanes.Release(l, lanes.Completion{Outcome: o, Drop: drop})
}

// Answered records a plain answer's latency on the attempt's lease for
// its upstream's controller, as the exchange measured it: provider is
// the provider's time from the request written, local the gateway's own
// wait to read the answer; the controller judges the provider by the
// first and discounts latencies the second explains.
func (st *State) Answered(s *Stage, provider, local time.Duration) {
	s.lanes.Answered(&st.Lease, provider, local)
}

// FirstByte records a stream's first content event on the attempt's
// lease: its latency sample for the upstream's controller, split as for
// Answered.
func (st *State) FirstByte(s *Stage, provider, local time.Duration) {
	s.lanes.FirstByte(&st.Lease, provider, local)
}

// ReleaseStream ends a committed stream's lease at the end of its relay:
// cancelled when the caller left, an upstream error when the stream was
// cut, else a success.
func (st *State) ReleaseStream(s *Stage, left, cut bool) {
	switch {
	case !st.Lease.Held():
	case left:
		st.Release(s, lanes.Cancelled, false)
	case cut:
		st.Release(s, lanes.UpstreamError, false)
	default:
		st.Release(s, lanes.Success, false)
	}
}

// NoteSkip counts target t skipped for want of room on its upstream.
func (st *State) NoteSkip(s *Stage, t *catalog.Target) {
	s.lanes.NoteSkipped()
	if st.Skips < MaxSkipNames {
		st.skipped[st.Skips] = int32(t.ID)
	}
	st.Skips++
}

// SkippedHeader names the targets skipped (no room on their upstream),
// by name(id), in X-OmniRoute-Skipped-Targets.
func (st *State) SkippedHeader(h *fasthttp.ResponseHeader, name func(id int) string) {
	var b strings.Builder
	for i := 0; i < st.Skips && i < MaxSkipNames; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name(int(st.skipped[i])))
	}
	h.Set("X-OmniRoute-Skipped-Targets", b.String())
}

// OutcomeOf is how an attempt that ended in class class counts for its
// upstream's controller, and whether the provider shed it: a 429, an
// overload 503/529 and a timeout are evidence of congestion; a 500 or 502
// (a bug or a crash) and a refused connection are not: a limit cut would
// not cure them, and the breaker keeps the target out.
func OutcomeOf(class messages.FailureClass, reason string) (lanes.Outcome, bool) {
	switch class {
	case messages.OK:
		return lanes.Success, false
	case messages.Canceled:
		return lanes.Cancelled, false
	case messages.Timeout:
		return lanes.Timeout, true
	case messages.RateLimit:
		return lanes.UpstreamError, true
	case messages.Capacity:
		return lanes.UpstreamError, reason != "server_error"
	case messages.Request:
		return lanes.LocalReject, false
	}
	return lanes.UpstreamError, false
}

// Refusal is the answer to a refused admission, r in the caller's
// dialect with retry as its Retry-After when measured (retry > 0). A
// caller that left (lanes.Aborted) is answered 499 by the pipeline, not
// with this.
func Refusal(r lanes.Reason, retry int) *apierror.Error {
	e := refusals[r]
	if e == nil {
		e = refusals[lanes.Unavailable]
	}
	if retry > 0 && retry != e.RetryAfter {
		cp := *e
		cp.RetryAfter = retry
		e = &cp
	}
	return e
}

var errPriority = apierror.New(apierror.CodeInvalidPriority)

// refusals are the admission rejections as the caller sees them, one per
// lanes.Reason, built from the lanes package's reason table (the message,
// Retry-After) and the table of error codes (status, type, code, the
// message's frame) so that every reason has its answer. The reasons that
// are no refusal (None, Busy from TryAcquire, Aborted: answered 499 by
// the pipeline) never reach a caller; they stand on the unavailable
// answer so that no lookup is nil.
var refusals = func() (out [lanes.NumReasons]*apierror.Error) {
	for r := lanes.Reason(0); r < lanes.NumReasons; r++ {
		if r.Rejection() {
			out[r] = apierror.New(r.APICode(), r.Message()).Retry(r.RetryAfter())
		}
	}
	for r := lanes.Reason(0); r < lanes.NumReasons; r++ {
		if out[r] == nil {
			out[r] = out[lanes.Unavailable]
		}
	}
	return out
}()
