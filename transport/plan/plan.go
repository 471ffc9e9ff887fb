// Package plan is the plan stage of the request pipeline: one request's
// routing through its model's candidates. It ranks them through the
// planner (internal/planner) on the evidence of the published targets,
// quota and ledger snapshots, takes the next one (its upstream admitted
// by the admit stage, its token reservation in the ledger and, for a
// half-open circuit, its probe claimed), retries the last failed one
// when nothing else is left, waits for a recovering one when the wait
// fits, settles the reservation at the end of each attempt and of the
// request, and words the answer when no candidate could serve (the
// refusal, the last provider error's Retry-After and X-Should-Retry). It
// also keeps a conversation on its target (session affinity,
// session.go) and reads the caller's per-request fallback models
// (fallbacks.go).
//
// Stage is the process-wide part (the routing actors' handles and the
// routing settings the composition root attached, the cluster's port in
// cluster mode); State is one request's, a field of the pipeline's call,
// and Fallbacks another. The stage reaches the rest of the pipeline
// through the ports it declares: Gateway (the clock, a target's quota
// connection and ledger slot, the skip counters, the supervised
// services, the drain) and Request (the request being planned, its
// admission and its tenant's metering), which transport implements; it
// imports no other stage. Refusals are returned for the pipeline to
// render in the caller's dialect.
package plan

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/planner"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/port"
)

// Skip is why the planner passed a candidate over (planner.Skip), the
// label of omniroute_routing_skips_total.
type Skip = planner.Skip

// Routing skip reasons (internal/planner's, by index), and their metric
// labels.
const (
	SkipCooling   = planner.SkipCooling
	SkipCircuit   = planner.SkipCircuit
	SkipExhausted = planner.SkipExhausted
	SkipBudget    = planner.SkipBudget
	NumSkips      = planner.NumSkips
)

// SkipNames are the skip reasons' metric labels, by Skip.
var SkipNames = [NumSkips]string{"cooling", "circuit_open", "quota_exhausted", "token_budget", "service_unavailable"}

// Canceller is the request's going-away signal a wait for a recovering
// target watches (upstream.Cancel implements it).
type Canceller = planner.Canceller

// Gateway is the stage's port on the gateway (transport implements it):
// its clock, what it knows of a target beyond the catalog, its counters
// and its supervised services, and whether it drains.
type Gateway interface {
	Now() time.Time
	// Where is target's quota connection, the index of its upstream
	// model in that connection's quota spec, and its ledger slot.
	Where(target int) (conn, model, slot int)
	// CountSkip counts target passed over for why.
	CountSkip(target int, why Skip)
	// ServiceDown reports whether t's supervised service is not running
	// as the gateway's own child; ServiceDownError is the answer when the
	// model's targets wait for service to run again.
	ServiceDown(t *catalog.Target) bool
	ServiceDownError(model, service string) *apierror.Error
	// Draining reports whether the gateway is shutting down.
	Draining() bool
}

// Event is something the stage counts on the request's route.
type Event uint8

// The stage's events.
const (
	// Retried: the last failed target was retried (RetryFailed).
	Retried Event = iota
	// WaitBegan and WaitEnded bracket a wait for a recovering target.
	WaitBegan
	WaitEnded
	// Waited: a wait ended in time to try again.
	Waited
	// Refused: no candidate could be tried (Refused).
	Refused
)

