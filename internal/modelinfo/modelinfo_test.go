package modelinfo

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestShippedTableIsComplete is the completeness test: every entry of the
// shipped table, resolved with its family's defaults, has every field the
// fitting rules read (internal/fit) and routing reads, with values those
// rules can act on; every family's patterns find its own entries; the
// table is dated and names its sources for every family.
func TestShippedTableIsComplete(t *testing.T) {
	tab := Shipped()
	if len(tab.AsOf) != len("2006-01-02") {
		t.Fatalf("as_of %q is not a date", tab.AsOf)
	}
	var f shippedFile
	if err := json.Unmarshal(shippedJSON, &f); err != nil {
		t.Fatal(err)
	}
	for name := range f.Families {
		if len(tab.Sources[name]) == 0 {
			t.Errorf("family %s names no sources", name)
		}
	}
	if len(f.Models) < 80 {
		t.Fatalf("%d entries; the table covers the major providers' current models", len(f.Models))
	}
	for k, e := range f.Models {
		m := &e.ModelInfo
		if m.ContextWindow == nil || *m.ContextWindow <= 0 {
			t.Errorf("%s: no context_window", k)
		}
		if m.MaxOutput == nil || *m.MaxOutput <= 0 || (m.ContextWindow != nil && *m.MaxOutput > *m.ContextWindow) {
			t.Errorf("%s: max_output missing or above the context window", k)
		}
		if m.Reasoning == nil {
			t.Errorf("%s: no reasoning", k)
			continue
		}
		r := m.Reasoning
		switch r.Kind {
		case config.ReasoningEffort, config.ReasoningAdaptive:
			if len(r.Efforts) == 0 {
				t.Errorf("%s: reasoning kind %s lists no efforts", k, r.Kind)
			}
		case config.ReasoningBudget:
			if r.MinBudget <= 0 {
				t.Errorf("%s: reasoning kind budget has no min_budget", k)
			}
		case config.ReasoningToggle:
			if r.Toggle == "" {
				t.Errorf("%s: reasoning kind toggle names no toggle", k)
			}
		}
		// Efforts are listed lowest first, on the one scale.
		last := -1
		for _, ef := range r.Efforts {
			i := slices.Index(dialect.Efforts[:], ef)
			if i <= last {
				t.Errorf("%s: efforts %v are not in the scale's order %v", k, r.Efforts, dialect.Efforts)
			}
			last = i
		}
		if m.SamplingNeedsNoReasoning != nil && *m.SamplingNeedsNoReasoning && r.Kind != config.ReasoningEffort && r.Kind != config.ReasoningAlways {
			t.Errorf("%s: sampling_needs_no_reasoning on a model that does not reason", k)
		}
		info := tab.Lookup(strings.TrimSuffix(k, "*"))
		if info.Family != e.Family || !slices.Contains(info.Sources, "table:"+k) {
			t.Errorf("%s: looked up as %+v; want family %s from its own entry", k, info, e.Family)
		}
		if !slices.Contains(info.Sources, "family:"+e.Family) {
			t.Errorf("%s: the family's defaults were not applied: %v", k, info.Sources)
		}
		if info.Permissive() {
			t.Errorf("%s: resolves to a permissive entry", k)
		}
	}
}

// TestPricesAreTheTablesPrices: the price list internal/pricing uses is
// the model table's, dated, and every priced entry has an input and an
// output price.
func TestPricesAreTheTablesPrices(t *testing.T) {
	d := Shipped().PriceDefaults()
	if len(d.Prices) < 60 || d.AsOf != Shipped().AsOf || !strings.Contains(d.Source, "US dollars per million") {
		t.Fatalf("price defaults: %d prices, as of %q, %q", len(d.Prices), d.AsOf, d.Source)
	}
	for k, p := range d.Prices {
		if p.Input <= 0 || p.Output <= 0 {
			t.Errorf("%s has no input or output price", k)
		}
	}
	tab := Prices(nil)
	for _, c := range []struct {
		model string
		input float64
	}{{"gpt-4o-2024-08-06", 2.50}, {"gpt-4o-mini", 0.15}, {"claude-sonnet-4-5-20250929", 3}, {"claude-opus-4-5", 5},
		{"claude-opus-4-1-20250805", 15}, {"openai/o4-mini", 1.10}, {"deepseek-chat", 0.28}, {"gpt-6.2-sol", 2}} {
		p, _, ok := tab.LookupString(c.model)
		if !ok || p.Input != c.input {
			t.Errorf("%s: price %+v %v, want input %g", c.model, p, ok, c.input)
		}
	}
}

