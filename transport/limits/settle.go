package limits

import (
	"net/netip"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
)

// Outcome is what the request did, as settle knows it: what the tenant's
// settle and the request's record read of the call. The pipeline fills it
// once, at settle, on its stack.
type Outcome struct {
	// Pricing is the model the request ran on last and its prices.
	Pricing
	// Tenant is the call's tenant (a pointer: the record keeps its bytes,
	// which must not be the stack's), Asked the model as the caller named
	// it, RequestID the request's id.
	Tenant    *tenant.ID
	Asked     []byte
	RequestID []byte
	// Start is when the request arrived, Took how long it lasted.
	Start time.Time
	Took  time.Duration
	// Counting: a count_tokens call, no model call (not settled, not
	// logged).
	Counting bool
	// Attempts is the number of attempts; Target the serving (last)
	// attempt's target, nil when none was tried, and Upstream the API it
	// spoke; Metering: its usage is being read (it is still open), Usage
	// what its report said so far.
	Attempts int
	Target   *catalog.Target
	Upstream catalog.Surface
	Metering bool
	Usage    pricing.Usage
	// Stream: the caller asked for a stream; Terminal: its terminal event
	// came; Cut: it was cut.
	Stream, Terminal, Cut bool
	// Status is the answer's status, Reason why the last failed attempt
	// failed, Fallbacks the fallbacks taken, Waited the time queued for
	// admission, ClientIP the caller's address, Changes what the gateway
	// changed in the request (read only when the log is on).
	Status    int
	Reason    string
	Fallbacks int
	Waited    time.Duration
	ClientIP  []byte
	Changes   string
}

// Finish settles the tenant's reservation and logs the request. It runs
// once, from settle, with everything the request used known.
//
// The serving attempt's usage report settles it when the report is final
// (a whole answer's, a stream's usage chunk or terminal event; an
// Anthropic stream's counts are final only at message_stop). A stream
// that ended without one (the caller left, the provider broke off) keeps
// what was reserved, or what was reported so far if that is more: the
// provider may have generated the whole answer. Attempts that failed over
// add what AttemptEnded counted. A request that never reached a provider
// gives everything back.
func (st *State) Finish(s *Stage, o *Outcome) {
	ts := s.tenants
	logOn := ts != nil && ts.Logging()
	if ts == nil || (!st.Meter && !logOn) || o.Counting { // a count is no model call: not logged
		return
	}
	if !st.passed {
		// Refused before the tenant's limits let it through: nothing was
		// reserved, and it is counted, not logged one record each.
		st.logRefusal(s, o)
		return
	}
	fusion := o.Model != nil && o.Model.Strategy == config.StrategyFusion
	reached := o.Attempts > 0 || (fusion && o.Target != nil)
	if st.Meter && o.Metering && o.Attempts > 0 { // the serving attempt is still open
		seen := o.Usage
		seenCost := o.CostOf(o.Target, seen)
		final := seen.Seen && (!o.Stream || o.Upstream != catalog.Messages || o.Terminal)
		if seen.Seen {
			st.addUsage(seen)
		}
		if final {
			st.tokens += seen.Tokens()
			st.cost += seenCost
		} else {
			st.tokens += max(seen.Tokens(), st.est)
			st.cost += max(seenCost, st.estCost)
		}
	} else if !reached {
		st.tokens, st.cost = 0, 0
	}
	if fusion && reached {
		// The panel's answers are not metered: the reservation stands.
		st.tokens, st.cost = max(st.tokens, st.est), max(st.cost, st.estCost)
	}
	if s.shared != nil {
		s.shared.Give(&st.shared, st.tokens, st.cost, !reached)
	}
	if st.res.Active() {
		ts.Settle(&st.res, tenantlimit.Usage{Tokens: st.tokens, Cost: st.cost, Known: reached, Refund: !reached}, s.clk.Now())
	}
	if logOn {
		st.logRequest(s, o, reached)
	}
}

