package attempt

import (
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/fit"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/modelinfo"
)

// Every attempt's body is made to fit its target's model
// (internal/fit, rules in docs/models.md): after translation when the
// attempt translates, on the caller's body when it is relayed raw. A
// target whose model the table knows nothing about (modelinfo.Info
// Permissive) is skipped without looking at the body, so the raw relay
// of such a request is what it was. The changes are told in
// X-OmniRoute-Dropped and X-OmniRoute-Adjusted and kept in the request
// log; in strict mode (the model's strict, the model table's strict, or
// X-OmniRoute-Strict: true) the first change is refused instead.

// fitState is the fitting's state: the fitter and the body it fitted;
// fitted when the attempt sends fbody, fitRan when the fitter's changes
// are the attempt's; the caller's strict setting; reply, the caller's
// model name as a JSON string when answers are renamed to it, and rbuf,
// a renamed answer or event.
type fitState struct {
	fitter fit.Fitter
	fbody  *bytebufferpool.ByteBuffer
	fitted bool
	fitRan bool
	strict uint8
	reply  []byte
	rbuf   []byte
}

// recycle gives the fitted body back and returns the state for the next
// call, keeping the fitter and the rename buffers.
func (f *fitState) recycle() fitState {
	if f.fbody != nil {
		bytebufferpool.Put(f.fbody)
	}
	return fitState{fitter: f.fitter, reply: f.reply[:0], rbuf: f.rbuf[:0]}
}

// unknownInfo is what is known of a target outside the table's reach.
var unknownInfo = modelinfo.Shipped().Lookup("")

// UnknownInfo is what is known of a target outside the table's reach.
func UnknownInfo() *modelinfo.Info { return &unknownInfo }

// BuildInfo resolves each target's model (by target ID; n is the number
// of IDs) in the model table, with its own model_info on top.
func BuildInfo(tab *modelinfo.Table, cat *catalog.Catalog, n int) []*modelinfo.Info {
	out := make([]*modelinfo.Info, n)
	for _, t := range cat.Targets {
		i := tab.ForTarget(t.Upstream(), t.Info)
		out[t.ID] = &i
	}
	return out
}

// gatewayFields are request fields only the gateway reads (per-request
// fallbacks), removed before any provider sees them.
var gatewayFields = []string{"models", "fallbacks"}

// fitRaw fits the caller's body for target t, relayed raw, and returns
// strict mode's refusal, if any. The fitted body, when anything changed,
// is fbody and BuildRequest sends it as it is (the model name and the
// usage request are written by the fitter then).
func (st *State) fitRaw(r Request, t *catalog.Target) *apierror.Error {
	f := &st.fit
	f.fitted, f.fitRan = false, false
	if r.Counting() || !st.caller.Translated() {
		return nil // a token count or an embeddings call: no answer to generate
	}
	info := r.TargetInfo(t)
	_, present := r.AttemptFallbacks()
	if info.Permissive() && !present {
		return nil
	}
	body, scan := r.AttemptBody()
	members := scan.Members
	if st.alt != nil { // a fusion judge
		body, members = st.alt.B, st.altScan.Members
	}
	o := fit.Options{Strict: st.strictFor(r, info), Model: st.upstreamModel(r, t)}
	if present {
		o.Consume = gatewayFields
	}
	on, _, injected := r.Metering()
	if st.alt == nil && st.Up == catalog.Chat && scan.Stream && !scan.IncludeUsage && on {
		o.IncludeUsage = true
		*injected = true
	}
	if f.fbody == nil {
		f.fbody = bytebufferpool.Get()
	}
	out, changed, err := f.fitter.Fit(f.fbody.B[:0], body, members, dia.ID(st.Up), info, &o)
	f.fitRan = true
	if err != nil {
		return refusal(err)
	}
	if changed {
		f.fbody.B, f.fitted = out, true
	} else if o.IncludeUsage {
		*injected = false // nothing written: injectUsage will
	}
	return nil
}

