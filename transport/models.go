package transport

import (
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// models answers GET /v1/models in the OpenAI list format, or in the
// Anthropic format when the caller sends anthropic-version (as the
// Anthropic SDK does).
func (g *Gateway) models(ctx *fasthttp.RequestCtx, rid []byte) {
	f := apierror.OpenAI
	anthropic := len(ctx.Request.Header.Peek("Anthropic-Version")) > 0
	if anthropic {
		f = apierror.Anthropic
	}
	if !ctx.IsGet() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET")
		writeError(ctx, f, string(rid), errMethod("GET"))
		return
	}
	if _, _, d := g.tenants.Identify(credential(&ctx.Request.Header), isLoopback(ctx)); d != tenantAllowed {
		e := errInvalidKey
		if d == tenantMissing {
			e = errMissingKey
		}
		writeError(ctx, f, string(rid), e)
		return
	}
	created := g.started.Unix()
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	if anthropic {
		b.B = append(b.B, `{"data":[`...)
		for i, m := range g.cat.Models {
			if i > 0 {
				b.B = append(b.B, ',')
			}
			b.B = append(b.B, `{"type":"model","id":`...)
			b.B = apierror.AppendString(b.B, m.Name)
			b.B = append(b.B, `,"display_name":`...)
			b.B = apierror.AppendString(b.B, m.Name)
			b.B = append(b.B, `,"created_at":`...)
			b.B = apierror.AppendString(b.B, g.started.UTC().Format("2006-01-02T15:04:05Z"))
			b.B = append(b.B, '}')
		}
		b.B = append(b.B, `],"has_more":false`...)
		if n := len(g.cat.Models); n > 0 {
			b.B = append(b.B, `,"first_id":`...)
			b.B = apierror.AppendString(b.B, g.cat.Models[0].Name)
			b.B = append(b.B, `,"last_id":`...)
			b.B = apierror.AppendString(b.B, g.cat.Models[n-1].Name)
		}
		b.B = append(b.B, '}')
	} else {
		b.B = append(b.B, `{"object":"list","data":[`...)
		for i, m := range g.cat.Models {
			if i > 0 {
				b.B = append(b.B, ',')
			}
			b.B = append(b.B, `{"id":`...)
			b.B = apierror.AppendString(b.B, m.Name)
			b.B = append(b.B, `,"object":"model","created":`...)
			b.B = apierror.AppendInt(b.B, created)
			b.B = append(b.B, `,"owned_by":"omniroute","strategy":`...)
			b.B = apierror.AppendString(b.B, m.Strategy)
			b.B = append(b.B, `,"apis":[`...)
			for j, s := range m.Surfaces.Names() {
				if j > 0 {
					b.B = append(b.B, ',')
				}
				b.B = apierror.AppendString(b.B, s)
			}
			b.B = append(b.B, ']')
			if m.Description != "" {
				b.B = append(b.B, `,"description":`...)
				b.B = apierror.AppendString(b.B, m.Description)
			}
			b.B = append(b.B, '}')
		}
		b.B = append(b.B, "]}"...)
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b.B)
}