// MaxLoggedModel bounds the model name a record (or a span) keeps for a
// request whose model is not configured (it is the caller's text).
const MaxLoggedModel = 128

// logRequest hands the request's record to the writer, which never
// blocks. Nothing secret is in it: ids, names, numbers, the address class.
func (st *State) logRequest(s *Stage, o *Outcome, reached bool) {
	// The record is the pooled call's (State.rec): Log copies it, and
	// copies the ids from the bytes they are in, so logging a request
	// allocates nothing.
	r := &st.rec
	*r = store.Record{}
	lat := o.Took
	if _, real := s.clk.(clock.Real); real {
		r.Time = o.Start // the same instant, without another clock read
	} else {
		r.Time = s.clk.Now().Add(-lat) // arrival on the injected clock
	}
	var tid []byte
	switch {
	case st.Entry != nil:
		tid, r.TenantName = st.Entry.TenantID.Bytes(), st.Entry.Name
	case *o.Tenant == tenant.Anonymous:
		r.TenantID, r.TenantName = "anonymous", "anonymous"
	case !o.Tenant.IsZero():
		tid = o.Tenant.Bytes()
	}
	if o.Model != nil {
		r.Model = o.Model.Name
	} else if len(o.Asked) > 0 {
		r.Model = strings.ToValidUTF8(string(o.Asked[:min(len(o.Asked), MaxLoggedModel)]), "?")
	}
	// Caller and upstream dialect: the route's API surface, and the API
	// the serving attempt spoke (they differ when it was translated).
	r.CallerDialect = o.Surface.String()
	if o.Target != nil {
		r.Target, r.UpstreamDialect = o.Target.Name, o.Upstream.String()
	}
	r.Status = o.Status
	switch {
	case o.Cut:
		r.ErrorCode = apierror.CodeStreamInterrupted.String()
	case r.Status == 499:
		r.ErrorCode = apierror.CodeClientClosedRequest.String()
	case r.Status < 400:
	case st.errCode != "":
		r.ErrorCode = st.errCode
	case o.Reason != "":
		r.ErrorCode = o.Reason
	default:
		r.ErrorCode = "upstream_error"
	}
	r.Attempts, r.Fallbacks = o.Attempts, o.Fallbacks
	r.AdmissionWait, r.TTFT, r.Latency = o.Waited, st.ttft, lat
	r.TokensIn, r.TokensOut, r.TokensCached = st.in, st.out, st.cached
	if reached {
		r.CostNano = st.cost
	}
	r.ClientIP = clientIPClass(o.ClientIP)
	r.Changes = o.Changes
	s.tenants.Log(r, o.RequestID, tid)
}

// Refusal buckets for callers without a key entry: anonymous callers,
// and everyone else (no key, a refused key, an unconfigured key the auth
// mode let in). Keyed tenants are counted under their own id.
var (
	refusedAnonymous    = []byte("anonymous")
	refusedUnidentified = []byte("unidentified")
)

// logRefusal hands the request log one refusal: the tenant (its key
// entry, or a fixed bucket, so the set stays bounded) and the gateway's
// error code.
func (st *State) logRefusal(s *Stage, o *Outcome) {
	id, name := refusedUnidentified, "unidentified"
	switch {
	case st.Entry != nil:
		id, name = st.Entry.TenantID.Bytes(), st.Entry.Name
	case *o.Tenant == tenant.Anonymous:
		id, name = refusedAnonymous, "anonymous"
	}
	code := st.errCode
	switch {
	case code != "":
	case o.Status == 499:
		code = "client_closed_request"
	default:
		code = "internal_error" // a panic before the limits (transport/panic.go)
	}
	s.tenants.Refused(id, name, code)
}

func clientIPClass(ip []byte) store.IPClass {
	a, _ := netip.AddrFromSlice(ip)
	return store.ClassifyIP(a)
}
