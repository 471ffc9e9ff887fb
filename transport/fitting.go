package transport

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

// unknownInfo is what is known of a target outside the table's reach.
var unknownInfo = modelinfo.Shipped().Lookup("")

// buildInfo resolves each target's model (by target ID; n is the number
// of IDs) in the model table, with its own model_info on top.
func buildInfo(tab *modelinfo.Table, cat *catalog.Catalog, n int) []*modelinfo.Info {
	out := make([]*modelinfo.Info, n)
	for _, t := range cat.Targets {
		i := tab.ForTarget(upstreamName(t), t.Info)
		out[t.ID] = &i
	}
	return out
}

// info is what the gateway believes about target t's model.
func (c *call) info(t *catalog.Target) *modelinfo.Info {
	if t.ID < len(c.rc.info) && c.rc.info[t.ID] != nil {
		return c.rc.info[t.ID]
	}
	return &unknownInfo
}

// gatewayFields are request fields only the gateway reads (per-request
// fallbacks), removed before any provider sees them.
var gatewayFields = []string{"models", "fallbacks"}

// fitRaw fits the caller's body for target t, relayed raw. It reports
// false when strict mode refused (answered). The fitted body, when
// anything changed, is c.fbody and buildRequest sends it as it is (the
// model name and the usage request are written by the fitter then).
func (c *call) fitRaw(t *catalog.Target) bool {
	c.fitting.fitted, c.fitting.fitRan = false, false
	if c.counting || !c.surface.Translated() {
		return true // a token count or an embeddings call: no answer to generate
	}
	info := c.info(t)
	if info.Permissive() && !c.fb.Present {
		return true
	}
	body, members := c.body.B, c.scan.Members
	if c.att.alt != nil { // a fusion judge
		body, members = c.att.alt.B, c.att.altScan.Members
	}
	o := fit.Options{Strict: c.strictFor(info), Model: c.upstreamModel(t)}
	if c.fb.Present {
		o.Consume = gatewayFields
	}
	if c.att.alt == nil && c.trans.up == catalog.Chat && c.scan.Stream && !c.scan.IncludeUsage && c.plan.Metering {
		o.IncludeUsage = true
		c.plan.Injected = true
	}
	if c.fitting.fbody == nil {
		c.fitting.fbody = bytebufferpool.Get()
	}
	out, changed, err := c.fitting.fitter.Fit(c.fitting.fbody.B[:0], body, members, dia.ID(c.trans.up), info, &o)
	c.fitting.fitRan = true
	if err != nil {
		c.refuseFit(err)
		return false
	}
	if changed {
		c.fitting.fbody.B, c.fitting.fitted = out, true
	} else if o.IncludeUsage {
		c.plan.Injected = false // nothing written: injectUsage will
	}
	return true
}

// fitTranslated fits the translated body in c.tbody for target t.
func (c *call) fitTranslated(t *catalog.Target) bool {
	c.fitting.fitRan = false
	info := c.info(t)
	if info.Permissive() {
		return true
	}
	if c.fitting.fbody == nil {
		c.fitting.fbody = bytebufferpool.Get()
	}
	// The caller's limit, when it set one, is its own; else the
	// translator wrote its default, which may be fitted silently.
	o := fit.Options{Strict: c.strictFor(info), OwnLimit: c.scan.MaxTokens < 0, Caller: dia.ID(c.surface)}
	out, changed, err := c.fitting.fitter.Fit(c.fitting.fbody.B[:0], c.trans.tbody.B, nil, dia.ID(c.trans.up), info, &o)
	c.fitting.fitRan = true
	if err != nil {
		c.refuseFit(err)
		return false
	}
	if changed {
		c.fitting.fbody.B = out
		c.trans.tbody, c.fitting.fbody = c.fitting.fbody, c.trans.tbody
	}
	return true
}

// strictFor reports whether the call refuses changes for a target whose
// model is info: the gateway model's strict, the model table's (or the
// config's model_info) strict, or the caller's X-OmniRoute-Strict.
func (c *call) strictFor(info *modelinfo.Info) bool {
	switch c.fitting.strict {
	case strictOn:
		return true
	case strictOff:
		return false
	}
	return info.Strict || (c.model != nil && c.model.Strict)
}

// The caller's X-OmniRoute-Strict.
const (
	strictUnset uint8 = iota
	strictOn
	strictOff
)

// readStrict reads X-OmniRoute-Strict; a value other than true or false
// is a 400. A step of the model walk (inference.go): a bad header is
// refused before the tenant's limits reserve anything for the request;
// fitting reads the setting per attempt.
func (c *call) readStrict() bool {
	v := c.ctx.Request.Header.Peek("X-Omniroute-Strict")
	switch string(v) {
	case "":
		c.fitting.strict = strictUnset
	case "true", "1":
		c.fitting.strict = strictOn
	case "false", "0":
		c.fitting.strict = strictOff
	default:
		c.fail(apierror.New(apierror.CodeInvalidStrict, string(v)))
		return false
	}
	return true
}

