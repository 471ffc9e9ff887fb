package transport

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/tenantlimit"
)

// Per-request fallbacks: a caller may name, in its body, models to try
// after the one it asks for, as OpenRouter's models list and LiteLLM's
// fallbacks list do. When every target of the requested model failed or
// was unusable, each fallback model's targets are tried in its own
// routing order, one model after the other. A fallback name resolves
// like the model field (its own name, an alias, provider/model, a
// pattern, the default model), is subject to the key's allowed_models,
// and its targets to the same cooldowns, quotas, budgets and admission
// as any; the fields never reach a provider.

// maxFallbacks bounds the fallback models of one request.
const maxFallbacks = 4

// fallbackReq is a caller's per-request fallbacks.
type fallbackReq struct {
	// present: the body carries a models or fallbacks field, removed
	// before any provider sees it.
	present bool
	// models are the fallback models in order (the requested one
	// excluded); primary is the requested model.
	models  []*catalog.Model
	primary *catalog.Model
}

func (f *fallbackReq) reset() fallbackReq { return fallbackReq{models: f.models[:0]} }

// readFallbacks reads the body's models and fallbacks lists. A name
// that is not a string, resolves to no model, is not allowed for the
// key, cannot serve the route's API, or one too many, is a clear 4xx. A
// step of the model walk (inference.go), after the model is resolved and
// before the tenant's limits: their reservation is priced over the
// fallback models' targets too.
func (c *call) readFallbacks() bool {
	c.fb.primary = c.model
	for _, m := range c.scan.Members {
		if string(m.Key) != "models" && string(m.Key) != "fallbacks" {
			continue
		}
		c.fb.present = true
		field := string(m.Key)
		v := c.body.B[m.ValueStart:m.End]
		if string(v) == "null" {
			continue
		}
		i, refused := 0, false
		ok := jsonscan.Elements(v, func(el []byte) bool {
			at := field + "[" + strconv.Itoa(i) + "]"
			i++
			name, isStr := jsonscan.AppendString(nil, el)
			if !isStr {
				c.fail(apierror.New(apierror.CodeInvalidField, at+" must be a model name (a string)").WithParam(at))
				refused = true
				return false
			}
			refused = !c.addFallback(at, name)
			return !refused
		})
		if refused {
			return false
		}
		if !ok {
			c.fail(apierror.New(apierror.CodeInvalidField, field+" must be a list of model names").WithParam(field))
			return false
		}
	}
	return true
}

// addFallback resolves one fallback name.
func (c *call) addFallback(at string, name []byte) bool {
	m := c.rc.cat.Resolve(name)
	if m == nil {
		e := errUnknownModel(name)
		e.Param = at
		c.fail(e)
		return false
	}
	if e := c.ten.Entry; e != nil && e.Policy != nil && !e.Policy.AllowsModel(name) {
		r := tenantlimit.Result{Kind: tenantlimit.KindModel}
		ae := r.APIError()
		ae.Param, ae.Message = at, at+": "+ae.Message
		c.fail(&ae)
		return false
	}
	if m == c.model {
		return true // the requested model itself (OpenRouter lists it first)
	}
	for _, f := range c.fb.models {
		if f == m {
			return true
		}
	}
	if len(m.TargetsFor(c.surface)) == 0 || m.Strategy == config.StrategyFusion {
		c.fail(apierror.New(apierror.CodeUnsupportedAPIFormat,
			at+": model "+strconv.Quote(m.Name)+" cannot serve "+c.surface.Route()+" as a fallback (a fusion model, or no target for this API)").WithParam(at))
		return false
	}
	if len(c.fb.models) == maxFallbacks {
		c.fail(apierror.New(apierror.CodeInvalidField, "at most "+strconv.Itoa(maxFallbacks)+" fallback models may be named in a request").WithParam(at))
		return false
	}
	c.fb.models = append(c.fb.models, m)
	return true
}

// runFallbacks tries the requested model's targets, then each fallback
// model's, until one serves; a caller gone, its deadline passed or the
// gateway draining ends the tries. The answer when none served is the
// requested model's (the last failure kept, whatever model it was of).
func (c *call) runFallbacks(list []*catalog.Target) bool {
	var x exhaust
	primary := c.model
	defer func() { c.model = primary }()
	all := list
	for i := -1; i < len(c.fb.models); i++ {
		m := primary
		if i >= 0 {
			m = c.fb.models[i]
			if c.cancel.Cancelled() || c.expired() || c.g.edge.Draining() {
				break
			}
			c.plan.Restart()
			all = append(all[:len(all):len(all)], m.TargetsFor(c.surface)...)
		}
		c.model = m
		l := m.TargetsFor(c.surface)
		c.beginPlan(l, m.WeightsFor(c.surface), len(l) > 1)
		if relay, done := c.runList(l, len(l) > 1, &x); done {
			return relay
		}
	}
	c.model = primary
	c.answerExhausted(all, &x)
	return false
}