// Request is the stage's port on the request being planned (the
// pipeline's call implements it): what it asks for, the admit stage's
// lease on a candidate's upstream, the tenant stage's metering, and
// where the stage's events are counted.
type Request interface {
	// Ctx is the request's fasthttp context (the session headers).
	Ctx() *fasthttp.RequestCtx
	// Model is the model being planned (the requested one or a fallback);
	// Surface the API the caller calls.
	Model() *catalog.Model
	Surface() catalog.Surface
	// Parsed is the request body and its scan.
	Parsed() ([]byte, *jsonscan.Request)
	// Counting: a count_tokens call (generates nothing).
	Counting() bool
	// Deadline is when the caller stops waiting (zero: it did not say).
	Deadline() time.Time
	// Cursor advances the model's round-robin cursor in the routing
	// config the request started on and returns its value before.
	Cursor() uint64
	// Resolve resolves a model name as the model field is (nil and the
	// answer when it names none).
	Resolve(name []byte) (*catalog.Model, *apierror.Error)
	// ModelRefused is the answer when the caller's key may not use the
	// model named name, else nil; the stage may change it.
	ModelRefused(name []byte) *apierror.Error
	// Fits reports whether the prompt fits t's model (its window, its
	// tools).
	Fits(t *catalog.Target) bool
	// Metered reports whether the tenant's limits or the request log
	// need the provider's usage report.
	Metered() bool
	// AttemptEnded adds what an attempt that will not serve the request
	// cost the tenant.
	AttemptEnded(class messages.FailureClass)
	// TryAdmit takes t's upstream for the next attempt if it has room
	// now; WaitAdmit waits for room in the tenant's lane and reports
	// false when admission refused (the refusal is the admit stage's to
	// answer). NoteBusy counts t skipped for want of room;
	// DropAdmission gives back the lease of an attempt never sent.
	TryAdmit(t *catalog.Target) bool
	WaitAdmit(t *catalog.Target) bool
	NoteBusy(t *catalog.Target)
	DropAdmission()
	// Canceller is the request's going-away signal.
	Canceller() Canceller
	// Count counts e on the request's route.
	Count(e Event)
}

// Config is what the stage reads of the configuration, fixed at Attach.
type Config struct {
	// QuotaAware: the quota and ledger snapshots are evidence and the
	// token reservation is taken (OMNIROUTE_QUOTA_AWARE_ROUTING).
	QuotaAware bool
	// MaxWait bounds a wait for a recovering target.
	MaxWait time.Duration
	// DefaultOutput is the output estimate of a request that names no
	// max_tokens.
	DefaultOutput int64
	// MaxAttempts caps the attempts of one request.
	MaxAttempts int
}

// Stage is the plan stage's process-wide state: the routing settings,
// the gateway's port, the targets, ledger and quota actors' handles, and
// in cluster mode the cluster's port.
type Stage struct {
	cfg     Config
	gw      Gateway
	targets *targets.Handle
	ledger  *ledgeractor.Handle
	quota   *quotaactor.Handle
	cluster port.Cluster // nil for a single node
}

// Attach hands the stage the routing settings, the gateway's port and
// the spawned routing actors.
func (s *Stage) Attach(cfg Config, gw Gateway, t *targets.Handle, l *ledgeractor.Handle, q *quotaactor.Handle) {
	s.cfg, s.gw, s.targets, s.ledger, s.quota = cfg, gw, t, l, q
}

// AttachCluster hands the stage the cluster's port (cluster mode only):
// a ledger reservation then also takes this node's share of the
// cluster's pools, and its settle gives it back.
func (s *Stage) AttachCluster(c port.Cluster) { s.cluster = c }

// Estimate is the token estimate of a request: its input, and the
// output it may generate (max_tokens, else the default, times n).
func (s *Stage) Estimate(body []byte, scan *jsonscan.Request) (in, out int64) {
	return ledger.Estimate(body, scan.MaxTokens, scan.N, s.cfg.DefaultOutput)
}

// State is one request's routing state: the planner's decisions
// (internal/planner: ranking, tried candidates, recovery, waiting), the
// token reservation held and what the attempt's answer said. It lives in
// the pooled call and keeps its buffers.
type State struct {
	planner.Plan

	weights []int // round-robin weights of the candidates, by position
	busy    []int // candidates passed over for want of room, this round
	// list is the candidate list being planned (for Evidence).
	list []*catalog.Target
	// snap is the targets snapshot of the current ranking; s and r the
	// stage and request Evidence reads, while Rank runs.
	snap *targets.Snapshot
	s    *Stage
	r    Request

	// Input is the request's input estimate (the fitter, the admission
	// cost and fusion read it); est adds the output estimate, what the
	// reservation takes.
	Input, est int64
	res        ledgeractor.Reservation
	shared     port.ClusterShare // the reservation's share of the cluster's pools
	probeID    int               // target whose half-open probe this attempt holds, or -1
	// Usage is the serving attempt's usage report, read when Metering
	// (a reservation is held, or the tenant's limits or the request log
	// need it). Injected: include_usage was added upstream, so the
	// usage-only chunk is stripped before it reaches a caller who did not
	// ask for it.
	Usage              ledger.Usage
	Metering, Injected bool

	// Per attempt: the parsed rate-limit headers and the failure verdict,
	// attached to the attempt's report (Annotate).
	Obs     *messages.QuotaObservation
	Verdict failure.Verdict

	// svcDown names the supervised service of a candidate passed over
	// because it is not running as the gateway's own child.
	svcDown string

	// sess is the conversation's session affinity (session.go).
	sess sessionState
	// waiter serves waits for a cooling target; kept across uses.
	waiter planner.Waiter
}

