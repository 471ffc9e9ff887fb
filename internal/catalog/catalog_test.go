package catalog

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
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
