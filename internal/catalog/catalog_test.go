package catalog

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

func build(t *testing.T, js string, env map[string]string) (*Catalog, error) {
	t.Helper()
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return Build(f, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

const twoModels = `{"providers":{
  "oa":{"base_url":"https://api.openai.com/v1","apis":["chat","responses"],"connections":{"k":{"api_key_env":"OA"}}},
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k":{"api_key_env":"AN"}}}},
 "models":{
  "fast":{"strategy":"round-robin","targets":[{"connection":"oa","model":"gpt-4o-mini","weight":3},{"connection":"an","model":"claude"}]},
  "alias":{"targets":[{"connection":"oa","model":"gpt-4o-mini"}]}}}`

func TestBuildSharesTargetsAndKeepsWeights(t *testing.T) {
	c, err := build(t, twoModels, map[string]string{"OA": "sk-oa", "AN": "sk-an"})
	if err != nil {
		t.Fatal(err)
	}
	fast, alias := c.Model([]byte("fast")), c.Model([]byte("alias"))
	if len(c.Targets) != 2 || fast.Targets[0] != alias.Targets[0] {
		t.Fatalf("%d targets; the same connection+model must be one shared target", len(c.Targets))
	}
	if got := fast.WeightsFor(Chat); len(got) != 1 || got[0] != 3 {
		t.Fatalf("chat weights %v", got)
	}
	if got := alias.WeightsFor(Chat); got[0] != 1 {
		t.Fatalf("default weight %v", got)
	}
	if n := len(fast.TargetsFor(Messages)); n != 1 || fast.TargetsFor(Messages)[0].Name != "an/k/claude" {
		t.Fatalf("messages targets %v", fast.TargetsFor(Messages))
	}
	if !fast.Surfaces.Has(Chat) || !fast.Surfaces.Has(Messages) || alias.Surfaces.Has(Messages) {
		t.Fatal("surfaces")
	}
	// No target of alias speaks messages: all its targets serve it, translated.
	if got := alias.TargetsFor(Messages); len(got) != 1 || got[0] != alias.Targets[0] {
		t.Fatalf("translated targets %v", got)
	}
	if fast.Targets[0].Conn.APIKey() != "sk-oa" || fast.Targets[1].Conn.Provider.Auth != "x-api-key" {
		t.Fatal("credentials or default auth style")
	}
}

func TestBuildMissingCredential(t *testing.T) {
	_, err := build(t, twoModels, map[string]string{"OA": "sk-oa"})
	if err == nil || !strings.Contains(err.Error(), "environment variable AN is not set") {
		t.Fatalf("err = %v", err)
	}
}

func TestResolveOrder(t *testing.T) {
	f, err := config.DecodeFile(strings.NewReader(twoModels))
	if err != nil {
		t.Fatal(err)
	}
	f.Aliases = map[string]string{"claude-opus-4-8": "alias"}
	f.ModelPatterns = []config.ModelPattern{{Match: "claude-*", Model: "fast"}, {Match: "claude-o*", Model: "alias"}, {Match: "g?t-*", Model: "alias"}}
	f.DefaultModel = "fast"
	c, err := Build(f, func(string) (string, bool) { return "k", true })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"fast", "fast"},             // a model's own name first
		{"claude-opus-4-8", "alias"}, // then an alias
		{"claude-opus-5", "fast"},    // then the first matching pattern
		{"gpt-6.2-sol", "alias"},     // ? is one character
		{"gpt", "fast"},              // no pattern: the default
		{"", "fast"},                 // the default takes any name
		{"models/claude-x", "fast"},  // patterns anchor at the start
	} {
		if m := c.Resolve([]byte(tc.name)); m == nil || m.Name != tc.want {
			t.Errorf("Resolve(%q) = %v, want %s", tc.name, m, tc.want)
		}
	}
	if len(c.Aliases) != 1 || c.Aliases[0].Model.Name != "alias" {
		t.Fatalf("aliases %v", c.Aliases)
	}
	f.DefaultModel = ""
	c, _ = Build(f, func(string) (string, bool) { return "k", true })
	if m := c.Resolve([]byte("other")); m != nil {
		t.Fatalf("no default: Resolve = %s", m.Name)
	}
}

