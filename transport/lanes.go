package transport

import (
	"context"
	"log/slog"
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

// maxSkipNames bounds the targets named in X-OmniRoute-Skipped-Targets.
const maxSkipNames = 16

// admissionState is the gateway's admission wiring, built by AttachLanes.
type admissionState struct {
	lanes        *lanes.Handle
	defaultClass admission.Class
	metrics      admissionMetrics
}

// LanesOptions are the lanes actor's options: one admission controller
// per upstream, and the tenants' weights.
//
// One upstream per target (upstream index = target id): a target is a
// connection and upstream model, whose capacity belongs to the provider's
// model whichever model of ours routes to it; its cap is the smallest
// max_concurrent any model sets for it (targetCaps).
func (a *Assembly) LanesOptions() lanes.Options {
	g := a.g
	specs := upstreamSpecs(g.cat.Targets, g.opts.File)
	return lanes.Options{Config: g.opts.Env.Lanes.Config(), Clock: g.clk, Upstreams: specs,
		Logger: g.log.With("component", "admission"), Weight: g.laneWeight}
}

// AttachLanes hands the front end the spawned lanes actor (the
// composition root subscribed its pressure follower to the gateway's
// memory pressure), and prepares priority classes, the health section and
// the metrics.
func (a *Assembly) AttachLanes(h *lanes.Handle) {
	g := a.g
	ad := &g.adm
	ad.lanes = h
	ad.defaultClass = admission.Class(g.opts.Env.Lanes.DefaultClass)
	g.op.AddHealthSection("adaptiveAdmission", g.lanesHealth, briefLanes)
	g.registerLanesMetrics()
}

// Lanes returns the admission handle.
func (g *Gateway) Lanes() *lanes.Handle { return g.adm.lanes }

// priority decides the request's class: the tenant's policy's class, else
// OMNIROUTE_PRIORITY_DEFAULT_CLASS; the header may choose either class,
// except that a tenant configured as batch cannot raise itself. It writes
// the class header, or the error for a bad header value. The last step
// of the model walk (inference.go): the lanes of the admit stage, which
// dispatch runs per candidate, queue by it.
func (c *call) priority() bool {
	a := &c.g.adm
	base, fixed := a.defaultClass, false
	if cl, ok := c.tenantClass(); ok {
		base, fixed = cl, true
	}
	c.lane.class = base
	if v := c.ctx.Request.Header.Peek(PriorityHeader); len(v) > 0 {
		want, ok := admission.ParseClassBytes(v)
		if !ok {
			c.fail(errPriority)
			return false
		}
		if !fixed || base != admission.Batch {
			c.lane.class = want
		}
	}
	c.ctx.Response.Header.Set("X-OmniRoute-Priority", c.lane.class.String())
	return true
}

// attemptCost prices one attempt of the request (see admission.CostConfig):
// what it holds at the provider, from its estimated input and the number
// of answers it asks for.
func (c *call) attemptCost() int64 {
	return c.g.adm.lanes.Config().Cost.Cost(admission.Features{InputTokens: c.plan.input, Fanout: max(c.scan.N, 1)})
}

func (c *call) ticket(t *catalog.Target) lanes.Ticket {
	return lanes.Ticket{Upstream: t.ID, Tenant: c.tenant, Class: c.lane.class, Cost: c.attemptCost(),
		Stream: c.scan.Stream, Deadline: c.deadline, Abort: &c.cancel}
}

// tryAdmit takes t's upstream for the next attempt if it has room now.
func (c *call) tryAdmit(t *catalog.Target, l *lanes.Lease) bool {
	return c.g.adm.lanes.TryAcquire(c.ticket(t), l) == lanes.None
}

// admit waits for room on t's upstream (in the tenant's lane), bounded by
// the max wait and the caller's deadline. It reports the refusal, if any.
func (c *call) admit(t *catalog.Target, l *lanes.Lease) lanes.Reason {
	r := c.g.adm.lanes.Acquire(c.ticket(t), l)
	if r == lanes.None && l.Waited > 0 {
		c.traceAdmissionWait(t, l.Waited)
		c.lane.waited += l.Waited
		var b [20]byte
		c.ctx.Response.Header.SetBytesV("X-OmniRoute-Admission-Wait-Ms", strconv.AppendInt(b[:0], c.lane.waited.Milliseconds(), 10))
	}
	return r
}

// failAdmission answers a refused admission: the caller left (499), or
// the refusal in the caller's dialect with its measured Retry-After.
func (c *call) failAdmission(r lanes.Reason, retry int) {
	if r == lanes.Aborted {
		c.ctx.SetConnectionClose()
		c.ctx.SetStatusCode(499) // the caller left while queued; nobody reads it
		return
	}
	e := laneErrors[r]
	if e == nil {
		e = laneErrors[lanes.Unavailable]
	}
	if retry > 0 && retry != e.RetryAfter {
		cp := *e
		cp.RetryAfter = retry
		e = &cp
	}
	c.routingHeaders()
	c.fail(e)
}

// releaseLease ends the current attempt's lease with its outcome.
func (c *call) releaseLease(o lanes.Outcome, drop bool) {
	if c.lane.lease.Held() {
		c.g.adm.lanes.Release(&c.lane.lease, lanes.Completion{Outcome: o, Drop: drop})
	}
}

// outcomeOf is how an attempt that ended in class class counts for its
// upstream's controller, and whether the provider shed it: a 429, an
// overload 503/529 and a timeout are evidence of congestion; a 500 or 502
// (a bug or a crash) and a refused connection are not: a limit cut would
// not cure them, and the breaker keeps the target out.
func outcomeOf(class messages.FailureClass, reason string) (lanes.Outcome, bool) {
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

// releaseStream ends a committed stream's lease at the end of its relay.
func (c *call) releaseStream() {
	if !c.lane.lease.Held() {
		return
	}
	switch {
	case c.cancel.Cancelled() || c.ctx.Response.StatusCode() == 499:
		c.releaseLease(lanes.Cancelled, false)
	case c.stream.cut:
		c.releaseLease(lanes.UpstreamError, false)
	default:
		c.releaseLease(lanes.Success, false)
	}
}

func (c *call) noteSkip(t *catalog.Target) {
	c.g.adm.lanes.NoteSkipped()
	if c.lane.skips < maxSkipNames {
		c.lane.skipped[c.lane.skips] = int32(t.ID)
	}
	c.lane.skips++
}

// skippedHeader names the targets skipped (no room on their upstream).
func (c *call) skippedHeader(h *fasthttp.ResponseHeader) {
	var b strings.Builder
	for i := 0; i < c.lane.skips && i < maxSkipNames; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.g.targetName(int(c.lane.skipped[i])))
	}
	h.Set("X-OmniRoute-Skipped-Targets", b.String())
}