// fitTranslated fits the translated body for target t.
func (st *State) fitTranslated(r Request, t *catalog.Target) *apierror.Error {
	f := &st.fit
	f.fitRan = false
	info := r.TargetInfo(t)
	if info.Permissive() {
		return nil
	}
	if f.fbody == nil {
		f.fbody = bytebufferpool.Get()
	}
	_, scan := r.AttemptBody()
	// The caller's limit, when it set one, is its own; else the
	// translator wrote its default, which may be fitted silently.
	o := fit.Options{Strict: st.strictFor(r, info), OwnLimit: scan.MaxTokens < 0, Caller: dia.ID(st.caller)}
	out, changed, err := f.fitter.Fit(f.fbody.B[:0], st.trans.tbody.B, nil, dia.ID(st.Up), info, &o)
	f.fitRan = true
	if err != nil {
		return refusal(err)
	}
	if changed {
		f.fbody.B = out
		st.trans.tbody, f.fbody = f.fbody, st.trans.tbody
	}
	return nil
}

// FitMember fits a fusion panel member's body to its model (info); the
// member's changes are not reported (the judge's answer is), and a body
// that cannot be fitted is sent as it is.
func (st *State) FitMember(body []byte, info *modelinfo.Info) []byte {
	if info.Permissive() {
		return body
	}
	if fb, changed, err := st.fit.fitter.Fit(nil, body, nil, dia.ID(st.caller), info, &fit.Options{}); err == nil && changed {
		return fb
	}
	return body
}

// strictFor reports whether the call refuses changes for a target whose
// model is info: the gateway model's strict, the model table's (or the
// config's model_info) strict, or the caller's X-OmniRoute-Strict.
func (st *State) strictFor(r Request, info *modelinfo.Info) bool {
	switch st.fit.strict {
	case strictOn:
		return true
	case strictOff:
		return false
	}
	m := r.AttemptModel()
	return info.Strict || (m != nil && m.Strict)
}

// The caller's X-OmniRoute-Strict.
const (
	strictUnset uint8 = iota
	strictOn
	strictOff
)

// ReadStrict reads the caller's X-OmniRoute-Strict value v; a value other
// than true or false is refused (400). Fitting reads the setting per
// attempt.
func (st *State) ReadStrict(v []byte) *apierror.Error {
	switch string(v) {
	case "":
		st.fit.strict = strictUnset
	case "true", "1":
		st.fit.strict = strictOn
	case "false", "0":
		st.fit.strict = strictOff
	default:
		return apierror.New(apierror.CodeInvalidStrict, string(v))
	}
	return nil
}

// refusal is the answer to a fitting error: a strict refusal is 400
// naming the caller's field.
func refusal(err error) *apierror.Error {
	r, ok := err.(*fit.Refusal)
	if !ok {
		return apierror.InvalidJSON(err.Error())
	}
	return apierror.New(apierror.CodeUnsupportedParameter, r.Field, r.Message).WithParam(r.Field)
}

// changeHeaders tells the caller what reached the provider differently
// from what it sent: X-OmniRoute-Dropped lists fields dropped (by the
// translator's rules and the model's), X-OmniRoute-Adjusted the values
// changed (field=from->to), both by the caller's names.
func (st *State) changeHeaders(h *fasthttp.ResponseHeader) {
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	if b.B = st.appendChanges(b.B[:0], fit.Dropped); len(b.B) > 0 {
		h.SetBytesV("X-OmniRoute-Dropped", b.B)
	}
	if b.B = st.appendChanges(b.B[:0], fit.Adjusted); len(b.B) > 0 {
		h.SetBytesV("X-OmniRoute-Adjusted", b.B)
	}
}