// Recycle returns the state for the next request, keeping its buffers.
func (st *State) Recycle() State {
	q := State{Plan: st.Plan, busy: st.busy[:0], probeID: -1, waiter: st.waiter, sess: sessionState{hashes: st.sess.hashes[:0]}}
	q.Plan.Reset()
	return q
}

// Prepare plans routing over list (weights: the round-robin weights, by
// position): the token estimate and the wait budget.
func (st *State) Prepare(s *Stage, r Request, list []*catalog.Target, weights []int) {
	st.weights, st.list = weights, list
	st.probeID = -1
	maxWait := s.cfg.MaxWait
	if r.Counting() {
		// A count runs no prompt: it costs its upstream the least, and
		// with no target usable the estimate answers at once.
		maxWait = 0
	} else {
		in, out := s.Estimate(r.Parsed())
		st.Input, st.est = in, in+out
	}
	st.Begin(len(list), s.gw.Now(), planner.Limits{MaxAttempts: s.cfg.MaxAttempts, MaxWait: maxWait, Deadline: r.Deadline()})
}

// rank has the planner score the untried candidates from the published
// snapshots and order the eligible ones by the model's strategy.
func (st *State) rank(s *Stage, r Request, list []*catalog.Target) {
	st.list, st.snap = list, s.targets.Snapshot()
	var o planner.Order
	if m := r.Model(); m.Strategy == config.StrategyRoundRobin && len(list) > 1 {
		o = planner.Order{RoundRobin: true, Cursor: r.Cursor(), Schedule: m.ScheduleFor(r.Surface())}
		if !st.sess.done { // once per request: the body does not change
			st.sess.key, st.sess.done = sessionKey(r), true
		}
		if st.sess.key != 0 {
			o.Session, o.Hashes = st.sess.key, st.targetHashes(list)
		}
	}
	st.s, st.r = s, r
	st.Rank(st, len(list), s.gw.Now(), o)
	st.snap, st.s, st.r = nil, nil, nil
}

// Evidence gives the planner what the snapshots say about candidate i
// (planner.Source).
func (st *State) Evidence(i int, now time.Time, e *planner.Evidence) {
	s, r := st.s, st.r
	t := st.list[i]
	e.Weight = st.weights[i]
	if r.Counting() && !t.Conn.Provider.APIs.Has(catalog.Messages) {
		e.Unusable = true // only an Anthropic-dialect provider counts tokens
		return
	}
	if s.gw.ServiceDown(t) {
		e.ServiceDown, st.svcDown = true, t.Conn.Provider.Service
		return
	}
	if !r.Counting() && !r.Fits(t) {
		e.Unusable = true // the prompt is above its window, or it takes no tools
		return
	}
	if snap := st.snap; snap != nil && t.ID < len(snap.Targets) {
		ts := &snap.Targets[t.ID]
		e.Known = true
		e.ConsecutiveFailures, e.ErrorRate, e.TTFBMillis = ts.ConsecutiveFailures, ts.ErrorRate, ts.TTFBEWMAMillis
		e.Open, e.CoolUntil, e.RateLimited = ts.Open, ts.CoolUntil, ts.RateLimited
	}
	if s.cfg.QuotaAware {
		conn, model, slot := s.gw.Where(t.ID)
		e.QuotaAware = true
		e.Quota = s.quota.ModelStatus(conn, model, now)
		if e.Quota == quota.StatusExhausted {
			e.QuotaRecovery = s.quota.Recovery(conn, model)
		}
		// A count generates nothing (its estimate is 0 tokens) but is one
		// request of the provider's request budget.
		e.Budget, e.BudgetEnd = s.ledger.Check(slot, st.est, now)
	}
}

// Skipped counts a candidate the planner passed over (planner.Source).
func (st *State) Skipped(i int, why planner.Skip) {
	st.s.gw.CountSkip(st.list[i].ID, why)
}

