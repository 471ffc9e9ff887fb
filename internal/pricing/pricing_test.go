package pricing

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/dialect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDefaults stands for a shipped list (internal/modelinfo tests the
// real one): globs of several lengths and an exact name.
var testDefaults = Defaults{AsOf: "2025-11-25", Source: "test", Prices: map[string]Price{
	"gpt-4.1*":               {Input: 2.00, Output: 8.00},
	"gpt-4.1-mini*":          {Input: 0.40, Output: 1.60},
	"gpt-4o-mini*":           {Input: 0.15, Output: 0.60},
	"claude-sonnet-4*":       {Input: 3.00, Output: 15.00},
	"claude-opus-4*":         {Input: 15.00, Output: 75.00},
	"claude-opus-4-5*":       {Input: 5.00, Output: 25.00},
	"o4-mini*":               {Input: 1.10, Output: 4.40},
	"deepseek-chat":          {Input: 0.28, Output: 0.42},
	"gemini-2.5-flash*":      {Input: 0.30, Output: 2.50},
	"gemini-2.5-flash-lite*": {Input: 0.10, Output: 0.40},
}}

func TestLookup(t *testing.T) {
	tab := New(testDefaults, map[string]Price{
		"gpt-4o*":       {Input: 1, Output: 2},
		"my-local":      {Input: 0, Output: 0},
		"deepseek-*":    {Input: 9, Output: 9},
		"claude-opus-4": {Input: 100, Output: 100},
	})
	cases := []struct {
		model   string
		pattern string
		source  string
		input   float64
	}{
		{"gpt-4o-mini-2024-07-18", "gpt-4o*", "config", 1},            // config glob beats default glob
		{"gpt-4.1-mini-2025-04-14", "gpt-4.1-mini*", "default", 0.40}, // more literal beats gpt-4.1*
		{"gpt-4.1", "gpt-4.1*", "default", 2},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4*", "default", 3},
		{"claude-opus-4-5", "claude-opus-4-5*", "default", 5},
		{"claude-opus-4-1-20250805", "claude-opus-4*", "default", 15},
		{"claude-opus-4", "claude-opus-4", "config", 100}, // exact config
		{"deepseek-chat", "deepseek-*", "config", 9},      // config glob beats default exact
		{"openai/o4-mini", "o4-mini*", "default", 1.10},   // provider prefix stripped
		{"my-local", "my-local", "config", 0},
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite*", "default", 0.10},
	}
	for _, c := range cases {
		p, e, ok := tab.LookupString(c.model)
		if !ok || e.Pattern != c.pattern || e.Source != c.source || p.Input != c.input {
			t.Errorf("%s: got %+v %+v %v; want %s (%s) input %g", c.model, p, e, ok, c.pattern, c.source, c.input)
		}
	}
	if _, _, ok := tab.LookupString("unknown-model"); ok {
		t.Fatal("unknown model priced")
	}
	if n, ok := tab.Cost([]byte("unknown"), Usage{Input: 10}); ok || n != 0 {
		t.Fatal("unknown model has a cost")
	}
}

func TestCost(t *testing.T) {
	claude := Price{Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75}
	gpt := Price{Input: 2.5, Output: 10, CachedInput: 1.25}
	reasoner := Price{Input: 1, Output: 4, Reasoning: 2}
	cases := []struct {
		name string
		p    Price
		u    Usage
		want int64 // nano-dollars
	}{
		{"plain", gpt, Usage{Input: 1000, Output: 500}, 2500*1000 + 5000*1000},
		{"one million input tokens is the list price", gpt, Usage{Input: 1_000_000}, 2_500_000_000},
		{"cached at the cached price", gpt, Usage{Input: 1000, Cached: 400, Output: 0}, 600*2500 + 400*1250},
		{"cache writes", claude, Usage{Input: 1000, Cached: 200, CacheWrite: 300, Output: 100}, 500*3000 + 200*300 + 300*3750 + 100*15000},
		{"cache price unset means input price", Price{Input: 2, Output: 2}, Usage{Input: 100, Cached: 100}, 100 * 2000},
		{"reasoning priced separately", reasoner, Usage{Output: 100, Reasoning: 60}, 40*4000 + 60*2000},
		{"reasoning counted as output", gpt, Usage{Output: 100, Reasoning: 60}, 100 * 10000},
		{"breakdown larger than total is clamped", gpt, Usage{Input: 10, Cached: 50, Output: 5, Reasoning: 50}, 10*1250 + 5*10000},
		{"negative counts are zero", gpt, Usage{Input: -5, Output: -1}, 0},
		{"free", Price{}, Usage{Input: 1e6, Output: 1e6}, 0},
		{"tiny price rounds to nearest", Price{Input: 0.005}, Usage{Input: 1}, 5},
	}
	for _, c := range cases {
		if got := c.p.Cost(c.u); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// An Anthropic answer's usage as the dialect table parses it.
	var u Usage
	dialect.Of(dialect.Messages).ParseUsage([]byte(`{"input_tokens":25,"cache_read_input_tokens":100,"cache_creation_input_tokens":10,"output_tokens":40}`), &u)
	if u.Input != 135 || u.Cached != 100 || u.CacheWrite != 10 || u.Tokens() != 175 {
		t.Fatalf("anthropic usage: %+v", u)
	}
	if got := claude.Cost(u); got != 25*3000+100*300+10*3750+40*15000 {
		t.Fatalf("anthropic cost %d", got)
	}
	// An OpenAI answer: prompt_tokens counts its cached tokens.
	gpt4o := Price{Input: 2.5, CachedInput: 1.25, Output: 10}
	var o Usage
	dialect.Of(dialect.Chat).ParseUsage([]byte(`{"prompt_tokens":2000,"prompt_tokens_details":{"cached_tokens":1500},"completion_tokens":100}`), &o)
	if o.Input != 2000 || o.Cached != 1500 || o.Tokens() != 2100 {
		t.Fatalf("openai usage: %+v", o)
	}
	if got := gpt4o.Cost(o); got != 500*2500+1500*1250+100*10000 {
		t.Fatalf("openai cost %d", got)
	}
	if USD(Nano(12.34)) != 12.34 {
		t.Fatal("dollar round trip")
	}
}

func TestValidate(t *testing.T) {
	if errs := Validate("prices.x", "bad pattern", Price{Input: -1, Output: 2e6}); len(errs) != 3 ||
		!strings.HasPrefix(errs[0], "prices.x: ") || !strings.HasPrefix(errs[1], "prices.x.input: ") || !strings.HasPrefix(errs[2], "prices.x.output: ") {
		t.Fatalf("%q", errs)
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	tab := New(testDefaults, nil)
	m := []byte("claude-sonnet-4-5-20250929")
	if a := testing.AllocsPerRun(100, func() { tab.Cost(m, Usage{Input: 10, Output: 10}) }); a != 0 {
		t.Fatalf("Cost allocated %.1f times", a)
	}
}
