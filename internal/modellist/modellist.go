// Package modellist writes the gateway's answers to GET /v1/models and
// GET /v1/models/{id}: every configured model then every alias, or one
// model, in OpenAI's list format (with the gateway's extras) or in
// Anthropic's (what the Anthropic SDK reads when it sends
// anthropic-version). It is pure and writes without reflection on the
// list path, so the pipeline's handler only authenticates the caller and
// picks the format.
package modellist

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/pricing"
)

// AppendList appends the list of cat's models then its aliases;
// created is the time the entries report (the gateway's start).
func AppendList(b []byte, cat *catalog.Catalog, anthropic bool, created time.Time) []byte {
	n := len(cat.Models) + len(cat.Aliases)
	name := func(i int) (string, *catalog.Model) {
		if i < len(cat.Models) {
			return cat.Models[i].Name, cat.Models[i]
		}
		a := cat.Aliases[i-len(cat.Models)]
		return a.Name, a.Model
	}
	if anthropic {
		b = append(b, `{"data":[`...)
	} else {
		b = append(b, `{"object":"list","data":[`...)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		id, m := name(i)
		b = AppendModel(b, anthropic, id, m, created)
	}
	if !anthropic {
		return append(b, "]}"...)
	}
	b = append(b, `],"has_more":false`...)
	if n > 0 {
		first, _ := name(0)
		last, _ := name(n - 1)
		b = append(b, `,"first_id":`...)
		b = apierror.AppendString(b, first)
		b = append(b, `,"last_id":`...)
		b = apierror.AppendString(b, last)
	}
	return append(b, '}')
}

// AppendModel writes one model object named id (a model's own name or an
// alias or pattern-matched name of m). OpenAI entries carry the
// gateway's extras: strategy, apis, description, and alias_of when id is
// not m's own name.
func AppendModel(b []byte, anthropic bool, id string, m *catalog.Model, created time.Time) []byte {
	if anthropic {
		b = append(b, `{"type":"model","id":`...)
		b = apierror.AppendString(b, id)
		b = append(b, `,"display_name":`...)
		b = apierror.AppendString(b, id)
		b = append(b, `,"created_at":`...)
		b = apierror.AppendString(b, created.UTC().Format("2006-01-02T15:04:05Z"))
		return append(b, '}')
	}
	b = append(b, `{"id":`...)
	b = apierror.AppendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = apierror.AppendInt(b, created.Unix())
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

// Target is one target of a model as GET /v1/models/{id} shows it: what
// the gateway believes about its upstream model (the model table, the
// config's model_info, the target's own) and its price (nil: unknown).
type Target struct {
	Target        string          `json:"target"`
	UpstreamModel string          `json:"upstream_model"`
	APIs          []string        `json:"apis"`
	ModelInfo     *modelinfo.Info `json:"model_info"`
	Price         *pricing.Price  `json:"price"`
}

// AppendTargets turns the model object AppendModel wrote at the end of b
// into GET /v1/models/{id}'s: it reopens it, adds strict and the
// targets, and closes it.
func AppendTargets(b []byte, m *catalog.Model, targets []Target) []byte {
	js, err := json.Marshal(targets)
	if err != nil {
		js = []byte("[]")
	}
	b = b[:len(b)-1]
	b = append(b, `,"strict":`...)
	b = strconv.AppendBool(b, m.Strict)
	b = append(b, `,"targets":`...)
	b = append(b, js...)
	return append(b, '}')
}