// Next returns the next candidate to attempt: eligible and untried, its
// upstream admitted (the admit stage's lease holds it), its token
// reservation and (for a half-open circuit) its probe claimed; or nil
// when no untried candidate is usable now, or admission refused.
//
// Candidates are taken in routing order, but one whose upstream has no
// room now is passed over for a later one that has (spill-over, as a
// target at its max_concurrent always was): capacity is per upstream, so a
// model's fast provider serves what its slow one cannot. When none has
// room, the request waits in its lane of the first one's queue.
func (st *State) Next(s *Stage, r Request, list []*catalog.Target) *catalog.Target {
	if !st.Ranked() {
		st.rank(s, r, list)
	}
	st.busy = st.busy[:0]
	for _, i := range st.Candidates() {
		if st.Tried(i) {
			continue
		}
		if !r.TryAdmit(list[i]) {
			st.busy = append(st.busy, i)
			continue
		}
		if st.claim(s, r, list, i, st.NeedsProbe(i)) {
			for _, j := range st.busy {
				r.NoteBusy(list[j])
			}
			return list[i]
		}
	}
	if len(st.busy) == 0 {
		return nil
	}
	first := st.busy[0]
	if !r.WaitAdmit(list[first]) {
		return nil
	}
	if st.claim(s, r, list, first, st.NeedsProbe(first)) {
		return list[first]
	}
	return nil
}

// claim finishes taking candidate i, whose upstream is admitted: it
// reserves the token budget and, when probe is set, claims the target's
// single half-open probe. It releases the admission and reports false when
// either is refused.
func (st *State) claim(s *Stage, r Request, list []*catalog.Target, i int, probe bool) bool {
	t := list[i]
	now := s.gw.Now()
	if s.cfg.QuotaAware {
		_, _, slot := s.gw.Where(t.ID)
		res, b, end := s.ledger.Reserve(slot, st.est, now)
		affordable := b.Affordable()
		if affordable && res.Active && s.cluster != nil {
			// Cluster mode: this node's share of the budget, taken from
			// its pool (atomics; a refill is asynchronous).
			if ok, retry := s.cluster.TakeLedger(&st.shared, slot, st.est, now); !ok {
				s.ledger.Settle(&res, 0, true)
				affordable, end = false, retry
			}
		}
		if !affordable { // another request took the budget since rank
			r.DropAdmission()
			s.gw.CountSkip(t.ID, SkipBudget)
			st.Refuse(i, end)
			return false
		}
		st.res = res
	}
	if probe {
		if !s.targets.TryProbe(t.ID, now) { // another request is probing
			r.DropAdmission()
			st.settleLedger(s, 0, true)
			s.gw.CountSkip(t.ID, SkipCircuit)
			st.Refuse(i, now.Add(time.Second))
			return false
		}
		st.probeID = t.ID
	}
	st.Take(i)
	// Read the provider's usage only when a budget, a tenant's limits or
	// the request log needs it; ask for the stream's usage chunk then, too.
	// A count's answer (input_tokens) is no usage: it spent none.
	st.Metering, st.Injected, st.Usage = (st.res.Active || r.Metered()) && !r.Counting(), false, ledger.Usage{}
	return true
}

// RetryFailed returns the last failed target once more when nothing else
// is left (planner.Plan.Retry says when). The retry is the target's
// probe: its success closes the circuit the failure opened, and only one
// request retries at a time.
func (st *State) RetryFailed(s *Stage, r Request, list []*catalog.Target, class messages.FailureClass) *catalog.Target {
	i := st.Retry(class, s.gw.Now())
	if i < 0 {
		return nil
	}
	t := list[i]
	if !r.WaitAdmit(t) {
		return nil
	}
	if !st.claim(s, r, list, i, true) {
		return nil
	}
	r.Count(Retried)
	return t
}

// Annotate attaches the attempt's headers, verdict and probe flag to its
// report and has the planner learn when the target may recover.
func (st *State) Annotate(m *messages.AttemptFinished, now time.Time) {
	m.Quota, m.Reason, m.RetryAfter = st.Obs, st.Verdict.Reason, st.Verdict.RetryAfter
	if st.probeID == m.Target {
		m.Probe, st.probeID = true, -1
	}
	st.Learn(m.Class, st.Obs, m.RetryAfter, now)
	st.Obs, st.Verdict = nil, failure.Verdict{}
}

// Abandon gives back what the current attempt took when it was never
// sent: its admission, its token reservation (refunded) and its
// half-open probe.
func (st *State) Abandon(s *Stage, r Request) {
	r.DropAdmission()
	st.EndAttempt(s, r, messages.Request)
	if st.probeID >= 0 {
		s.targets.ReleaseProbe(st.probeID)
		st.probeID = -1
	}
}