// TestLookup: exact beats glob, the more literal glob wins, a family's
// defaults serve unknown names of the family, a router's provider prefix
// is stripped, and a name of no family is unknown (permissive).
func TestLookup(t *testing.T) {
	tab := Shipped()
	cases := []struct {
		name      string
		entry     string
		family    string
		maxOut    int64
		kind      string
		permitted bool
	}{
		{"gpt-4o", "gpt-4o*", "openai", 16384, config.ReasoningNone, false},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini*", "openai", 16384, config.ReasoningNone, false},
		{"o4-mini", "o4-mini*", "openai", 100000, config.ReasoningEffort, false},
		{"openai/o4-mini", "o4-mini*", "openai", 100000, config.ReasoningEffort, false},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5*", "anthropic", 64000, config.ReasoningBudget, false},
		{"claude-opus-4-8", "claude-opus-4-8*", "anthropic", 128000, config.ReasoningAdaptive, false},
		{"claude-opus-4-1", "claude-opus-4*", "anthropic", 32000, config.ReasoningBudget, false},
		{"deepseek-chat", "deepseek-chat", "deepseek", 8192, config.ReasoningNone, false},
		{"grok-4-fast-non-reasoning", "grok-4-fast-non-reasoning*", "xai", 2000000, config.ReasoningNone, false},
		{"gpt-9-future", "", "openai", 0, "", false}, // the family's defaults only
		{"mock-demo", "", "", 0, "", true},           // nothing known
		{"my-org/llama-3.1-8b", "", "", 0, "", true}, // nothing known, prefix or not
		{"claude-code-next", "", "anthropic", 0, "", false},
	}
	for _, c := range cases {
		i := tab.Lookup(c.name)
		gotEntry := ""
		for _, s := range i.Sources {
			if e, ok := strings.CutPrefix(s, "table:"); ok {
				gotEntry = e
			}
		}
		if gotEntry != c.entry || i.Family != c.family || i.MaxOutput != c.maxOut || i.Reasoning.Kind != c.kind || i.Permissive() != c.permitted {
			t.Errorf("%s: entry %q family %q max %d kind %q permissive %v; want %q %q %d %q %v",
				c.name, gotEntry, i.Family, i.MaxOutput, i.Reasoning.Kind, i.Permissive(), c.entry, c.family, c.maxOut, c.kind, c.permitted)
		}
	}
	if i := tab.Lookup("mock-demo"); !i.Tools || !i.Images {
		t.Fatalf("an unknown model is assumed without tools or images: %+v", i)
	}
}

// TestOverrides: a config entry changes only the fields it sets, adds a
// model the table lacks, and a target's own entry goes on top.
func TestOverrides(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	b := func(v bool) *bool { return &v }
	tab := New(config.ModelInfoTable{
		"gpt-4o*":      {MaxOutput: n(8000)},
		"my-local-*":   {ContextWindow: n(32768), MaxOutput: n(4096), Reasoning: &config.ModelReasoning{Kind: config.ReasoningNone}},
		"claude-opus*": {Strict: b(true)},
	})
	i := tab.Lookup("gpt-4o")
	if i.MaxOutput != 8000 || i.ContextWindow != 128000 || !i.RefusesParam("verbosity") || i.Sources[len(i.Sources)-1] != "config:gpt-4o*" {
		t.Fatalf("gpt-4o with an override: %+v", i)
	}
	i = tab.Lookup("my-local-coder")
	if i.ContextWindow != 32768 || i.MaxOutput != 4096 || i.Family != "" || i.Permissive() {
		t.Fatalf("a model added by the config: %+v", i)
	}
	if i = tab.Lookup("claude-opus-4-8"); !i.Strict || i.MaxOutput != 128000 {
		t.Fatalf("strict by config: %+v", i)
	}
	i = tab.ForTarget("gpt-4o", &config.ModelInfo{MaxOutput: n(100), Tools: b(false)})
	if i.MaxOutput != 100 || i.Tools || i.Sources[len(i.Sources)-1] != "target" {
		t.Fatalf("a target's own entry: %+v", i)
	}
	if Shipped().Lookup("gpt-4o").MaxOutput != 16384 {
		t.Fatal("an override changed the shipped table")
	}
}

// TestValidateModelInfo: the config's model_info is checked field by
// field, each problem naming its path.
func TestValidateModelInfo(t *testing.T) {
	neg := int64(-1)
	bad := "max_output_tokens"
	m := config.ModelInfo{MaxOutput: &neg, OutputParam: &bad, Refuses: &[]string{"temperature", "nope"},
		Reasoning: &config.ModelReasoning{Kind: "sometimes", Efforts: []string{"high", "turbo"}, Toggle: "x"}}
	errs := m.Validate("model_info.x")
	want := []string{"model_info.x.max_output", "model_info.x.output_param", "model_info.x.reasoning.kind",
		"model_info.x.reasoning.efforts[1]", "model_info.x.reasoning.toggle", "model_info.x.refuses[1]"}
	for _, w := range want {
		found := false
		for _, e := range errs {
			found = found || strings.HasPrefix(e, w+":")
		}
		if !found {
			t.Errorf("no problem reported for %s in %q", w, errs)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d problems, want %d: %q", len(errs), len(want), errs)
	}
}
