package transport

import (
	"errors"
	"strconv"
	"time"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/upstream"
)

// dispatch tries the model's targets in routing order until one answers,
// failing over only on provider-side failures and only before anything was
// written to the caller. Targets that are cooling down, have an open
// circuit, are out of quota or over their token budget are skipped (those
// approaching a limit go last); when none is usable the request waits for
// the earliest recovery if it fits its wait budget. It reports whether a
// relay owns the call.
func (c *call) dispatch() bool {
	if c.model.Strategy == config.StrategyFusion {
		return c.fusion()
	}
	list := c.model.TargetsFor(c.surface)
	if len(c.fb.Models) > 0 {
		return c.runFallbacks(list)
	}
	return c.runTargets(list, c.model.WeightsFor(c.surface), len(list) > 1)
}

// exhaust is what trying candidates left for the answer when none
// served: the last provider error kept, the last failure's class, and
// how many candidates were passed over for want of a free connection.
type exhaust struct {
	last      attempt.Kept
	lastClass messages.FailureClass
	busy      int
}

// runTargets tries list in routing order (see next). With fanout (a combo)
// each candidate is also probed against the admission lanes and its
// concurrency cap before its attempt (takeTarget): a skipped target costs
// no attempt, and a skip after the first candidate counts as a fallback.
// weights are the round-robin weights of list, by position.
func (c *call) runTargets(list []*catalog.Target, weights []int, fanout bool) bool {
	var x exhaust
	c.beginPlan(list, weights)
	if relay, done := c.runList(list, fanout, &x); done {
		return relay
	}
	c.answerExhausted(list, &x)
	return false
}

// runList tries list (beginPlan planned it) until an attempt answers
// (done, and whether a relay owns the call) or no candidate is left to
// try (not done: x says what failed).
func (c *call) runList(list []*catalog.Target, fanout bool, x *exhaust) (relay, done bool) {
	g := c.g
	// The planner gives up at the attempt cap or the caller's deadline
	// (never sent upstream after it).
	for c.plan.More(g.clk.Now()) {
		t := c.next(list)
		if t == nil && c.plan.Attempts() > 0 && c.lane.Refusal == lanes.None {
			t = c.retry(list, x.lastClass)
		}
		if t == nil {
			if c.lane.Refusal != lanes.None {
				break
			}
			if c.waitForRecovery() {
				continue
			}
			if c.cancel.Cancelled() {
				c.ctx.SetConnectionClose()
				c.ctx.SetStatusCode(499)
				return false, true
			}
			if g.edge.Draining() && c.plan.Attempts() == 0 {
				c.ctx.SetConnectionClose()
				c.fail(errDraining)
				return false, true
			}
			break
		}
		outcome, streaming := c.attempt(t, &x.last, &x.lastClass)
		switch outcome {
		case attemptDone:
			if streaming {
				return true, true // the relay ends the lease
			}
			if c.ctx.Response.StatusCode() >= 300 {
				c.releaseLease(lanes.LocalReject, false)
				c.releaseAttempt(messages.Request) // passed through: not served
			} else if c.counting {
				// A count's quick answer says nothing of how long the
				// upstream takes to answer a prompt: no latency sample
				// for its controller.
				c.releaseLease(lanes.LocalReject, false)
			} else {
				c.releaseLease(lanes.Success, false)
			}
			c.logCombo(fanout, "served")
			return false, true
		case attemptCanceled:
			c.releaseLease(lanes.Cancelled, false)
			c.releaseAttempt(messages.Canceled)
			c.ctx.SetConnectionClose()
			c.ctx.SetStatusCode(499) // nobody reads it; recorded in metrics
			return false, true
		case attemptBusy:
			x.busy++
			c.abandonAttempt()
			c.att.Fallbacks++
			continue
		case attemptExpired:
			c.abandonAttempt()
			c.fail(errDeadline("its deadline passed while it waited for its turn"))
			return false, true
		}
		o, drop := admit.OutcomeOf(x.lastClass, c.att.Reason)
		c.releaseLease(o, drop)
		c.releaseAttempt(x.lastClass)
		c.att.Fallbacks++
	}
	c.logCombo(fanout, "exhausted")
	return false, false
}

