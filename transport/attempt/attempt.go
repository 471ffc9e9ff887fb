// Package attempt is the attempt stage of the request pipeline: the work
// of one attempt on one target. It chooses the attempt's upstream dialect
// and prepares its body (translated by internal/translate when the
// caller's and the provider's dialects differ, fitted to the target's
// model by internal/fit), builds the upstream request, passes the answer
// through (headers filtered, an error redacted, the model renamed, an
// answer or event translated back into the caller's dialect), meters the
// usage of bodies and stream events, and names the failure class of a
// transport error.
//
// Stage is the process-wide part (the clock, the redactor); State is one
// request's, a field of the pipeline's call, kept across its attempts
// (the serving target, the fallbacks taken, a translator a failover to the
// same dialect and model reuses). The stage reaches the rest of the
// request through the port it declares, Request, which transport's call
// implements; it imports no other stage. The order of the attempts (the
// dispatch loop) stays in transport, where the walk is written.
package attempt

import (
	"errors"
	"slices"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/clock"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

// Request is the stage's port on the request it attempts (the pipeline's
// call implements it): what it reads of the call besides its own state.
type Request interface {
	// AttemptBody is the caller's body and its one scan.
	AttemptBody() ([]byte, *jsonscan.Request)
	// AttemptModel is the model serving the request (a fallback model's
	// once one serves; nil before the model is resolved).
	AttemptModel() *catalog.Model
	// AttemptFallbacks is the model the caller named when per-request
	// fallbacks are on (nil otherwise), and whether the body carries the
	// gateway's fallback fields, removed before any provider sees them.
	AttemptFallbacks() (primary *catalog.Model, present bool)
	// Counting reports a count_tokens call: no answer is generated.
	Counting() bool
	// TargetInfo is what the gateway believes about t's model.
	TargetInfo(t *catalog.Target) *modelinfo.Info
	// Metering is the request's usage metering: on when a budget, the
	// tenant's limits or the request log needs the provider's usage
	// report, usage where it is read into, and injected whether the
	// stream's usage chunk was asked for on the caller's behalf (it is
	// then stripped before the caller sees it).
	Metering() (on bool, usage *ledger.Usage, injected *bool)
	// RequestID is the request's id: sent upstream, named in errors.
	RequestID() []byte
}

// Stage is the attempt stage's process-wide state: the clock translated
// answers are dated by and the redactor every passed-through error goes
// through, set once when the gateway is prepared.
type Stage struct {
	clk    clock.Clock
	redact *sanitize.Redactor
}

// Init sets the stage's clock and redactor.
func (s *Stage) Init(clk clock.Clock, redact *sanitize.Redactor) {
	s.clk, s.redact = clk, redact
}

// State is one request's attempt state: the target of the current (at
// the end, the serving) attempt and when it was sent, how many fallbacks
// the request took, the last failure's reason, the attempt's upstream
// dialect (Up) beside the caller's, the body rewritten for the target,
// and for a fusion judge the body it is sent instead of the caller's
// (alt, scanned in altScan); the translation and the fitting of the
// attempt's body.
type State struct {
	Target    *catalog.Target
	Start     time.Time
	Fallbacks int
	Reason    string          // the last failed attempt's reason (failure.Verdict)
	Up        catalog.Surface // the attempt's upstream dialect
	caller    catalog.Surface // the caller's dialect (the route's API)
	out       *bytebufferpool.ByteBuffer
	alt       *bytebufferpool.ByteBuffer
	altScan   jsonscan.Request
	trans     translation // translated.go
	fit       fitState    // fitting.go
}

// Begin starts the request's attempts in the caller's dialect, which is
// also the upstream dialect until an attempt chooses its own.
func (st *State) Begin(caller catalog.Surface) { st.caller, st.Up = caller, caller }

// Recycle gives the attempt's bodies, translator and fitted body back and
// returns the state for the next call, keeping only the judge scan's
// scratch space, the fitter and the frame and rename buffers.
func (st *State) Recycle() State {
	if st.out != nil {
		bytebufferpool.Put(st.out)
	}
	if st.alt != nil {
		bytebufferpool.Put(st.alt)
	}
	scan := st.altScan
	scan.Reset() // its results alias the judge body, gone now
	return State{altScan: scan, trans: st.trans.recycle(), fit: st.fit.recycle()}
}

// BodyDone gives back the body rewritten for the target once nothing
// needs it (a stream committed: no further failover).
func (st *State) BodyDone() {
	if st.out != nil {
		bytebufferpool.Put(st.out)
		st.out = nil
	}
}

// Judge is where a fusion judge's body goes: the caller builds it into
// buf and scans it into scan, and the attempts from then on send it
// instead of the caller's.
func (st *State) Judge() (buf *bytebufferpool.ByteBuffer, scan *jsonscan.Request) {
	if st.alt == nil {
		st.alt = bytebufferpool.Get()
	}
	return st.alt, &st.altScan
}

// Dialect is the table's row of the attempt's upstream dialect.
func (st *State) Dialect() *dia.Dialect { return dia.Of(dia.ID(st.Up)) }

// UpstreamSurface is the dialect an attempt on t speaks for a caller of
// dialect caller: the caller's when the provider speaks it, else the
// provider's first translated one (chat, messages, responses; the catalog
// offers a call only targets that have one).
func UpstreamSurface(caller catalog.Surface, t *catalog.Target) catalog.Surface {
	apis := t.Conn.Provider.APIs
	if apis.Has(caller) {
		return caller
	}
	for _, s := range catalog.Surfaces {
		if apis.Has(s) && s.Translated() {
			return s
		}
	}
	return caller
}

// ForwardedHeaders are caller headers passed to the provider: the
// dialects' version and beta headers (the table's CallerHeaders) and the
// ones every API reads.
var ForwardedHeaders = append(slices.Clone(dia.CallerHeaders), "User-Agent", "Idempotency-Key")

// betaHeader is the Anthropic beta header, the one a provider's beta
// policy (providers.*.anthropic_beta) filters.
var betaHeader = dia.Of(dia.Messages).BetaHeader

// BuildRequest fills x.Req for target t, reached at host: path, auth, the
// caller's selected headers (from in), and the body prepared for the
// attempt (Prepare): translated, fitted, or the caller's with only
// "model" rewritten.
func (st *State) BuildRequest(r Request, in *fasthttp.RequestHeader, x *upstream.Exchange, t *catalog.Target, host string) {
	req := &x.Req
	p := t.Conn.Provider
	h := &req.Header
	d := st.Dialect()
	path := d.Path
	if r.Counting() {
		path = d.CountTokensPath
	}
	body, scan := r.AttemptBody()
	StartRequest(h, p.BasePath, path, host, scan.Stream)
	for _, name := range ForwardedHeaders {
		if st.Up != st.caller && !dia.ForwardsTranslated(name, dia.ID(st.Up)) {
			continue // another dialect's headers mean nothing to this provider
		}
		v := in.Peek(name)
		if len(v) > 0 && name == betaHeader && p.Beta != nil {
			buf := bytebufferpool.Get()
			if v = p.FilterBeta(buf.B[:0], v); len(v) > 0 {
				h.SetBytesV(name, v)
			}
			bytebufferpool.Put(buf)
			continue
		}
		if len(v) > 0 {
			h.SetBytesV(name, v)
		}
	}
	if d.VersionHeader != "" && len(h.Peek(d.VersionHeader)) == 0 {
		h.Set(d.VersionHeader, d.Version)
	}
	for _, kv := range p.Headers {
		h.Set(kv[0], kv[1])
	}
	setAuth(h, p.Auth, t.Conn.APIKey())
	h.SetBytesV("X-Request-Id", r.RequestID())
	if st.Translating() {
		req.SetBodyRaw(st.trans.tbody.B) // the translator wrote the upstream model
		return
	}
	if st.fit.fitted {
		req.SetBodyRaw(st.fit.fbody.B) // the fitter wrote the model and the usage request
		return
	}
	if st.alt == nil && st.injectUsage(r, req, t) {
		return
	}
	if st.alt != nil { // a fusion judge: the caller's request plus the panel's answers
		body, scan = st.alt.B, &st.altScan
	}
	up := st.upstreamModel(r, t)
	if up == "" {
		req.SetBodyRaw(body)
		return
	}
	if st.out == nil {
		st.out = bytebufferpool.Get()
	}
	st.out.B = jsonscan.AppendWithModel(st.out.B[:0], body, scan, up)
	req.SetBodyRaw(st.out.B)
}

// StartRequest writes what every upstream request (a target's, the
// Bifrost relay's) starts with: POST base+path to host, a JSON body, the
// answer wanted as events for a stream, and no compression (a stream is
// relayed as its bytes arrive).
func StartRequest(h *fasthttp.RequestHeader, base, path, host string, stream bool) {
	h.SetMethod(fasthttp.MethodPost)
	uri := bytebufferpool.Get()
	uri.B = append(append(uri.B[:0], base...), path...)
	h.SetRequestURIBytes(uri.B)
	bytebufferpool.Put(uri)
	h.SetHost(host)
	h.SetContentType("application/json")
	if stream {
		h.Set(fasthttp.HeaderAccept, "text/event-stream")
	} else {
		h.Set(fasthttp.HeaderAccept, "application/json")
	}
	h.Set(fasthttp.HeaderAcceptEncoding, "identity")
}

// setAuth writes the provider's credential header, named by the dialect
// table for the provider's auth style.
func setAuth(h *fasthttp.RequestHeader, auth, key string) {
	name := dia.AuthHeader(auth)
	if key == "" || name == "" {
		return
	}
	if auth == dia.AuthBearer {
		v := bytebufferpool.Get()
		v.B = append(append(v.B[:0], "Bearer "...), key...)
		h.SetBytesV(name, v.B)
		bytebufferpool.Put(v)
		return
	}
	h.Set(name, key)
}

// upstreamModel is the model name to write into the body sent to t, or ""
// when the caller's body already names it. A name resolved through an
// alias, pattern or the default model is replaced by the configured
// model's (or the target's upstream) name, so the provider never sees the
// alias.
func (st *State) upstreamModel(r Request, t *catalog.Target) string {
	if st.alt != nil {
		if t.UpstreamModel == "" || t.UpstreamModel == string(st.altScan.Model) {
			return ""
		}
		return t.UpstreamModel
	}
	_, scan := r.AttemptBody()
	if up := t.Upstream(); up != string(scan.Model) {
		return up
	}
	return ""
}

// Classify names the failure class of an exchange's error, its exchange
// or its stream's.
func Classify(err error) messages.FailureClass {
	switch {
	case errors.Is(err, upstream.ErrCanceled):
		return messages.Canceled
	case errors.Is(err, upstream.ErrTimeout):
		return messages.Timeout
	case errors.Is(err, upstream.ErrTooLarge), errors.Is(err, sse.ErrEventTooLarge):
		return messages.Protocol
	}
	return messages.Connect
}
