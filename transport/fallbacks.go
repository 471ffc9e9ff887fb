package transport

import "github.com/omniroute/gateway/internal/catalog"

// fallbackReq is a caller's per-request fallbacks: the models named in
// the body's models (OpenRouter) or fallbacks (LiteLLM) list, tried in
// order after the requested model's targets.
type fallbackReq struct {
	// present: the body carries a models or fallbacks field, removed
	// before any provider sees it.
	present bool
	models  []*catalog.Model
}

func (f *fallbackReq) reset() fallbackReq { return fallbackReq{models: f.models[:0]} }