// logCombo records a combo's decision at debug level.
func (c *call) logCombo(fanout bool, what string) {
	g := c.g
	if !fanout || !g.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	served := ""
	if c.att.target != nil {
		served = c.att.target.Name
	}
	g.log.Debug("combo "+what, "model", c.model.Name, "strategy", c.model.Strategy, "target", served,
		"fallbacks", c.att.fallbacks, "skipped", c.lane.skips, "requestId", string(c.rid))
}

var errPriority = apierror.New(apierror.CodeInvalidPriority)

// laneErrors are the admission rejections as the caller sees them, one
// per lanes.Reason, built from the lanes package's reason table (the
// message, Retry-After) and the table of error codes (status, type, code,
// the message's frame) so that every reason has its answer. The reasons
// that are no refusal (None, Busy from TryAcquire, Aborted: answered 499
// by failAdmission) never reach a caller; they stand on the unavailable
// answer so that no lookup is nil.
var laneErrors = func() (out [lanes.NumReasons]*apierror.Error) {
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

// briefLanes is the adaptiveAdmission section for callers the management
// routes refuse: the figures without the lanes' tenant ids.
func briefLanes(body any) any {
	if s, ok := body.(*lanes.Snapshot); ok {
		s.LaneTenants = nil
		for i := range s.Upstreams {
			s.Upstreams[i].LaneTenants = nil // a fresh snapshot per call: nothing shared is changed
		}
	}
	return body
}

// lanesHealth is the adaptiveAdmission section of the health report.
func (g *Gateway) lanesHealth() (any, string) {
	s := g.adm.lanes.Snapshot()
	status := "ok"
	if s.Shutdown {
		status = "down"
	}
	return s, status
}

// laneState is the admit stage's state: the current attempt's lease on
// its upstream, the priority class, and why admission refused, if it did.
type laneState struct {
	lease        lanes.Lease
	class        admission.Class
	refusal      lanes.Reason
	refusalRetry int
	waited       time.Duration // queued for admission, over all attempts
	skips        int
	skipped      [maxSkipNames]int32 // target ids skipped, for the header
}
