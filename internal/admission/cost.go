package admission

import "fmt"

// CostConfig holds the quanta that turn request features into a cost: one
// unit per started quantum of each feature, plus a base and a class cost.
type CostConfig struct {
	Base                  int64
	BodyBytesPerUnit      int64
	TokensPerUnit         int64
	MessagesPerUnit       int64
	ToolsPerUnit          int64
	FanoutPerUnit         int64
	StreamingClassCost    int64
	NonStreamingClassCost int64
	MaxRequestCost        int64
}

func (c CostConfig) validate() Errors {
	var errs Errors
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"cost.base", c.Base}, {"cost.bodyBytesPerUnit", c.BodyBytesPerUnit}, {"cost.tokensPerUnit", c.TokensPerUnit},
		{"cost.messagesPerUnit", c.MessagesPerUnit}, {"cost.toolsPerUnit", c.ToolsPerUnit}, {"cost.fanoutPerUnit", c.FanoutPerUnit},
		{"cost.streamingClassCost", c.StreamingClassCost}, {"cost.nonStreamingClassCost", c.NonStreamingClassCost},
		{"cost.maxRequestCost", c.MaxRequestCost},
	} {
		switch {
		case f.v <= 0 || f.v > MaxSafeInteger:
			errs = append(errs, &FieldError{Field: f.name, Msg: f.name + " must be a positive safe integer"})
		case f.v > MaxCostOrLimit:
			errs = append(errs, &FieldError{Field: f.name, Msg: fmt.Sprintf("%s must be <= %d", f.name, MaxCostOrLimit)})
		}
	}
	return errs
}

// Features describe a request for pricing. Negative values count as 0;
// Fanout below 1 counts as 1.
type Features struct {
	BodyBytes       int64
	EstimatedTokens int64
	Messages        int64
	Tools           int64
	// Fanout is how many upstream answers the request asks for (OpenAI "n",
	// or the panel size of a fusion model).
	Fanout    int64
	Streaming bool
}

// MaxToolsPriced is the tool count above which a request is priced at
// MaxRequestCost outright (OmniRoute: more than 64 tools saturate).
const MaxToolsPriced = 64

// Cost prices f: min(Base, MaxRequestCost), then one unit per started
// quantum of body bytes, tokens, messages, tools and fan-out, then the
// streaming or non-streaming class cost, saturating at MaxRequestCost.
// The minimum with the default quanta is 3 (streaming) or 4.
func (c CostConfig) Cost(f Features) int64 {
	limit := c.MaxRequestCost
	cost := min(c.Base, limit)
	fanout := f.Fanout
	if fanout < 1 {
		fanout = 1
	}
	tools := f.Tools
	if tools > MaxToolsPriced {
		return limit
	}
	class := c.NonStreamingClassCost
	if f.Streaming {
		class = c.StreamingClassCost
	}
	for _, add := range [...]int64{
		ceilDiv(f.BodyBytes, c.BodyBytesPerUnit),
		ceilDiv(f.EstimatedTokens, c.TokensPerUnit),
		ceilDiv(f.Messages, c.MessagesPerUnit),
		ceilDiv(tools, c.ToolsPerUnit),
		ceilDiv(fanout, c.FanoutPerUnit),
		class,
	} {
		if add >= limit-cost {
			return limit
		}
		cost += add
	}
	return cost
}

func ceilDiv(v, q int64) int64 {
	if v <= 0 || q <= 0 {
		return 0
	}
	return (v-1)/q + 1
}
