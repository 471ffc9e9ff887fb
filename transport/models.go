package transport

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/pricing"
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
	if _, _, d := rc.tenants.Identify(credential(&ctx.Request.Header), edge.IsLoopback(ctx)); d != tenantAllowed {
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
		b.B = g.appendModel(b.B, anthropic, id, m)
		b.B = appendModelInfo(b.B[:len(b.B)-1], rc, m)
		ctx.SetContentType("application/json")
		ctx.SetBody(b.B)
		return
	}
	n := len(cat.Models) + len(cat.Aliases)
	name := func(i int) (string, *catalog.Model) {
		if i < len(cat.Models) {
			return cat.Models[i].Name, cat.Models[i]
		}
		a := cat.Aliases[i-len(cat.Models)]
		return a.Name, a.Model
	}
	if anthropic {
		b.B = append(b.B, `{"data":[`...)
	} else {
		b.B = append(b.B, `{"object":"list","data":[`...)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b.B = append(b.B, ',')
		}
		id, m := name(i)
		b.B = g.appendModel(b.B, anthropic, id, m)
	}
	if !anthropic {
		b.B = append(b.B, "]}"...)
	} else {
		b.B = append(b.B, `],"has_more":false`...)
		if n > 0 {
			first, _ := name(0)
			last, _ := name(n - 1)
			b.B = append(b.B, `,"first_id":`...)
			b.B = apierror.AppendString(b.B, first)
			b.B = append(b.B, `,"last_id":`...)
			b.B = apierror.AppendString(b.B, last)
		}
		b.B = append(b.B, '}')
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b.B)
}

// appendModel writes one model object named id (a model's own name or an
// alias or pattern-matched name of m). OpenAI entries carry the
// gateway's extras: strategy, apis, description, and alias_of when id is
// not m's own name.
func (g *Gateway) appendModel(b []byte, anthropic bool, id string, m *catalog.Model) []byte {
	if anthropic {
		b = append(b, `{"type":"model","id":`...)
		b = apierror.AppendString(b, id)
		b = append(b, `,"display_name":`...)
		b = apierror.AppendString(b, id)
		b = append(b, `,"created_at":`...)
		b = apierror.AppendString(b, g.started.UTC().Format("2006-01-02T15:04:05Z"))
		return append(b, '}')
	}
	b = append(b, `{"id":`...)
	b = apierror.AppendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = apierror.AppendInt(b, g.started.Unix())
	b = append(b, `,"owned_by":"omniroute","strategy":`...)
	b = apierror.AppendString(b, m.Strategy)
	b = append(b, `,"apis":[`...)
	for j, s := range m.Surfaces.Names() {
		if j > 0 {
			b = append(b, ',')
		}
		b = apierror.AppendString(b, s)
	}
	b = append(b, ']')
	if id != m.Name {
		b = append(b, `,"alias_of":`...)
		b = apierror.AppendString(b, m.Name)
	}
	if m.Description != "" {
		b = append(b, `,"description":`...)
		b = apierror.AppendString(b, m.Description)
	}
	return append(b, '}')
}

// targetView is one target of a model as GET /v1/models/{id} shows it:
// what the gateway believes about its upstream model (the model table,
// the config's model_info, the target's own) and its price.
type targetView struct {
	Target        string          `json:"target"`
	UpstreamModel string          `json:"upstream_model"`
	APIs          []string        `json:"apis"`
	ModelInfo     *modelinfo.Info `json:"model_info"`
	Price         *pricing.Price  `json:"price"`
}

// appendModelInfo appends the targets of m with what the gateway
// believes about each, and closes the model object b holds open.
func appendModelInfo(b []byte, rc *routingConfig, m *catalog.Model) []byte {
	views := make([]targetView, 0, len(m.Targets))
	for _, t := range m.Targets {
		v := targetView{Target: t.Name, UpstreamModel: upstreamName(t), APIs: t.Conn.Provider.APIs.Names(), ModelInfo: &unknownInfo}
		if t.ID < len(rc.info) && rc.info[t.ID] != nil {
			v.ModelInfo = rc.info[t.ID]
		}
		if t.ID < len(rc.price) && rc.price[t.ID].ok {
			p := rc.price[t.ID].p
			v.Price = &p
		}
		views = append(views, v)
	}
	js, err := json.Marshal(views)
	if err != nil {
		js = []byte("[]")
	}
	b = append(b, `,"strict":`...)
	b = strconv.AppendBool(b, m.Strict)
	b = append(b, `,"targets":`...)
	b = append(b, js...)
	return append(b, '}')
}
