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
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/messages"
)

// PriorityHeader chooses a request's priority class.
const PriorityHeader = "X-Omniroute-Priority"

// maxSkipNames bounds the targets named in X-OmniRoute-Skipped-Targets.
const maxSkipNames = 16

// admissionState is the gateway's admission wiring, built by startLanes.
type admissionState struct {
	lanes        *lanes.Handle
	defaultClass admission.Class
	tenantClass  map[tenant.ID]admission.Class
	slot         []int          // target id → concurrency slot (shared by targets with the same name)
	fusion       []*fusionModel // by model index
	metrics      admissionMetrics
}

// startLanes starts the lanes controller and prepares priority classes,
// target caps, weighted round-robin schedules, fusion panels, the health
// section and the metrics.
func (g *Gateway) startLanes() error {
	// Targets that name the same upstream (connection and model) share one
	// concurrency slot, with the smallest cap any of them sets: the cap
	// describes the upstream, whichever model routes to it.
	a := &g.adm
	a.slot = make([]int, len(g.cat.Targets))
	var caps []int
	slots := map[string]int{}
	for _, m := range g.cat.Models {
		fm := g.opts.File.Models[m.Name]
		for i, t := range m.Targets {
			limit := 0
			if i < len(fm.Targets) {
				limit = fm.Targets[i].MaxConcurrent
			}
			idx, ok := slots[t.Name]
			if !ok {
				idx = len(caps)
				slots[t.Name] = idx
				caps = append(caps, limit)
			} else if limit > 0 && (caps[idx] == 0 || limit < caps[idx]) {
				caps[idx] = limit
			}
			a.slot[t.ID] = idx
		}
	}
	h, err := lanes.Spawn(g.system, lanes.Options{Config: g.opts.Env.Lanes.Config(), Clock: g.clk, TargetCaps: caps,
		Logger: g.log.With("component", "admission")})
	if err != nil {
		return err
	}
	a.lanes = h
	if g.pressure != nil {
		// Memory pressure feeds the adaptive limit too: critical halves it
		// at once (once per window), high stops growth.
		g.pressure.Subscribe(func(st *pressure.State) {
			switch st.Severity {
			case pressure.High:
				h.ObservePressure(admission.PressureHigh, st.Reason)
			case pressure.Critical:
				h.ObservePressure(admission.PressureCritical, st.Reason)
			}
		})
	}
	a.defaultClass = admission.Class(g.opts.Env.Lanes.DefaultClass)
	a.tenantClass = map[tenant.ID]admission.Class{}
	byName := map[string]string{}
	for _, t := range g.opts.File.Tenants {
		byName[t.Name] = t.Class
	}
	for _, t := range g.tenants.Tenants() {
		if cl, ok := admission.ParseClass(byName[t.Name]); ok && byName[t.Name] != "" {
			a.tenantClass[t.ID] = cl
		}
	}
	if err := g.buildFusion(); err != nil {
		h.Stop()
		return err
	}
	g.AddHealthSection("adaptiveAdmission", g.lanesHealth)
	g.registerLanesMetrics()
	return nil
}

// Lanes returns the admission controller handle.
func (g *Gateway) Lanes() *lanes.Handle { return g.adm.lanes }

// priority decides the request's class: the tenant's configured class, else
// OMNIROUTE_PRIORITY_DEFAULT_CLASS; the header may choose either class,
// except that a tenant configured as batch cannot raise itself.
func (c *call) priority() (admission.Class, bool) {
	a := &c.g.adm
	base, fixed := a.defaultClass, false
	if cl, ok := a.tenantClass[c.tenant]; ok {
		base, fixed = cl, true
	}
	v := c.ctx.Request.Header.Peek(PriorityHeader)
	if len(v) == 0 {
		return base, true
	}
	want, ok := admission.ParseClassBytes(v)
	if !ok {
		c.fail(errPriority)
		return 0, false
	}
	if fixed && base == admission.Batch {
		return admission.Batch, true
	}
	return want, true
}

// features describes the request, as sent with a body of bodyLen bytes and
// the given stream flag, for pricing. Estimated tokens are the input
// estimate (4 bytes a token) plus the requested output budget, which the
// request may occupy the provider for.
func (c *call) features(bodyLen int, stream bool, fanout int64) admission.Features {
	tokens := int64(bodyLen+3) / 4
	if c.scan.MaxTokens > 0 {
		tokens += c.scan.MaxTokens
	}
	return admission.Features{BodyBytes: int64(bodyLen), EstimatedTokens: tokens, Messages: int64(c.scan.Messages),
		Tools: int64(c.scan.Tools), Fanout: max(fanout, c.scan.N, 1), Streaming: stream}
}

// admit asks the controller for the parent request's lease; it writes the
// rejection and reports false when the request may not proceed.
func (c *call) admitLane() bool {
	a := &c.g.adm
	class, ok := c.priority()
	if !ok {
		return false
	}
	c.class = class
	c.ctx.Response.Header.Set("X-OmniRoute-Priority", class.String())
	fanout := int64(1)
	if f := a.fusion[c.model.Index]; f != nil {
		fanout = int64(len(c.model.TargetsFor(c.surface)))
	}
	cost := a.lanes.Config().Cost.Cost(c.features(len(c.body.B), c.scan.Stream, fanout))
	r := a.lanes.Acquire(lanes.Ticket{Tenant: c.tenant, Class: class, Cost: cost, Abort: &c.cancel}, &c.laneLease)
	switch r {
	case lanes.None:
		if w := c.laneLease.Waited; w > 0 {
			var b [20]byte
			c.ctx.Response.Header.SetBytesV("X-OmniRoute-Admission-Wait-Ms", strconv.AppendInt(b[:0], w.Milliseconds(), 10))
		}
		return true
	case lanes.Aborted:
		c.ctx.SetConnectionClose()
		c.ctx.SetStatusCode(499) // the caller left while queued; nobody reads it
		return false
	}
	c.fail(laneErrors[r])
	return false
}