// answerExhausted answers a request no candidate served: an admission
// refusal, a prompt no target can take, the caller's deadline, every
// target out (refuse), or the last provider error kept, else what the
// failures were.
func (c *call) answerExhausted(list []*catalog.Target, x *exhaust) {
	g := c.g
	if c.counting && c.lane.Refusal == lanes.None && !c.expired() {
		c.att.Fallbacks = max(c.att.Fallbacks-1, 0)
		c.estimateCount() // no Anthropic-dialect target could count
		return
	}
	if c.plan.Attempts() == 0 {
		switch {
		case c.lane.Refusal != lanes.None:
			c.failAdmission(c.lane.Refusal, c.lane.RefusalRetry)
		case attempt.Unfit(c, list, c.plan.Input):
			c.fail(attempt.TooLarge(c, list, c.plan.Input))
		case c.expired():
			c.fail(errDeadline("no target could be tried in time"))
		default:
			c.refuse()
		}
		return
	}
	c.att.Fallbacks--
	if x.last.Status != 0 {
		c.passThroughError(&x.last)
		c.finalError(x.last.Status, x.lastClass)
		return
	}
	if x.busy == c.plan.Attempts() {
		c.fail(apierror.New(apierror.CodeUpstreamBusy, c.model.Name).Retry(1))
		return
	}
	e := apierror.New(apierror.CodeUpstreamUnavailable, c.model.Name, x.lastClass.String())
	if x.lastClass == messages.Timeout {
		e = apierror.New(apierror.CodeUpstreamTimeout, c.model.Name)
	}
	c.fail(e.Retry(c.plan.Final(0, x.lastClass, g.clk.Now()).RetryAfter))
}

type attemptOutcome uint8

const (
	attemptDone attemptOutcome = iota
	attemptFailover
	attemptCanceled
	// attemptExpired: the caller's deadline passed before the request
	// could be sent; the provider was not asked.
	attemptExpired
	// attemptBusy: the local pool had no free connection; the provider
	// was not asked, so nothing is reported against the target.
	attemptBusy
)