// appendChanges appends the serving attempt's changes of kind k,
// comma-separated, by the caller's names.
func (st *State) appendChanges(dst []byte, k fit.Kind) []byte {
	n := len(dst)
	sep := func() {
		if len(dst) > n {
			dst = append(dst, ',')
		}
	}
	if k == fit.Dropped && st.Translating() {
		for _, f := range st.trans.tr.Dropped() {
			sep()
			dst = append(dst, f...)
		}
	}
	if !st.fit.fitRan {
		return dst
	}
	up, caller := dia.ID(st.Up), dia.ID(st.caller)
	for _, ch := range st.fit.fitter.Changes() {
		name := fit.CallerName(ch.Field, up, caller)
		if ch.Kind != k || name == "" {
			continue // not the caller's field: the translation added it
		}
		sep()
		dst = append(dst, name...)
		if k == fit.Adjusted {
			dst = append(dst, '=')
			dst = append(dst, ch.From...)
			dst = append(dst, "->"...)
			dst = append(dst, ch.To...)
		}
	}
	return dst
}

// ChangesForLog is the request log's changes field of the serving
// attempt ("" when it changed nothing).
func (st *State) ChangesForLog() string {
	if st.Target == nil || (!st.fit.fitRan && !st.Translating()) {
		return ""
	}
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	d := st.appendChanges(nil, fit.Dropped)
	a := st.appendChanges(nil, fit.Adjusted)
	if len(d) > 0 {
		b.B = append(append(b.B, "dropped="...), d...)
	}
	if len(a) > 0 {
		if len(b.B) > 0 {
			b.B = append(b.B, "; "...)
		}
		b.B = append(append(b.B, "adjusted="...), a...)
	}
	return string(b.B)
}

// setReplyModel decides, for the attempt on t, whether answers must be
// renamed: they carry the caller's model name whenever the gateway sent
// another one upstream (an alias, a pattern, a target's model).
func (st *State) setReplyModel(r Request, t *catalog.Target) {
	f := &st.fit
	f.reply = f.reply[:0]
	if r.Counting() {
		return
	}
	m := r.AttemptModel()
	if p, _ := r.AttemptFallbacks(); p != nil && m != p { // a fallback model serves: its name
		if m.Name != t.Upstream() {
			f.reply = apierror.AppendString(f.reply, m.Name)
		}
		return
	}
	if _, scan := r.AttemptBody(); string(scan.Model) != t.Upstream() {
		f.reply = apierror.AppendString(f.reply, scan.Model)
	}
}

// Renamed returns b with every "model" string value replaced by the
// caller's model name (setReplyModel), in the rename buffer; b itself
// when no renaming is due.
func (st *State) Renamed(b []byte) []byte {
	f := &st.fit
	if len(f.reply) == 0 {
		return b
	}
	out, n := jsonscan.AppendReplacingStrings(f.rbuf[:0], b, "model", f.reply)
	if n == 0 {
		return b
	}
	f.rbuf = out
	return out
}

// Fits reports whether a target whose model is info can take the request
// at all: its context window holds the prompt (input, the estimate the
// token budget uses), and it takes tools when the request offers some
// (tools of them). A target that cannot is skipped like any unusable
// one, so a larger-window target serves.
func Fits(info *modelinfo.Info, input int64, tools int) bool {
	if w := info.ContextWindow; w > 0 && input > w {
		return false
	}
	return info.Tools || tools == 0
}

// Unfit reports whether no target of list can take the request, whose
// prompt is estimated at input tokens.
func Unfit(r Request, list []*catalog.Target, input int64) bool {
	if r.Counting() {
		return false
	}
	_, scan := r.AttemptBody()
	for _, t := range list {
		if Fits(r.TargetInfo(t), input, scan.Tools) {
			return false
		}
	}
	return len(list) > 0
}

// TooLarge answers a request no target of the model can take (Unfit):
// the prompt is above every window (or tools are offered to models
// without them).
func TooLarge(r Request, list []*catalog.Target, input int64) *apierror.Error {
	var window int64
	tools := false
	for _, t := range list {
		info := r.TargetInfo(t)
		window = max(window, info.ContextWindow)
		tools = tools || info.Tools
	}
	name := r.AttemptModel().Name
	if _, scan := r.AttemptBody(); scan.Tools > 0 && !tools {
		return apierror.New(apierror.CodeToolsNotSupported, name, name).WithParam("tools")
	}
	return apierror.New(apierror.CodeContextLengthExceeded, input, window, name).WithParam("messages")
}
