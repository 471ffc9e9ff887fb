// Package pricing turns a request's token usage into its cost in US
// dollars: a price table per model (input, output, cached input, cache
// writes, reasoning; per million tokens), matched by model name or glob
// pattern, from a shipped default list (the prices of the model table,
// internal/modelinfo, with its date and sources) that the configuration
// file's prices section overrides.
//
// Costs are integers of nano-dollars (1e-9 USD) so that budgets and usage
// sums add exactly; a token priced at $0.005 per million is 5 nano-dollars
// per thousand tokens, well above the rounding.
package pricing

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// NanoPerUSD is the number of cost units in a dollar.
const NanoPerUSD = 1e9

// MaxPrice bounds a price per million tokens (the dearest model lists a few
// hundred dollars).
const MaxPrice = 100000

// Price is a model's price in US dollars per million tokens. A zero
// cached_input, cache_write_input or reasoning means those tokens are
// priced as input (cache) or output (reasoning).
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input,omitempty"`
	CacheWrite  float64 `json:"cache_write_input,omitempty"`
	Reasoning   float64 `json:"reasoning,omitempty"`
}

// Usage is what a request consumed: the dialect table's one form
// (internal/dialect): Input counts every input token, cache reads and
// writes included, and Cached and CacheWrite say how many of them were
// which; Output counts every output token, reasoning included, and
// Reasoning says how many were reasoning. Its Tokens is the amount a
// tokens-per-minute limit counts.
type Usage = dialect.Usage

// Cost is the usage's cost in nano-dollars, rounded to the nearest.
// Breakdowns larger than their totals are clamped, so a confused usage
// report can never make a cost negative.
func (p Price) Cost(u Usage) int64 {
	in, out := max(u.Input, 0), max(u.Output, 0)
	cached := min(max(u.Cached, 0), in)
	write := min(max(u.CacheWrite, 0), in-cached)
	reasoning := min(max(u.Reasoning, 0), out)
	or := func(v, fallback float64) float64 {
		if v > 0 {
			return v
		}
		return fallback
	}
	usd := float64(in-cached-write)*p.Input +
		float64(cached)*or(p.CachedInput, p.Input) +
		float64(write)*or(p.CacheWrite, p.Input) +
		float64(out-reasoning)*p.Output +
		float64(reasoning)*or(p.Reasoning, p.Output)
	// usd is dollars per million tokens × tokens: × 1e-6 × 1e9 nano-dollars.
	return int64(math.Round(usd * 1e3))
}

// Validate checks one entry of a price table; problems start with path.
func Validate(path, pattern string, p Price) []string {
	var errs []string
	if err := tenantpolicy.ValidPattern(pattern); err != nil {
		errs = append(errs, fmt.Sprintf("%s: %v", path, err))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}, {"cache_write_input", p.CacheWrite}, {"reasoning", p.Reasoning}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > MaxPrice {
			errs = append(errs, fmt.Sprintf("%s.%s: want US dollars per million tokens between 0 and %d, got %g", path, f.name, MaxPrice, f.v))
		}
	}
	return errs
}

// layer is one source's entries: exact names, then globs most specific
// first.
type layer struct {
	exact map[string]int // name → index into entries
	globs []int
}

// Entry is one row of a table.
type Entry struct {
	Pattern string `json:"pattern"`
	Price   Price  `json:"price"`
	// Source is "config" or "default".
	Source string `json:"source"`
}

// Table finds a model's price. It is immutable and safe for concurrent use.
type Table struct {
	// layers are consulted in order: the config's, then the defaults'.
	layers [2]layer
	// entries: config ones first, then defaults not overridden.
	entries []Entry
	AsOf    string
	Origin  string
}

// Defaults is a shipped price list: model name or glob → price, with
// its date and where the prices come from (internal/modelinfo gives the
// gateway's).
type Defaults struct {
	Prices map[string]Price
	AsOf   string
	Source string
}

// New builds a table from the defaults d and the configuration's
// overrides (already validated). A configured entry replaces the default entry with
// the same pattern, and configured entries (exact names, then globs) are
// consulted before default ones, so an operator's "gpt-4o*" wins over the
// default "gpt-4o-mini*". Within each source an exact name beats a glob and
// a glob with more literal characters beats one with fewer.
func New(d Defaults, overrides map[string]Price) *Table {
	defaults := d.Prices
	t := &Table{AsOf: d.AsOf, Origin: d.Source}
	add := func(l *layer, m map[string]Price, src string, skip map[string]Price) {
		l.exact = map[string]int{}
		keys := make([]string, 0, len(m))
		for k := range m {
			if _, over := skip[k]; !over {
				keys = append(keys, k)
			}
		}
		// Within one source: exact names, then globs from the most
		// literal characters to the fewest, then by text for stability.
		sort.Slice(keys, func(i, j int) bool { return tenantpolicy.MoreSpecific(keys[i], keys[j]) })
		for _, k := range keys {
			idx := len(t.entries)
			t.entries = append(t.entries, Entry{Pattern: k, Price: m[k], Source: src})
			if tenantpolicy.IsGlob(k) {
				l.globs = append(l.globs, idx)
			} else {
				l.exact[k] = idx
			}
		}
	}
	add(&t.layers[0], overrides, "config", nil)
	add(&t.layers[1], defaults, "default", overrides)
	return t
}

// Lookup returns the price of model. When nothing matches the whole name,
// the part after its last '/' is tried, so "openai/gpt-4o" (a router's
// spelling) finds gpt-4o. It does not allocate.
func (t *Table) Lookup(model []byte) (Price, *Entry, bool) {
	if e := t.find(model); e != nil {
		return e.Price, e, true
	}
	if i := bytes.LastIndexByte(model, '/'); i >= 0 && i+1 < len(model) {
		if e := t.find(model[i+1:]); e != nil {
			return e.Price, e, true
		}
	}
	return Price{}, nil, false
}

// LookupString is Lookup for a string.
func (t *Table) LookupString(model string) (Price, *Entry, bool) { return t.Lookup([]byte(model)) }

func (t *Table) find(model []byte) *Entry {
	for li := range t.layers {
		l := &t.layers[li]
		if i, ok := l.exact[string(model)]; ok {
			return &t.entries[i]
		}
		for _, i := range l.globs {
			if tenantpolicy.Match(t.entries[i].Pattern, model) {
				return &t.entries[i]
			}
		}
	}
	return nil
}

// Cost prices usage of model; ok is false (and the cost 0) for a model
// without a price, which the request log records as unpriced.
func (t *Table) Cost(model []byte, u Usage) (nano int64, ok bool) {
	p, _, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// Entries lists the table in lookup order (config first).
func (t *Table) Entries() []Entry { return append([]Entry(nil), t.entries...) }

// USD converts nano-dollars to dollars.
func USD(nano int64) float64 { return float64(nano) / NanoPerUSD }

// Nano converts dollars to nano-dollars, rounded.
func Nano(usd float64) int64 { return int64(math.Round(usd * NanoPerUSD)) }
