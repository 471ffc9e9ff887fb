package transport

import (
	"strings"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/modellist"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/edge"
)

// modelsPrefix is the path of one model's entry: /v1/models/{id}.
const modelsPrefix = edge.ModelsPath + "/"

// models answers GET /v1/models (every configured model, then every
// alias) and GET /v1/models/{id} (the model a name resolves to through
// the catalog's aliases, patterns and default model), in the OpenAI list
// format, or in the Anthropic format when the caller sends
// anthropic-version (as the Anthropic SDK does). The edge answered any
// method but GET (and HEAD) before.
func (g *Gateway) models(ctx *fasthttp.RequestCtx, rid []byte) {
	f := apierror.OpenAI
	anthropic := len(ctx.Request.Header.Peek(dia.Of(dia.Messages).VersionHeader)) > 0
	if anthropic {
		f = apierror.Anthropic
	}
	rc := g.rc.Load() // one config for the whole request (reload.go)
	cat := rc.cat
	if _, _, d := rc.tenants.Identify(edge.Credential(&ctx.Request.Header), edge.IsLoopback(ctx)); d != tenantAllowed {
		e := errInvalidKey
		if d == tenantMissing {
			e = errMissingKey
		}
		edge.WriteError(ctx, f, string(rid), e)
		return
	}
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	if id, ok := strings.CutPrefix(string(ctx.Path()), modelsPrefix); ok {
		m := cat.Resolve([]byte(id))
		if m == nil {
			edge.WriteError(ctx, f, string(rid), errUnknownModel([]byte(id)))
			return
		}
		b.B = modellist.AppendModel(b.B, anthropic, id, m, g.started)
		b.B = modellist.AppendTargets(b.B, m, targetViews(rc, m))
		ctx.SetContentType("application/json")
		ctx.SetBody(b.B)
		return
	}
	b.B = modellist.AppendList(b.B, cat, anthropic, g.started)
	ctx.SetContentType("application/json")
	ctx.SetBody(b.B)
}

// targetViews is what the gateway believes about each target of m (its
// model table entry, else what is known of an unknown model) and its
// price, on the routing config rc.
func targetViews(rc *routingConfig, m *catalog.Model) []modellist.Target {
	views := make([]modellist.Target, 0, len(m.Targets))
	for _, t := range m.Targets {
		v := modellist.Target{Target: t.Name, UpstreamModel: t.Upstream(), APIs: t.Conn.Provider.APIs.Names(), ModelInfo: attempt.UnknownInfo()}
		if t.ID < len(rc.info) && rc.info[t.ID] != nil {
			v.ModelInfo = rc.info[t.ID]
		}
		if p, ok := rc.price.Of(t.ID); ok {
			v.Price = &p
		}
		views = append(views, v)
	}
	return views
}