// EndAttempt settles the reservation of an attempt that will not serve
// the request: a refund when the provider refused or was never reached,
// the input estimate when it may have started working (timeout, caller
// gone).
func (st *State) EndAttempt(s *Stage, r Request, class messages.FailureClass) {
	r.AttemptEnded(class) // what it cost the tenant
	switch class {
	case messages.Timeout, messages.Canceled:
		st.settleLedger(s, st.Input, false)
	default:
		st.settleLedger(s, 0, true)
	}
	st.Metering, st.Injected = false, false
}

// SettleUsage settles the serving attempt's reservation at the end of the
// request: the provider's usage report when one was seen (for a stream cut
// short, what was reported so far), else the estimate.
func (st *State) SettleUsage(s *Stage) {
	if !st.res.Active {
		return
	}
	actual := st.est
	if st.Usage.Seen {
		actual = st.Usage.Tokens()
	}
	st.settleLedger(s, actual, false)
}

// settleLedger settles the attempt's token reservation (and, in cluster
// mode, its share of the cluster's pools) with actual tokens, or refunds
// it.
func (st *State) settleLedger(s *Stage, actual int64, refund bool) {
	if s.cluster != nil && st.res.Active {
		s.cluster.Give(&st.shared, actual, 0, refund)
	}
	s.ledger.Settle(&st.res, actual, refund)
}

// AwaitRecovery waits, when no untried candidate is usable, for the
// earliest recovery if the planner says it comes in time
// (planner.Plan.Wait). It sleeps on the planner's timer and wakes early
// when the targets' state changes (a probe closed a circuit) or the
// caller leaves; it reports false when it did not wait, or the wait ended
// with the caller gone or the gateway draining.
func (st *State) AwaitRecovery(s *Stage, r Request) bool {
	changed := s.targets.Changed()
	d, ok := st.Wait(s.gw.Now())
	if !ok {
		return false
	}
	if d <= 0 {
		return true
	}
	r.Count(WaitBegan)
	end, _ := st.waiter.Wait(d, changed, r.Canceller())
	r.Count(WaitEnded)
	if end == planner.WaitCancelled || s.gw.Draining() {
		return false
	}
	r.Count(Waited)
	return true
}

// Refused is the answer when no candidate could be tried: every target
// is cooling down, has an open circuit, is out of quota or over its token
// budget, and the earliest recovery is beyond the wait budget. When each
// is out because it failed, the provider is down: 503
// targets_unavailable. When any is out for a limit (a provider's 429, an
// exhausted quota, a token budget), 429 targets_exhausted. Both carry
// Retry-After, the earliest recovery; noRetry asks for X-Should-Retry:
// false. When only a supervised service's return would help, the answer
// is that it is down.
func (st *State) Refused(s *Stage, r Request, model string) (e *apierror.Error, noRetry bool) {
	if st.svcDown != "" && st.EarliestRecovery().IsZero() {
		// Nothing else will recover: the model's targets wait for their
		// service to run again.
		return s.gw.ServiceDownError(model, st.svcDown), false
	}
	rf := st.Refusal(s.gw.Now())
	r.Count(Refused)
	after := strconv.Itoa(rf.RetryAfter)
	if rf.Outage {
		e = apierror.New(apierror.CodeTargetsUnavailable, model, after).Retry(rf.RetryAfter)
	} else {
		e = apierror.New(apierror.CodeTargetsExhausted, model, after).Retry(rf.RetryAfter)
	}
	return e, rf.NoRetry
}

// FinalError adjusts h, the headers of the last provider error passed
// through after failover ran out, as the planner advises
// (planner.Plan.Final): X-Should-Retry: false when a retry is pointless,
// a 429's Retry-After set to when the earliest candidate recovers, and a
// 5xx that gave none a Retry-After.
func (st *State) FinalError(s *Stage, h *fasthttp.ResponseHeader, status int, class messages.FailureClass) {
	f := st.Final(status, class, s.gw.Now())
	if f.NoRetry {
		h.Set("X-Should-Retry", "false")
	}
	if f.RetryAfter > 0 && (status == 429 || len(h.Peek(fasthttp.HeaderRetryAfter)) == 0) {
		var b [20]byte
		h.SetBytesV(fasthttp.HeaderRetryAfter, strconv.AppendInt(b[:0], int64(f.RetryAfter), 10))
	}
}
