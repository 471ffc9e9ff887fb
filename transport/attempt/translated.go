package attempt

import (
	"errors"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/internal/translate"
)

// A call has a caller dialect (the route it came in on) and, per attempt,
// an upstream dialect (State.Up: what the target's provider speaks). When
// they match, the body and the answer are relayed raw and nothing in this
// file runs. When they differ, the translator (internal/translate)
// converts the request for the upstream, and the answer, error or stream
// events back into the caller's dialect (docs/translation.md).

// translation is an attempt's dialect state when its upstream dialect is
// not the caller's: the translator, the translated body, the upstream
// model and model entry it was written for (a failover to the same
// dialect and model reuses it) and the stream's frame buffer.
type translation struct {
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

// Prepare sets the attempt's upstream dialect and prepares its body for
// t: the caller's, fitted to the target's model (fitting.go), or when the
// dialects differ the caller's translated for it (once per upstream
// dialect, upstream model and model entry) and then fitted. It returns
// the refusal to answer in the caller's dialect (a field the upstream
// dialect cannot carry; in strict mode a field the model would need
// changed): nothing is sent then.
func (st *State) Prepare(s *Stage, r Request, t *catalog.Target) *apierror.Error {
	st.Up = UpstreamSurface(st.caller, t)
	st.setReplyModel(r, t)
	if st.Up == st.caller {
		return st.fitRaw(r, t)
	}
	model, info := t.Upstream(), r.TargetInfo(t)
	tr := &st.trans
	if tr.tr != nil && tr.tr.To() == dia.ID(st.Up) && tr.trModel == model && tr.trInfo == info {
		return nil
	}
	opts := translate.Options{Model: model, Created: s.clk.Now().Unix(),
		// A model the table knows to take no cache_control gets no
		// breakpoints added.
		NoAutoCache: info.Family != "" && !info.CacheControl}
	body, scan := r.AttemptBody()
	if len(st.fit.reply) > 0 {
		opts.ReplyModel = scan.Model
		if p, _ := r.AttemptFallbacks(); p != nil && r.AttemptModel() != p {
			opts.ReplyModel = []byte(r.AttemptModel().Name)
		}
	}
	if tr.tr == nil {
		tr.tr = translate.Get(dia.ID(st.caller), dia.ID(st.Up), opts)
	} else {
		tr.tr.Reset(dia.ID(st.caller), dia.ID(st.Up), opts)
	}
	tr.trModel, tr.trInfo = model, nil
	if tr.tbody == nil {
		tr.tbody = bytebufferpool.Get()
	}
	if st.alt != nil { // a fusion judge: the caller's request plus the panel's answers
		body = st.alt.B
	}
	var err error
	tr.tbody.B, err = tr.tr.Request(tr.tbody.B[:0], body)
	if err != nil {
		var te *translate.Error
		if errors.As(err, &te) {
			return te.APIError()
		}
		return apierror.New(apierror.CodeInvalidField, err.Error())
	}
	if e := st.fitTranslated(r, t); e != nil {
		return e
	}
	tr.trInfo = info
	return nil
}

// Translating reports whether the current attempt translates.
func (st *State) Translating() bool { return st.Up != st.caller && st.trans.tr != nil }

// TranslateAnswer rewrites a non-stream answer already set on the
// response (PassBody) into the caller's dialect: a success through
// Translator.Response, an error through Translator.Error (status mapped,
// body in the caller's error shape). A success that cannot be read is
// returned as the error to answer (502 upstream_protocol_error).
func (st *State) TranslateAnswer(ctx *fasthttp.RequestCtx, rid []byte) *apierror.Error {
	status := ctx.Response.StatusCode()
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	if status >= 300 {
		st2, b := st.trans.tr.Error(buf.B[:0], status, ctx.Response.Body(), string(rid))
		ctx.SetStatusCode(st2)
		ctx.Response.Header.SetContentType("application/json")
		ctx.Response.SetBody(b)
		return nil
	}
	b, err := st.trans.tr.Response(buf.B[:0], ctx.Response.Body())
	if err != nil {
		var ue *translate.UpstreamError
		if !errors.As(err, &ue) {
			ue = &translate.UpstreamError{Msg: "the provider's answer could not be translated: " + err.Error()}
		}
		return ue.APIError()
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(b)
	return nil
}

// translateKeptError rewrites the kept provider error already set on the
// response (ReplayBody: status, redacted body) from the dialect of the
// attempt that answered it, up, into the caller's. It needs no
// translator: after failover across dialects the current one may be for
// another upstream dialect, and the caller must never see a raw body of
// another dialect.
func (st *State) translateKeptError(ctx *fasthttp.RequestCtx, up catalog.Surface, rid []byte) {
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	status, b := translate.ConvertError(buf.B[:0], dia.ID(st.caller), dia.ID(up), ctx.Response.StatusCode(), ctx.Response.Body(), string(rid))
	st.setTranslatedHeaders(&ctx.Response.Header, up)
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(b)
}

// TranslateEvent converts one upstream stream event into the caller's
// frames (none, one or several), in the frame buffer. A stream the
// translator cannot read ends with the caller's in-band error: cut
// reports it, and the stream ends there.
func (st *State) TranslateEvent(ev *sse.Event, rid []byte) (out []byte, cut bool) {
	tr := &st.trans
	out, err := tr.tr.Event(tr.evbuf[:0], ev)
	if err != nil {
		out = tr.tr.Interrupt(out, apierror.New(apierror.CodeUpstreamProtocolError,
			"the provider's stream could not be translated: "+err.Error()), string(rid))
		cut = true
	}
	tr.evbuf = out
	return out, cut
}

// End is the caller's end of a translated stream the upstream ended
// without its terminal event, in the frame buffer, if the translator has
// one to write.
func (st *State) End() ([]byte, bool) {
	out, ok := st.trans.tr.End(st.trans.evbuf[:0])
	if ok {
		st.trans.evbuf = out
	}
	return out, ok
}

// Interrupt appends the caller's in-band error frame for e to buf, in the
// caller's dialect, from the translator (Translating).
func (st *State) Interrupt(buf []byte, e *apierror.Error, rid []byte) []byte {
	return st.trans.tr.Interrupt(buf, e, string(rid))
}

// setTranslatedHeaders marks an answer translated from dialect up:
// X-OmniRoute-Translated names the two dialects, and when the translator
// wrote the request for up, X-OmniRoute-Dropped and X-OmniRoute-Adjusted
// say what changed (docs/translation.md, docs/models.md).
func (st *State) setTranslatedHeaders(h *fasthttp.ResponseHeader, up catalog.Surface) {
	h.Set("X-OmniRoute-Translated", st.caller.String()+"->"+up.String())
	if st.trans.tr == nil || st.trans.tr.To() != dia.ID(up) {
		return
	}
	st.changeHeaders(h)
}

// AnswerHeaders are the headers of an answer an attempt brought: its
// translation, and what the gateway changed in the request.
func (st *State) AnswerHeaders(h *fasthttp.ResponseHeader) {
	if st.Translating() {
		st.setTranslatedHeaders(h, st.Up)
		return
	}
	st.changeHeaders(h)
}
