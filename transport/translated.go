package transport

import (
	"errors"
	"github.com/omniroute/gateway/internal/modelinfo"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/translate"
)

// A call has a caller dialect (c.surface: the route it came in on) and, per
// attempt, an upstream dialect (c.up: what the target's provider speaks).
// When they match, the body and the answer are relayed raw and nothing in
// this file runs. When they differ, c.tr (internal/translate) converts the
// request for the upstream, and the answer, error or stream events back
// into the caller's dialect (docs/translation.md).

// upstreamSurface is the dialect an attempt on t speaks: the caller's when
// the provider speaks it, else the provider's first translated one (chat,
// messages, responses; the catalog offers a call only targets that have
// one).
func (c *call) upstreamSurface(t *catalog.Target) catalog.Surface {
	apis := t.Conn.Provider.APIs
	if apis.Has(c.surface) {
		return c.surface
	}
	for _, s := range catalog.Surfaces {
		if apis.Has(s) && s.Translated() {
			return s
		}
	}
	return c.surface
}

// prepareAttempt sets the attempt's upstream dialect and prepares its
// body: the caller's, fitted to the target's model (fitting.go), or when
// the dialects differ the caller's translated for it (once per upstream
// dialect, upstream model and model entry) and then fitted. A refusal (a
// field the upstream dialect cannot carry; in strict mode a field the
// model would need changed) is answered 400 in the caller's dialect: it
// returns false.
func (c *call) prepareAttempt(t *catalog.Target) bool {
	c.trans.up = c.upstreamSurface(t)
	c.setReplyModel(t)
	if c.trans.up == c.surface {
		return c.fitRaw(t)
	}
	model, info := upstreamName(t), c.info(t)
	if c.trans.tr != nil && c.trans.tr.To() == dia.ID(c.trans.up) && c.trans.trModel == model && c.trans.trInfo == info {
		return true
	}
	opts := translate.Options{Model: model, Created: c.g.clk.Now().Unix(),
		// A model the table knows to take no cache_control gets no
		// breakpoints added.
		NoAutoCache: info.Family != "" && !info.CacheControl}
	if len(c.fitting.reply) > 0 {
		opts.ReplyModel = c.scan.Model
		if p := c.fb.Primary; p != nil && c.model != p {
			opts.ReplyModel = []byte(c.model.Name)
		}
	}
	if c.trans.tr == nil {
		c.trans.tr = translate.Get(dia.ID(c.surface), dia.ID(c.trans.up), opts)
	} else {
		c.trans.tr.Reset(dia.ID(c.surface), dia.ID(c.trans.up), opts)
	}
	c.trans.trModel, c.trans.trInfo = model, nil
	if c.trans.tbody == nil {
		c.trans.tbody = bytebufferpool.Get()
	}
	body := c.body.B
	if c.att.alt != nil { // a fusion judge: the caller's request plus the panel's answers
		body = c.att.alt.B
	}
	var err error
	c.trans.tbody.B, err = c.trans.tr.Request(c.trans.tbody.B[:0], body)
	if err != nil {
		var te *translate.Error
		if errors.As(err, &te) {
			c.fail(te.APIError())
		} else {
			c.fail(apierror.New(apierror.CodeInvalidField, err.Error()))
		}
		return false
	}
	if !c.fitTranslated(t) {
		return false
	}
	c.trans.trInfo = info
	return true
}

// translating reports whether the current attempt translates.
func (c *call) translating() bool { return c.trans.up != c.surface && c.trans.tr != nil }

// translateAnswer rewrites a non-stream answer already set on the response
// (passThrough) into the caller's dialect: a success through
// Translator.Response (an unreadable one is 502 upstream_protocol_error),
// an error through Translator.Error (status mapped, body in the caller's
// error shape).
func (c *call) translateAnswer() {
	ctx := c.ctx
	status := ctx.Response.StatusCode()
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	if status >= 300 {
		st, b := c.trans.tr.Error(buf.B[:0], status, ctx.Response.Body(), string(c.rid))
		ctx.SetStatusCode(st)
		ctx.Response.Header.SetContentType("application/json")
		ctx.Response.SetBody(b)
		return
	}
	b, err := c.trans.tr.Response(buf.B[:0], ctx.Response.Body())
	if err != nil {
		var ue *translate.UpstreamError
		if !errors.As(err, &ue) {
			ue = &translate.UpstreamError{Msg: "the provider's answer could not be translated: " + err.Error()}
		}
		c.fail(ue.APIError())
		return
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(b)
}

// translateKeptError rewrites the kept provider error already set on the
// response (passThroughError: status, redacted body) from the dialect of
// the attempt that answered it, up, into the caller's. It needs no
// translator: after failover across dialects the current one may be for
// another upstream dialect, and the caller must never see a raw body of
// another dialect.
func (c *call) translateKeptError(up catalog.Surface) {
	ctx := c.ctx
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	st, b := translate.ConvertError(buf.B[:0], dia.ID(c.surface), dia.ID(up), ctx.Response.StatusCode(), ctx.Response.Body(), string(c.rid))
	c.setTranslatedHeaders(&ctx.Response.Header, up)
	ctx.SetStatusCode(st)
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(b)
}

// translateEvent converts one upstream stream event into the caller's
// frames (none, one or several), in c.evbuf. A stream the translator cannot
// read ends with the caller's in-band error.
func (c *call) translateEvent(ev *sse.Event) []byte {
	out, err := c.trans.tr.Event(c.trans.evbuf[:0], ev)
	if err != nil {
		out = c.trans.tr.Interrupt(out, apierror.New(apierror.CodeUpstreamProtocolError,
			"the provider's stream could not be translated: "+err.Error()), string(c.rid))
		c.stream.terminal = true
	}
	c.trans.evbuf = out
	return out
}

// setTranslatedHeaders marks an answer translated from dialect up:
// X-OmniRoute-Translated names the two dialects, and when the translator
// wrote the request for up, X-OmniRoute-Dropped and X-OmniRoute-Adjusted
// say what changed (docs/translation.md, docs/models.md).
func (c *call) setTranslatedHeaders(h *fasthttp.ResponseHeader, up catalog.Surface) {
	h.Set("X-OmniRoute-Translated", c.surface.String()+"->"+up.String())
	if c.trans.tr == nil || c.trans.tr.To() != dia.ID(up) {
		return
	}
	c.changeHeaders(h)
}

// answerHeaders are the headers of an answer an attempt brought: its
// translation, and what the gateway changed in the request.
func (c *call) answerHeaders(h *fasthttp.ResponseHeader) {
	if c.translating() {
		c.setTranslatedHeaders(h, c.trans.up)
		return
	}
	c.changeHeaders(h)
}

// translation is an attempt's dialect state: the attempt's upstream
// dialect (up), and when it is not the caller's, the translator, the
// translated body, the upstream model and model entry it was written for
// (a failover to the same dialect and model reuses it) and the stream's
// frame buffer.
type translation struct {
	up      catalog.Surface
	tr      *translate.Translator
	tbody   *bytebufferpool.ByteBuffer
	trModel string
	trInfo  *modelinfo.Info
	evbuf   []byte
}

// recycle gives the translator and its body back and returns the state
// for the next call, keeping only the frame buffer.
func (t *translation) recycle() translation {
	if t.tr != nil {
		translate.Put(t.tr)
	}
	if t.tbody != nil {
		bytebufferpool.Put(t.tbody)
	}
	return translation{evbuf: t.evbuf[:0]}
}
