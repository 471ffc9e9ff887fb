// Package modelinfo is the gateway's model table: for each upstream model
// of the major providers, its context window and output limit, how it
// reasons and which parameter controls that, the optional request fields
// it refuses, whether it takes tools and images, and its list price. The
// table ships in one file (models.json, dated, with its sources); the
// price list internal/pricing uses is read from it, so prices and limits
// are one list. A name no entry matches takes its family's defaults by
// pattern (gpt-*, claude-*, …), else nothing is assumed about it and its
// requests pass unchanged.
//
// The configuration file's model_info section overrides or adds entries
// (field by field), and a target's model_info overrides its own. The
// resolved Info of each target is what internal/fit makes requests fit,
// what routing reads for the context window, and what GET /v1/models/{id}
// shows.
package modelinfo

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// Info is what the gateway believes about one upstream model. Zero
// values mean "unknown": no limit is applied and nothing is refused.
type Info struct {
	// Name is the upstream model name this is about.
	Name string `json:"name"`
	// Family is the provider family (openai, anthropic, google, …), ""
	// when the name matches none.
	Family string `json:"family,omitempty"`
	// Sources names the layers that made it, lowest first:
	// "family:<name>", "table:<entry>", "config:<entry>", "target".
	Sources []string `json:"sources"`

	ContextWindow int64                 `json:"context_window"`
	MaxOutput     int64                 `json:"max_output"`
	OutputParam   string                `json:"output_param,omitempty"`
	Reasoning     config.ModelReasoning `json:"reasoning"`
	Refuses       []string              `json:"refuses,omitempty"`

	SamplingNeedsNoReasoning bool `json:"sampling_needs_no_reasoning,omitempty"`
	KnownParamsOnly          bool `json:"known_params_only"`
	Tools                    bool `json:"tools"`
	Images                   bool `json:"images"`
	CacheControl             bool `json:"cache_control"`
	Strict                   bool `json:"strict,omitempty"`
}

// Permissive reports whether nothing is known that a request could have
// to fit: no limit, unknown reasoning, nothing refused, no field list. A
// permissive target's requests pass untouched without being looked at.
func (i *Info) Permissive() bool {
	return i.MaxOutput == 0 && i.Reasoning.Kind == "" && len(i.Refuses) == 0 && !i.KnownParamsOnly && !i.Strict
}

// RefusesParam reports whether the model refuses the field name.
func (i *Info) RefusesParam(name string) bool { return slices.Contains(i.Refuses, name) }

// TakesEffort reports whether the model takes effort level e.
func (i *Info) TakesEffort(e string) bool { return slices.Contains(i.Reasoning.Efforts, e) }

// apply overlays the fields m sets.
func (i *Info) apply(m *config.ModelInfo, source string) {
	i.Sources = append(i.Sources, source)
	if m.ContextWindow != nil {
		i.ContextWindow = *m.ContextWindow
	}
	if m.MaxOutput != nil {
		i.MaxOutput = *m.MaxOutput
	}
	if m.OutputParam != nil {
		i.OutputParam = *m.OutputParam
	}
	if m.Reasoning != nil {
		i.Reasoning = *m.Reasoning
		i.Reasoning.Efforts = slices.Clone(m.Reasoning.Efforts)
	}
	if m.Refuses != nil {
		i.Refuses = slices.Clone(*m.Refuses)
	}
	for _, f := range []struct {
		dst *bool
		src *bool
	}{{&i.SamplingNeedsNoReasoning, m.SamplingNeedsNoReasoning}, {&i.KnownParamsOnly, m.KnownParamsOnly},
		{&i.Tools, m.Tools}, {&i.Images, m.Images}, {&i.CacheControl, m.CacheControl}, {&i.Strict, m.Strict}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

// unknown is the Info of a model nothing is known about: it is assumed
// to take tools and images (a target is never skipped for a guess).
func unknown(name string) Info {
	return Info{Name: name, Sources: []string{}, Tools: true, Images: true}
}

//go:embed models.json
var shippedJSON []byte

// shippedEntry is one entry of models.json.
type shippedEntry struct {
	Family string         `json:"family"`
	Price  *pricing.Price `json:"price,omitempty"`
	config.ModelInfo
}

type shippedFamily struct {
	Match    []string         `json:"match"`
	Defaults config.ModelInfo `json:"defaults"`
}

type shippedFile struct {
	AsOf     string                   `json:"as_of"`
	About    string                   `json:"about"`
	Sources  map[string][]string      `json:"sources"`
	Families map[string]shippedFamily `json:"families"`
	Models   map[string]shippedEntry  `json:"models"`
}

// entry is one row of a layer.
type entry struct {
	pattern string
	family  string
	m       config.ModelInfo
}

// layer is one source's entries in lookup order: exact names first, then
// globs from the most literal characters to the fewest (as the price
// table orders them), by text on ties.
type layer struct {
	exact map[string]int
	globs []int
	rows  []entry
}

func newLayer(rows []entry) layer {
	sort.Slice(rows, func(i, j int) bool { return tenantpolicy.MoreSpecific(rows[i].pattern, rows[j].pattern) })
	l := layer{exact: map[string]int{}, rows: rows}
	for i, r := range rows {
		if tenantpolicy.IsGlob(r.pattern) {
			l.globs = append(l.globs, i)
		} else {
			l.exact[r.pattern] = i
		}
	}
	return l
}

func (l *layer) find(name string) *entry {
	if i, ok := l.exact[name]; ok {
		return &l.rows[i]
	}
	for _, i := range l.globs {
		if tenantpolicy.MatchString(l.rows[i].pattern, name) {
			return &l.rows[i]
		}
	}
	return nil
}

type family struct {
	name     string
	match    []string
	defaults config.ModelInfo
}

// Table resolves model names to what the gateway believes about them. It
// is immutable and safe for concurrent use.
type Table struct {
	shipped  layer
	config   layer
	families []family
	// AsOf and Sources are the shipped table's date and sources.
	AsOf    string
	Sources map[string][]string

	prices pricing.Defaults
}

var (
	shippedOnce  sync.Once
	shippedTable *Table
)

// Shipped returns the table as shipped, without configuration. It panics
// if models.json is broken, which the package's tests rule out.
func Shipped() *Table {
	shippedOnce.Do(func() {
		t, err := parseShipped(shippedJSON)
		if err != nil {
			panic("modelinfo: models.json: " + err.Error())
		}
		shippedTable = t
	})
	return shippedTable
}

func parseShipped(data []byte) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f shippedFile
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	t := &Table{AsOf: f.AsOf, Sources: f.Sources,
		prices: pricing.Defaults{Prices: map[string]pricing.Price{}, AsOf: f.AsOf, Source: f.About}}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(f.Families)) {
		fam := f.Families[name]
		problems = append(problems, fam.Defaults.Validate("families."+name+".defaults")...)
		t.families = append(t.families, family{name: name, match: fam.Match, defaults: fam.Defaults})
	}
	var rows []entry
	for _, k := range slices.Sorted(maps.Keys(f.Models)) {
		e := f.Models[k]
		if err := tenantpolicy.ValidPattern(k); err != nil {
			problems = append(problems, fmt.Sprintf("models.%s: %v", k, err))
		}
		if _, ok := f.Families[e.Family]; !ok {
			problems = append(problems, fmt.Sprintf("models.%s.family: %q is not one of families", k, e.Family))
		}
		problems = append(problems, e.ModelInfo.Validate("models."+k)...)
		if e.Price != nil {
			problems = append(problems, pricing.Validate("models."+k+".price", k, *e.Price)...)
			t.prices.Prices[k] = *e.Price
		}
		rows = append(rows, entry{pattern: k, family: e.Family, m: e.ModelInfo})
	}
	if len(problems) > 0 {
		return nil, config.Errors(problems)
	}
	t.shipped = newLayer(rows)
	return t, nil
}

