package transport

import (
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/tokenest"
	"github.com/omniroute/gateway/transport/upstream"
)

// countTokensPath is Anthropic's token-counting endpoint.
const countTokensPath = "/v1/messages/count_tokens"

// countTokens answers POST /v1/messages/count_tokens: passed through to
// the model's first target on an Anthropic-dialect provider, else a local
// estimate (internal/tokenest: a quarter token per ASCII character of the
// prompt's strings, one per other character; at least 1 for a non-empty
// body), marked X-OmniRoute-Token-Count: estimate. It costs no admission
// place: no model runs.
func (g *Gateway) countTokens(ctx *fasthttp.RequestCtx, rid []byte) {
	f := apierror.Anthropic
	if !ctx.IsPost() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "POST")
		writeError(ctx, f, string(rid), errMethod("POST"))
		return
	}
	rc := g.rc.Load() // one config for the whole request (reload.go)
	if _, _, d := rc.tenants.Identify(credential(&ctx.Request.Header), isLoopback(ctx)); d != tenantAllowed {
		e := errInvalidKey
		if d == tenantMissing {
			e = errMissingKey
		}
		writeError(ctx, f, string(rid), e)
		return
	}
	limit := int64(g.opts.Env.Ingest.HardMaxBodyBytes)
	if int64(ctx.Request.Header.ContentLength()) > limit {
		writeError(ctx, f, string(rid), errBodyTooLarge(limit))
		return
	}
	body := ctx.Request.Body()
	if int64(len(body)) > limit {
		writeError(ctx, f, string(rid), errBodyTooLarge(limit))
		return
	}
	var scan jsonscan.Request
	scan.Reset()
	if err := jsonscan.ScanRequest(body, &scan); err != nil {
		writeError(ctx, f, string(rid), describeScanError(err))
		return
	}
	if scan.ModelStart < 0 || !scan.ModelIsString || len(scan.Model) == 0 {
		writeError(ctx, f, string(rid), errMissingModel)
		return
	}
	m := rc.cat.Resolve(scan.Model)
	if m == nil {
		writeError(ctx, f, string(rid), errUnknownModel(scan.Model))
		return
	}
	if m.Surfaces.Has(catalog.Messages) {
		g.countUpstream(ctx, rid, m.TargetsFor(catalog.Messages)[0], body, &scan)
		return
	}
	n := tokenest.Estimate(body, 1<<30).Tokens
	if n == 0 && len(body) > 2 {
		n = 1 // never 0 for a non-empty request
	}
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	b.B = append(b.B[:0], `{"input_tokens":`...)
	b.B = apierror.AppendInt(b.B, int64(n))
	b.B = append(b.B, '}')
	ctx.Response.Header.Set("X-OmniRoute-Token-Count", "estimate")
	ctx.SetContentType("application/json")
	ctx.SetBody(b.B)
}

// countUpstream relays the count to t's provider, model rewritten to the
// upstream name; an error answer is redacted, a transport failure is 502.
func (g *Gateway) countUpstream(ctx *fasthttp.RequestCtx, rid []byte, t *catalog.Target, body []byte, scan *jsonscan.Request) {
	x := upstream.AcquireExchange()
	defer x.Release()
	p := t.Conn.Provider
	h := &x.Req.Header
	h.SetMethod(fasthttp.MethodPost)
	h.SetRequestURI(p.BasePath + "/messages/count_tokens")
	h.SetHost(g.client(t.Conn.ID).Addr())
	h.SetContentType("application/json")
	h.Set(fasthttp.HeaderAcceptEncoding, "identity")
	if v := ctx.Request.Header.Peek("Anthropic-Version"); len(v) > 0 {
		h.SetBytesV("Anthropic-Version", v)
	} else {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	if v := ctx.Request.Header.Peek("Anthropic-Beta"); len(v) > 0 {
		if v = p.FilterBeta(nil, v); len(v) > 0 {
			h.SetBytesV("Anthropic-Beta", v)
		}
	}
	for _, kv := range p.Headers {
		h.Set(kv[0], kv[1])
	}
	setUpstreamAuth(h, p.Auth, t.Conn.APIKey())
	h.SetBytesV("X-Request-Id", rid)
	if up := upstreamName(t); up != string(scan.Model) {
		x.Req.SetBody(jsonscan.AppendWithModel(nil, body, scan, up))
	} else {
		x.Req.SetBody(body)
	}
	var cancel upstream.Cancel
	if err := g.client(t.Conn.ID).Do(x, &cancel, false); err != nil {
		writeError(ctx, apierror.Anthropic, string(rid), &apierror.Error{Status: 502, Type: "server_error", AnthropicType: "api_error",
			Code: "upstream_unavailable", Message: "the provider of " + t.Name + " could not be reached to count tokens; retry later"})
		return
	}
	status := x.Resp.StatusCode()
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(x.Resp.Header.ContentType())
	ctx.Response.Header.Set("X-OmniRoute-Target", t.Name)
	if status >= 400 {
		ctx.SetBody(g.redact.Bytes(x.Resp.Body()))
		return
	}
	ctx.SetBody(x.Resp.Body())
}

// setUpstreamAuth writes the provider's credential header.
func setUpstreamAuth(h *fasthttp.RequestHeader, auth, key string) {
	if key == "" {
		return
	}
	switch auth {
	case "bearer":
		v := bytebufferpool.Get()
		v.B = append(append(v.B[:0], "Bearer "...), key...)
		h.SetBytesV(fasthttp.HeaderAuthorization, v.B)
		bytebufferpool.Put(v)
	case "x-api-key":
		h.Set("X-Api-Key", key)
	case "x-goog-api-key":
		h.Set("X-Goog-Api-Key", key)
	}
}