// TestREADMEExampleRoutesAgentDefaults: the README's example config is
// valid and sends Claude Code's and Codex's default model names (and any
// claude-* / gpt-* name) to a model that speaks their API.
func TestREADMEExampleRoutesAgentDefaults(t *testing.T) {
	js, err := testutil.READMEExampleConfig("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := Build(f, func(string) (string, bool) { return "k", true })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		api  Surface
	}{{"claude-opus-4-8", Messages}, {"claude-haiku-4-5", Messages}, {"gpt-6.2-sol", Responses}, {"gpt-5-codex", Responses}} {
		m := c.Resolve([]byte(tc.name))
		if m == nil || len(m.TargetsFor(tc.api)) == 0 {
			t.Errorf("%s does not reach a model serving %s (got %v)", tc.name, tc.api, m)
		}
	}
}

func TestFilterBeta(t *testing.T) {
	list := []string{"a-1", "b-2"}
	for _, tc := range []struct {
		name string
		pol  *config.BetaPolicy
		in   string
		want string
	}{
		{"no policy", nil, "a-1, x", "a-1, x"},
		{"pass", &config.BetaPolicy{Mode: "pass", List: list}, "a-1,x", "a-1,x"},
		{"drop listed", &config.BetaPolicy{Mode: "drop", List: list}, "a-1, x ,b-2,y", "x,y"},
		{"drop all listed", &config.BetaPolicy{Mode: "drop", List: list}, "b-2", ""},
		{"allow only listed", &config.BetaPolicy{Mode: "allow", List: list}, " x,b-2,,a-1 ", "b-2,a-1"},
		{"allow none", &config.BetaPolicy{Mode: "allow"}, "a-1", ""},
	} {
		p := &Provider{Beta: tc.pol}
		if got := string(p.FilterBeta(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("%s: FilterBeta(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func FuzzFilterBeta(f *testing.F) {
	f.Add("a-1, x ,b-2,y")
	f.Add(",,")
	p := &Provider{Beta: &config.BetaPolicy{Mode: "drop", List: []string{"a-1"}}}
	q := &Provider{Beta: &config.BetaPolicy{Mode: "allow", List: []string{"a-1"}}}
	f.Fuzz(func(t *testing.T, in string) {
		// Property: every value goes to exactly one of drop and allow, and
		// no output value is empty or carries a comma or outer space.
		d, a := string(p.FilterBeta(nil, []byte(in))), string(q.FilterBeta(nil, []byte(in)))
		n := 0
		for _, s := range []string{d, a} {
			if s == "" {
				continue
			}
			for _, v := range strings.Split(s, ",") {
				if v == "" || strings.TrimSpace(v) != v {
					t.Fatalf("bad value %q in %q", v, s)
				}
				n++
			}
		}
		want := 0
		for _, v := range strings.Split(in, ",") {
			if strings.TrimSpace(v) != "" {
				want++
			}
		}
		if n != want {
			t.Fatalf("%q: drop %q + allow %q hold %d values, want %d", in, d, a, n, want)
		}
	})
}

// TestEmbeddingsNeverTranslated: embeddings go only to targets whose
// provider lists them; a target that serves only embeddings never takes a
// translated chat, messages or responses call.
func TestEmbeddingsNeverTranslated(t *testing.T) {
	c, err := build(t, `{"providers":{
  "oa":{"base_url":"https://api.openai.com/v1","apis":["chat","embeddings"],"connections":{"k":{"api_key_env":"OA"}}},
  "em":{"base_url":"https://embed.example/v1","apis":["embeddings"],"connections":{"k":{"api_key_env":"OA"}}},
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k":{"api_key_env":"AN"}}}},
 "models":{
  "mixed":{"targets":[{"connection":"em","model":"e"},{"connection":"an","model":"claude"},{"connection":"oa","model":"gpt"}]},
  "claude":{"targets":[{"connection":"an","model":"claude"}]},
  "embed":{"targets":[{"connection":"em","model":"e"}]}}}`, map[string]string{"OA": "k", "AN": "k"})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts []*Target) (out []string) {
		for _, x := range ts {
			out = append(out, x.Name)
		}
		return out
	}
	mixed, claude, embed := c.Model([]byte("mixed")), c.Model([]byte("claude")), c.Model([]byte("embed"))
	if got := names(mixed.TargetsFor(Embeddings)); strings.Join(got, ",") != "em/k/e,oa/k/gpt" {
		t.Errorf("mixed embeddings targets %v", got)
	}
	if got := names(mixed.TargetsFor(Responses)); strings.Join(got, ",") != "an/k/claude,oa/k/gpt" {
		t.Errorf("mixed responses (translated) targets %v: the embeddings-only target must not be among them", got)
	}
	if len(claude.TargetsFor(Embeddings)) != 0 {
		t.Errorf("an Anthropic-only model has embeddings targets %v", names(claude.TargetsFor(Embeddings)))
	}
	for _, s := range []Surface{Chat, Messages, Responses} {
		if len(embed.TargetsFor(s)) != 0 {
			t.Errorf("an embeddings-only model serves %s through %v", s, names(embed.TargetsFor(s)))
		}
	}
	if Embeddings.String() != "embeddings" || Embeddings.Route() != "/v1/embeddings" || Embeddings.Translated() || !Chat.Translated() {
		t.Errorf("Embeddings surface %s %s %v", Embeddings, Embeddings.Route(), Embeddings.Translated())
	}
}

// TestOntoKeepsIDsByName: a reloaded catalog takes the ids of the
// connections and targets known before, whatever order and subset it
// has, and gives new ones the next free ids, reporting them.
func TestOntoKeepsIDsByName(t *testing.T) {
	env := map[string]string{"OA": "sk-oa", "AN": "sk-an"}
	base, err := build(t, twoModels, env)
	if err != nil {
		t.Fatal(err)
	}
	ids := NewIDs(base)
	// Only the Anthropic target is left, under a new model name: alone it
	// would be target 0 on connection 0.
	next, err := build(t, `{"providers":{
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k":{"api_key_env":"AN"}}}},
 "models":{"renamed":{"targets":[{"connection":"an","model":"claude"}]}}}`, env)
	if err != nil {
		t.Fatal(err)
	}
	if nc, nt := next.Onto(ids); nc != nil || nt != nil {
		t.Fatalf("nothing is new, yet Onto reported %v %v", nc, nt)
	}
	bt := base.Model([]byte("fast")).Targets[1]
	nt := next.Model([]byte("renamed")).Targets[0]
	if nt.Name != bt.Name || nt.ID != bt.ID || nt.Conn.ID != bt.Conn.ID || base.Targets[nt.ID].Name != nt.Name || base.Connections[nt.Conn.ID].Name != nt.Conn.Name {
		t.Fatalf("target %s got id %d conn %d; start-up %d conn %d", nt.Name, nt.ID, nt.Conn.ID, bt.ID, bt.Conn.ID)
	}

	grown, err := build(t, `{"providers":{
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k":{"api_key_env":"AN"},"k2":{"api_key_env":"AN"}}}},
 "models":{"m":{"targets":[{"connection":"an/k","model":"claude-new"},{"connection":"an/k2","model":"claude"}]}}}`, env)
	if err != nil {
		t.Fatal(err)
	}
	nConns, nTargets := len(base.Connections), len(base.Targets)
	newConns, newTargets := grown.Onto(ids)
	if len(newConns) != 1 || newConns[0].Name != "an/k2" || newConns[0].ID != nConns {
		t.Fatalf("new connections %+v; want an/k2 with id %d", newConns, nConns)
	}
	if len(newTargets) != 2 || newTargets[0].Name != "an/k/claude-new" || newTargets[0].ID != nTargets || newTargets[1].ID != nTargets+1 {
		t.Fatalf("new targets %+v; want ids %d and %d", newTargets, nTargets, nTargets+1)
	}
	if grown.Targets[0].Conn.ID != base.Model([]byte("fast")).Targets[1].Conn.ID {
		t.Fatal("the known connection an/k lost its id")
	}
	if len(ids.Targets) != nTargets {
		t.Fatal("Onto changed the ids it was given")
	}
	ids.Add(newConns, newTargets)
	again, err := build(t, `{"providers":{
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k2":{"api_key_env":"AN"}}}},
 "models":{"m":{"targets":[{"connection":"an/k2","model":"claude"}]}}}`, env)
	if err != nil {
		t.Fatal(err)
	}
	if nc, nt := again.Onto(ids); nc != nil || nt != nil || again.Targets[0].ID != nTargets+1 {
		t.Fatalf("a target recorded by Add was new again (%v %v) or changed id (%d)", nc, nt, again.Targets[0].ID)
	}
}

// TestProviderModelNames: provider/model resolves, after models and
// aliases and before patterns, to the provider's targets of a gateway
// model (its strategy and weights kept) or of an upstream model; a name
// that is a model keeps its meaning; an unknown provider resolves to
// nothing.
func TestProviderModelNames(t *testing.T) {
	c, err := build(t, `{"providers":{
  "oa":{"base_url":"https://api.openai.com/v1","apis":["chat"],"connections":{"a":{"api_key_env":"OA"},"b":{"api_key_env":"OA"}}},
  "an":{"base_url":"https://api.anthropic.com/v1","apis":["messages"],"connections":{"k":{"api_key_env":"AN"}}}},
 "models":{
  "fast":{"strategy":"round-robin","targets":[{"connection":"oa/a","model":"gpt-4o","weight":3},{"connection":"an","model":"claude-x"},{"connection":"oa/b","model":"gpt-4o"}]},
  "oa/gpt-4o":{"targets":[{"connection":"an","model":"claude-y"}]}},
 "model_patterns":[{"match":"*","model":"fast"}]}`, map[string]string{"OA": "x", "AN": "y"})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Resolve([]byte("oa/fast"))
	if m == nil || m.Strategy != "round-robin" || len(m.Targets) != 2 || m.Targets[0].Name != "oa/a/gpt-4o" || m.Targets[1].Name != "oa/b/gpt-4o" ||
		m.Weights[0] != 3 || m.Index != c.Model([]byte("fast")).Index || len(m.TargetsFor(Chat)) != 2 {
		t.Fatalf("oa/fast: %+v", m)
	}
	if m = c.Resolve([]byte("an/claude-x")); m == nil || m.Strategy != "priority" || len(m.Targets) != 1 || m.Targets[0].Name != "an/k/claude-x" || m.Index != -1 {
		t.Fatalf("an/claude-x: %+v", m)
	}
	if m = c.Resolve([]byte("oa/gpt-4o")); m != c.Model([]byte("oa/gpt-4o")) {
		t.Fatalf("a configured model named like a route keeps its meaning: %+v", m)
	}
	if m = c.Resolve([]byte("an/fast")); m == nil || len(m.Targets) != 1 || m.Targets[0].Name != "an/k/claude-x" {
		t.Fatalf("an/fast: %+v", m)
	}
	if m = c.Resolve([]byte("zz/fast")); m != c.Model([]byte("fast")) {
		t.Fatalf("an unknown provider falls to the patterns: %+v", m)
	}
}