// releaseLane releases the lease with the request's outcome and its
// latency sample (time to first token for a stream, the whole answer
// otherwise; failures give none), and returns a held target slot.
func (c *call) releaseLane() {
	c.releaseTarget()
	if !c.laneLease.Held() {
		return
	}
	status := c.ctx.Response.StatusCode()
	comp := admission.Completion{Drops: c.drops}
	switch {
	case status == 499 || c.cancel.Cancelled():
		comp.Outcome = admission.Cancelled
	case c.streamCut:
		comp.Outcome = admission.UpstreamError
	case c.shed:
		comp.Outcome = admission.LocalReject // the gateway refused it (targets busy): no upstream failed
	case status == fasthttp.StatusRequestTimeout || status == fasthttp.StatusGatewayTimeout:
		comp.Outcome = admission.Timeout
	case status >= 500 || status == fasthttp.StatusTooManyRequests:
		comp.Outcome = admission.UpstreamError
	case status >= 400:
		comp.Outcome = admission.LocalReject
	default:
		comp.Outcome = admission.Success
		if c.x != nil {
			comp.Latency, comp.Sampled = c.ttft, c.ttft > 0
		} else {
			comp.Latency, comp.Sampled = c.g.clk.Now().Sub(c.sampleStart()), true
		}
	}
	c.g.adm.lanes.Release(&c.laneLease, comp)
}

// sampleStart is where the request's latency sample starts: admission, or
// the fusion judge's dispatch (see call.sampleFrom).
func (c *call) sampleStart() time.Time {
	if !c.sampleFrom.IsZero() {
		return c.sampleFrom
	}
	return c.laneLease.AdmittedAt
}

// isDrop reports attempt outcomes that mean the provider is congested.
func isDrop(class messages.FailureClass) bool {
	return class == messages.RateLimit || class == messages.Capacity || class == messages.Timeout
}

// targetCost prices t as it will be sent: the target's own body length and
// stream flag.
func (c *call) targetCost(t *catalog.Target, bodyLen int, stream bool) int64 {
	if t.UpstreamModel != "" && c.scan.ModelStart >= 0 {
		bodyLen += len(t.UpstreamModel) + 2 - (c.scan.ModelEnd - c.scan.ModelStart)
	}
	return c.g.adm.lanes.Config().Cost.Cost(c.features(bodyLen, stream, 1))
}

// takeTarget checks t before its attempt: its concurrency cap and, for a
// fan-out with lanes on, a non-blocking probe against the parent's lane.
// It holds t's slot on success; on refusal it records the skip.
func (c *call) takeTarget(t *catalog.Target, fanout bool) bool {
	a := &c.g.adm
	switch a.lanes.Probe(c.class, c.targetCost(t, len(c.body.B), c.scan.Stream), a.slot[t.ID], fanout) {
	case admission.ProbeOK:
		c.tslot = a.slot[t.ID] + 1
		return true
	}
	c.noteSkip(t)
	return false
}

func (c *call) noteSkip(t *catalog.Target) {
	if c.skips < maxSkipNames {
		c.skipped[c.skips] = int32(t.ID)
	}
	c.skips++
}

// releaseTarget returns the held target slot, if any.
func (c *call) releaseTarget() {
	if c.tslot != 0 {
		c.g.adm.lanes.ReleaseTarget(c.tslot - 1)
		c.tslot = 0
	}
}

// skippedHeader names the targets skipped (at their cap or refused by the
// admission lanes).
func (c *call) skippedHeader(h *fasthttp.ResponseHeader) {
	var b strings.Builder
	for i := 0; i < c.skips && i < maxSkipNames; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.g.cat.Targets[c.skipped[i]].Name)
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
	if c.target != nil {
		served = c.target.Name
	}
	g.log.Debug("combo "+what, "model", c.model.Name, "strategy", c.model.Strategy, "target", served,
		"fallbacks", c.fallbacks, "skipped", c.skips, "requestId", string(c.rid))
}

var errPriority = &apierror.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_priority",
	Message: "the x-omniroute-priority header must be interactive or batch"}

// laneErrors are the admission rejections as the caller sees them, one
// per lanes.Reason, built from the lanes package's reason table so that
// every reason has its answer.
var laneErrors = func() (out [lanes.NumReasons]*apierror.Error) {
	for r := lanes.Reason(0); r < lanes.NumReasons; r++ {
		out[r] = &apierror.Error{Status: r.Status(), Type: "server_error", Code: r.Code(), RetryAfter: r.RetryAfter(), Message: r.Message()}
	}
	return out
}()

func (c *call) failShed(e *apierror.Error) {
	c.shed = true
	c.routingHeaders()
	c.fail(e)
}

func errTargetsBusy(m *catalog.Model) *apierror.Error {
	return &apierror.Error{Status: 503, Type: "server_error", Code: "targets_busy", RetryAfter: 1,
		Message: "every target of model \"" + m.Name + "\" was skipped: each is at its max_concurrent limit or was refused by the admission lanes; retry after the Retry-After delay"}
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