// attempt sends the request to t. On a provider-side failure it records
// the answer in last and asks for failover.
func (c *call) attempt(t *catalog.Target, last *attempt.Kept, lastClass *messages.FailureClass) (attemptOutcome, bool) {
	g := c.g
	if !c.prepareAttempt(t) {
		c.att.Target = t
		return attemptDone, false // refused in the caller's dialect: nothing was sent
	}
	client := g.client(t.Conn.ID)
	x := upstream.AcquireExchange()
	c.buildRequest(x, t)
	c.att.Start = g.clk.Now()
	c.traceAttemptStart(t)
	defer c.traceAttemptEnd()
	if left, ok := c.remaining(c.att.Start); ok {
		if left <= 0 {
			// Its turn came (admission, a pooled connection) after the
			// caller's deadline: the caller is gone, never send it.
			x.Release()
			return attemptExpired, false
		}
		x.Limit = time.Now().Add(left) // the caller is gone by then
	}
	err := client.Do(x, &c.cancel, c.scan.Stream)
	if errors.Is(err, upstream.ErrBusy) {
		x.Release()
		return attemptBusy, false
	}
	c.att.Reason = ""
	if err != nil {
		class := attempt.Classify(err)
		c.report(t, class, 0, 0)
		x.Release()
		*lastClass = class
		if class == messages.Canceled {
			return attemptCanceled, false
		}
		return attemptFailover, false
	}
	provider, local := x.Arrival()
	c.lane.Answered(&c.g.adm, provider, local)
	status := x.Resp.StatusCode()
	c.observe(t, x, status)
	if status < 200 || status >= 300 {
		c.plan.Verdict = failure.Analyze(status, x.Resp.Body())
		class := c.plan.Verdict.Class
		c.att.Reason = c.plan.Verdict.Reason
		c.report(t, class, status, x.TTFB)
		*lastClass = class
		if class.ProviderSide() {
			last.Keep(x, c.att.Up)
			x.Release()
			return attemptFailover, false
		}
		c.att.Target = t
		c.passThrough(x, nil)
		x.Release()
		if c.att.Translating() {
			c.translateAnswer()
		}
		return attemptDone, false
	}
	if !c.scan.Stream || !x.EventStream() {
		c.report(t, messages.OK, status, x.TTFB)
		c.markFirstToken()
		c.att.Target = t
		c.att.MeterBody(c, x)
		if c.scan.Stream {
			// The provider ignored "stream" and sent a plain body.
			if err := x.Buffer(); err != nil {
				x.Release()
				*lastClass = attempt.Classify(err)
				return attemptFailover, false
			}
		}
		c.passThrough(x, nil)
		x.Release()
		if c.att.Translating() {
			c.translateAnswer()
		}
		return attemptDone, false
	}
	class, ok := c.prime(x)
	if !ok {
		c.report(t, class, status, x.TTFB)
		*lastClass = class
		x.Release()
		if class == messages.Canceled {
			return attemptCanceled, false
		}
		last.Status = 0 // a failed stream leaves no answer to pass through
		return attemptFailover, false
	}
	c.report(t, messages.OK, status, x.TTFB)
	provider, local = x.Arrival()
	x.Disarm()
	c.lane.FirstByte(&c.g.adm, provider, local) // first token read: the stream's latency sample
	c.markFirstToken()
	c.att.Target = t
	c.commitStream(x, c.g.opts.Env.Upstream.IdleTimeout.Duration(), nil)
	return attemptDone, true
}

func (c *call) report(t *catalog.Target, class messages.FailureClass, status int, ttfb time.Duration) {
	g := c.g
	g.metrics.target(t.ID).attempts[class].Inc()
	if status != 0 {
		g.metrics.upstreamStatus(t.ID, status)
	}
	// A count's quick answer is no sample of the target's latency (as for
	// its lanes, see runTargets): it still closes circuits and clears
	// streaks, but leaves the TTFB histogram and the average routing
	// reads alone.
	if class == messages.OK && !c.counting {
		g.metrics.target(t.ID).ttfb.Update(ttfb.Seconds())
	}
	c.traceAttemptOutcome(class, status, ttfb)
	m := &messages.AttemptFinished{Target: t.ID, Class: class, Status: status, TTFB: ttfb, Started: c.att.Start, At: g.clk.Now(), NoLatency: c.counting}
	c.plan.Annotate(m, m.At)
	g.targets.Report(m)
}

// reportMidStream records a failure after the stream was committed: the
// attempt was already counted as a success, so only the failure is added.
func (c *call) reportMidStream(class messages.FailureClass) {
	g := c.g
	g.targets.Report(&messages.AttemptFinished{Target: c.att.Target.ID, Class: class, MidStream: true, Started: c.att.Start, At: g.clk.Now()})
}

// routingHeaders tell the caller which target served it and how many
// fallbacks happened.
func (c *call) routingHeaders() {
	h := &c.ctx.Response.Header
	if c.att.Target != nil {
		h.Set("X-OmniRoute-Target", c.att.Target.Name)
	}
	var b [20]byte
	h.SetBytesV("X-OmniRoute-Fallbacks", strconv.AppendInt(b[:0], int64(c.att.Fallbacks), 10))
	if c.att.Fallbacks > 0 {
		c.g.metrics.routes[c.route].fallback.Add(c.att.Fallbacks)
	}
	if c.lane.Skips > 0 {
		c.lane.SkippedHeader(h, c.g.targetName)
	}
}