// New returns the shipped table with the config file's model_info
// entries (already validated by the config package) over it.
func New(overrides config.ModelInfoTable) *Table {
	base := Shipped()
	if len(overrides) == 0 {
		return base
	}
	t := *base
	rows := make([]entry, 0, len(overrides))
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		rows = append(rows, entry{pattern: k, m: overrides[k]})
	}
	t.config = newLayer(rows)
	return &t
}

// PriceDefaults is the shipped price list, for internal/pricing.
func (t *Table) PriceDefaults() pricing.Defaults { return t.prices }

// Prices builds the price table: the shipped prices under the config
// file's prices section.
func Prices(overrides map[string]pricing.Price) *pricing.Table {
	return pricing.New(Shipped().PriceDefaults(), overrides)
}

// Lookup resolves name: its family's defaults, the shipped entry that
// matches it, the config's entry that matches it, in that order, each
// field of a later layer replacing the one below. When nothing matches
// the whole name, the part after its last '/' is tried, so a router's
// spelling ("openai/gpt-4o") finds gpt-4o.
func (t *Table) Lookup(name string) Info { return t.ForTarget(name, nil) }

// ForTarget is Lookup with a target's own model_info (nil: none) on top.
func (t *Table) ForTarget(name string, target *config.ModelInfo) Info {
	info := unknown(name)
	key := name
	if !t.knows(key) {
		if i := strings.LastIndexByte(name, '/'); i >= 0 && i+1 < len(name) && t.knows(name[i+1:]) {
			key = name[i+1:]
		}
	}
	e := t.shipped.find(key)
	fam := ""
	if e != nil {
		fam = e.family
	} else {
		fam = t.familyOf(key)
	}
	if fam != "" {
		info.Family = fam
		for i := range t.families {
			if t.families[i].name == fam {
				info.apply(&t.families[i].defaults, "family:"+fam)
			}
		}
	}
	if e != nil {
		info.apply(&e.m, "table:"+e.pattern)
	}
	if c := t.config.find(key); c != nil {
		info.apply(&c.m, "config:"+c.pattern)
	}
	if target != nil {
		info.apply(target, "target")
	}
	return info
}

// knows reports whether any layer or family matches name.
func (t *Table) knows(name string) bool {
	return t.shipped.find(name) != nil || t.config.find(name) != nil || t.familyOf(name) != ""
}

func (t *Table) familyOf(name string) string {
	for _, f := range t.families {
		for _, m := range f.match {
			if tenantpolicy.MatchString(m, name) {
				return f.name
			}
		}
	}
	return ""
}

// Entries lists the shipped entries' patterns in lookup order.
func (t *Table) Entries() []string {
	out := make([]string, len(t.shipped.rows))
	for i, r := range t.shipped.rows {
		out[i] = r.pattern
	}
	return out
}
