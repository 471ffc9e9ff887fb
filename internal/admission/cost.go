package admission

import "fmt"

// CostConfig turns request features into a cost: what the request holds
// at the provider, in units of one small request. A request holds one
// place (a slot) for as long as it runs, however long its context and
// however many tokens it may generate: providers limit concurrent
// requests, their token limits are budgeted by the token ledgers, and a
// long prefill shows as a longer time held, which the controller
// measures. An answer asked for n times (OpenAI "n") holds n places.
// TokensPerUnit (0 by default: off) adds a unit per that many estimated
// input tokens, for an embedder whose provider is bound by cache memory
// (a self-hosted server) rather than by requests.
//
// OmniRoute's quanta priced an 80 KB Claude Code request with 25 tools and
// max_tokens 32000 at 65 units, more than its default limit of 64, so it
// was admitted only on an idle gateway; here it costs 1, as a 2 MiB one
// does. However large, a request is charged at most a quarter of its
// upstream's limit (see Gate.Charge), so it is admitted in its fair turn.
type CostConfig struct {
	Base          int64
	TokensPerUnit int64
	// MaxRequestCost caps a request's cost.
	MaxRequestCost int64
}

func (c CostConfig) validate() Errors {
	var errs Errors
	for _, f := range []struct {
		name string
		v    int64
	}{{"cost.base", c.Base}, {"cost.tokensPerUnit", c.TokensPerUnit}, {"cost.maxRequestCost", c.MaxRequestCost}} {
		switch {
		case f.name == "cost.tokensPerUnit" && f.v == 0: // off
		case f.name == "cost.tokensPerUnit" && f.v < 0:
			errs = append(errs, &FieldError{Field: f.name, Msg: f.name + " must be 0 (off) or a positive safe integer"})
		case f.v <= 0 || f.v > MaxSafeInteger:
			errs = append(errs, &FieldError{Field: f.name, Msg: f.name + " must be a positive safe integer"})
		case f.v > MaxCostOrLimit:
			errs = append(errs, &FieldError{Field: f.name, Msg: fmt.Sprintf("%s must be <= %d", f.name, MaxCostOrLimit)})
		}
	}
	return errs
}

// DefaultCost returns the default quanta: 1 per answer asked for.
func DefaultCost() CostConfig {
	return CostConfig{Base: 1, MaxRequestCost: 1024}
}

// Features describe a request for pricing. Negative values count as 0;
// Fanout below 1 counts as 1.
type Features struct {
	// InputTokens is the estimated input (conversation, system prompt,
	// tools).
	InputTokens int64
	// Fanout is how many answers the request asks for (OpenAI "n").
	Fanout int64
}

// Cost prices f: (Base + ⌊input tokens / TokensPerUnit⌋) × fan-out,
// saturating at MaxRequestCost.
func (c CostConfig) Cost(f Features) int64 {
	per := c.Base
	if f.InputTokens > 0 && c.TokensPerUnit > 0 {
		per += f.InputTokens / c.TokensPerUnit
	}
	n := max(f.Fanout, 1)
	if per > c.MaxRequestCost/n {
		return c.MaxRequestCost
	}
	return min(per*n, c.MaxRequestCost)
}
