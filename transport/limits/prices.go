package limits

import (
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/pricing"
)

// Price is a target's price, if the price table has one.
type Price struct {
	p  pricing.Price
	ok bool
}

// Prices are the targets' prices by target ID, a routing config's (built
// with its catalog by BuildPrices).
type Prices []Price

// BuildPrices prices each target (by target ID; n is the number of
// IDs): its upstream model's price, else the gateway model's name.
func BuildPrices(prices *pricing.Table, cat *catalog.Catalog, n int) Prices {
	out := make(Prices, n)
	for _, m := range cat.Models {
		for _, t := range m.Targets {
			name := t.UpstreamModel
			if name == "" {
				name = m.Name
			}
			p, _, ok := prices.LookupString(name)
			if !ok {
				p, _, ok = prices.LookupString(m.Name)
			}
			out[t.ID] = Price{p, ok}
		}
	}
	return out
}

// Of is target id's price, if it has one (an id the prices were not
// built for has none).
func (ps Prices) Of(id int) (pricing.Price, bool) {
	if id < len(ps) && ps[id].ok {
		return ps[id].p, true
	}
	return pricing.Price{}, false
}

// Pricing prices a request's usage: the routing config's prices, the
// model the request runs on (nil before one resolved) and the route's API
// surface.
type Pricing struct {
	Prices  Prices
	Model   *catalog.Model
	Surface catalog.Surface
}

// CostOf prices u at target t's price (nil: the first priced target of
// the model, the estimate's price ratio).
func (p *Pricing) CostOf(t *catalog.Target, u pricing.Usage) int64 {
	if t != nil && p.Prices[t.ID].ok {
		return p.Prices[t.ID].p.Cost(u)
	}
	if p.Model != nil {
		for _, t := range p.Model.TargetsFor(p.Surface) {
			if tp := &p.Prices[t.ID]; tp.ok {
				return tp.p.Cost(u)
			}
		}
	}
	return 0
}
