package plan

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Per-request fallbacks: a caller may name, in its body, models to try
// after the one it asks for, as OpenRouter's models list and LiteLLM's
// fallbacks list do. When every target of the requested model failed or
// was unusable, each fallback model's targets are tried in its own
// routing order, one model after the other (the pipeline's
// runFallbacks). A fallback name resolves like the model field (its own
// name, an alias, provider/model, a pattern, the default model), is
// subject to the key's allowed_models, and its targets to the same
// cooldowns, quotas, budgets and admission as any; the fields never
// reach a provider.

// MaxFallbacks bounds the fallback models of one request.
const MaxFallbacks = 4

// Fallbacks is a caller's per-request fallbacks, a field of the
// pipeline's call.
type Fallbacks struct {
	// Present: the body carries a models or fallbacks field, removed
	// before any provider sees it.
	Present bool
	// Models are the fallback models in order (the requested one
	// excluded); Primary is the requested model.
	Models  []*catalog.Model
	Primary *catalog.Model
}

// Recycle returns the fallbacks for the next request, keeping the list's
// buffer.
func (f *Fallbacks) Recycle() Fallbacks { return Fallbacks{Models: f.Models[:0]} }

// Read reads the body's models and fallbacks lists. A name that is not
// a string, resolves to no model, is not allowed for the key, cannot
// serve the route's API, or one too many, is a clear 4xx, returned. The
// pipeline reads them after the model is resolved and before the
// tenant's limits: their reservation is priced over the fallback models'
// targets too.
func (f *Fallbacks) Read(r Request) *apierror.Error {
	f.Primary = r.Model()
	body, scan := r.Parsed()
	for _, m := range scan.Members {
		if string(m.Key) != "models" && string(m.Key) != "fallbacks" {
			continue
		}
		f.Present = true
		field := string(m.Key)
		v := body[m.ValueStart:m.End]
		if string(v) == "null" {
			continue
		}
		i := 0
		var refused *apierror.Error
		ok := jsonscan.Elements(v, func(el []byte) bool {
			at := field + "[" + strconv.Itoa(i) + "]"
			i++
			name, isStr := jsonscan.AppendString(nil, el)
			if !isStr {
				refused = apierror.New(apierror.CodeInvalidField, at+" must be a model name (a string)").WithParam(at)
				return false
			}
			refused = f.add(r, at, name)
			return refused == nil
		})
		if refused != nil {
			return refused
		}
		if !ok {
			return apierror.New(apierror.CodeInvalidField, field+" must be a list of model names").WithParam(field)
		}
	}
	return nil
}

// add resolves one fallback name.
func (f *Fallbacks) add(r Request, at string, name []byte) *apierror.Error {
	m, e := r.Resolve(name)
	if m == nil {
		e.Param = at
		return e
	}
	if ae := r.ModelRefused(name); ae != nil {
		ae.Param, ae.Message = at, at+": "+ae.Message
		return ae
	}
	if m == r.Model() {
		return nil // the requested model itself (OpenRouter lists it first)
	}
	for _, fm := range f.Models {
		if fm == m {
			return nil
		}
	}
	s := r.Surface()
	if len(m.TargetsFor(s)) == 0 || m.Strategy == config.StrategyFusion {
		return apierror.New(apierror.CodeUnsupportedAPIFormat,
			at+": model "+strconv.Quote(m.Name)+" cannot serve "+s.Route()+" as a fallback (a fusion model, or no target for this API)").WithParam(at)
	}
	if len(f.Models) == MaxFallbacks {
		return apierror.New(apierror.CodeInvalidField, "at most "+strconv.Itoa(MaxFallbacks)+" fallback models may be named in a request").WithParam(at)
	}
	f.Models = append(f.Models, m)
	return nil
}