// refuseFit answers a strict refusal: 400 naming the caller's field.
func (c *call) refuseFit(err error) {
	r, ok := err.(*fit.Refusal)
	if !ok {
		c.fail(errInvalidJSON(err.Error()))
		return
	}
	c.fail(apierror.New(apierror.CodeUnsupportedParameter, r.Field, r.Message).WithParam(r.Field))
}

// changeHeaders tells the caller what reached the provider differently
// from what it sent: X-OmniRoute-Dropped lists fields dropped (by the
// translator's rules and the model's), X-OmniRoute-Adjusted the values
// changed (field=from->to), both by the caller's names.
func (c *call) changeHeaders(h *fasthttp.ResponseHeader) {
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	if b.B = c.appendChanges(b.B[:0], fit.Dropped); len(b.B) > 0 {
		h.SetBytesV("X-OmniRoute-Dropped", b.B)
	}
	if b.B = c.appendChanges(b.B[:0], fit.Adjusted); len(b.B) > 0 {
		h.SetBytesV("X-OmniRoute-Adjusted", b.B)
	}
}

// appendChanges appends the serving attempt's changes of kind k,
// comma-separated, by the caller's names.
func (c *call) appendChanges(dst []byte, k fit.Kind) []byte {
	n := len(dst)
	sep := func() {
		if len(dst) > n {
			dst = append(dst, ',')
		}
	}
	if k == fit.Dropped && c.translating() {
		for _, f := range c.trans.tr.Dropped() {
			sep()
			dst = append(dst, f...)
		}
	}
	if !c.fitting.fitRan {
		return dst
	}
	up, caller := dia.ID(c.trans.up), dia.ID(c.surface)
	for _, ch := range c.fitting.fitter.Changes() {
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

// changesForLog is the request log's changes field of the serving
// attempt ("" when it changed nothing).
func (c *call) changesForLog() string {
	if c.att.target == nil || (!c.fitting.fitRan && !c.translating()) {
		return ""
	}
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	d := c.appendChanges(nil, fit.Dropped)
	a := c.appendChanges(nil, fit.Adjusted)
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
func (c *call) setReplyModel(t *catalog.Target) {
	c.fitting.reply = c.fitting.reply[:0]
	if c.counting {
		return
	}
	if p := c.fb.Primary; p != nil && c.model != p { // a fallback model serves: its name
		if c.model.Name != upstreamName(t) {
			c.fitting.reply = apierror.AppendString(c.fitting.reply, c.model.Name)
		}
		return
	}
	if string(c.scan.Model) != upstreamName(t) {
		c.fitting.reply = apierror.AppendString(c.fitting.reply, c.scan.Model)
	}
}

// renamed returns b with every "model" string value replaced by the
// caller's model name (c.reply), in c.rbuf; b itself when no renaming is
// due.
func (c *call) renamed(b []byte) []byte {
	if len(c.fitting.reply) == 0 {
		return b
	}
	out, n := jsonscan.AppendReplacingStrings(c.fitting.rbuf[:0], b, "model", c.fitting.reply)
	if n == 0 {
		return b
	}
	c.fitting.rbuf = out
	return out
}

// fits reports whether target t can take the request at all: its model's
// context window holds the prompt (the estimate the token budget uses),
// and it takes tools when the request offers some. A target that cannot
// is skipped like any unusable one, so a larger-window target serves.
func (c *call) fits(t *catalog.Target) bool {
	info := c.info(t)
	if w := info.ContextWindow; w > 0 && c.plan.Input > w {
		return false
	}
	return info.Tools || c.scan.Tools == 0
}

// errTooLarge answers a request no target of the model can take: the
// prompt is above every window (or tools are offered to models without
// them).
func (c *call) errTooLarge(list []*catalog.Target) *apierror.Error {
	var window int64
	tools := false
	for _, t := range list {
		info := c.info(t)
		window = max(window, info.ContextWindow)
		tools = tools || info.Tools
	}
	if c.scan.Tools > 0 && !tools {
		return apierror.New(apierror.CodeToolsNotSupported, c.model.Name, c.model.Name).WithParam("tools")
	}
	return apierror.New(apierror.CodeContextLengthExceeded, c.plan.Input, window, c.model.Name).WithParam("messages")
}

// unfit reports whether no target of list can take the request.
func (c *call) unfit(list []*catalog.Target) bool {
	if c.counting {
		return false
	}
	for _, t := range list {
		if c.fits(t) {
			return false
		}
	}
	return len(list) > 0
}

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
