package modellist

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/catalog/catalogtest"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/pricing"
)

// testCatalog has two models and an alias of the second.
func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	return catalogtest.Build(t, `{
		"providers": {"p": {"base_url": "http://127.0.0.1:1/v1", "apis": ["chat", "messages"], "connections": {"k": {"api_key_env": "K"}}}},
		"models": {
			"a": {"targets": [{"connection": "p", "model": "up-a"}]},
			"b": {"description": "the \"b\" model", "targets": [{"connection": "p"}]}
		},
		"aliases": {"c": "b"}
	}`)
}

func TestAppendList(t *testing.T) {
	cat := testCatalog(t)
	created := time.Unix(1700000000, 0)
	var openai struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, Strategy, Description string
			OwnedBy                           string `json:"owned_by"`
			AliasOf                           string `json:"alias_of"`
			Created                           int64
			APIs                              []string
		} `json:"data"`
	}
	b := AppendList([]byte("x"), cat, false, created)
	if b[0] != 'x' {
		t.Fatal("AppendList overwrote what b held")
	}
	if err := json.Unmarshal(b[1:], &openai); err != nil {
		t.Fatalf("OpenAI list is not JSON: %v\n%s", err, b[1:])
	}
	var ids []string
	for _, d := range openai.Data {
		ids = append(ids, d.ID)
		if d.Object != "model" || d.OwnedBy != "omniroute" || d.Created != created.Unix() || len(d.APIs) == 0 {
			t.Errorf("entry %+v lacks the OpenAI fields", d)
		}
	}
	if got := strings.Join(ids, ","); openai.Object != "list" || got != "a,b,c" {
		t.Fatalf("OpenAI list: object %q, ids %s; want list, a,b,c (models, then aliases)", openai.Object, got)
	}
	if openai.Data[2].AliasOf != "b" || openai.Data[1].AliasOf != "" || openai.Data[1].Description != `the "b" model` {
		t.Fatalf("alias_of/description wrong: %+v", openai.Data)
	}

	var anth struct {
		Data []struct {
			Type, ID    string
			DisplayName string `json:"display_name"`
		} `json:"data"`
		HasMore bool   `json:"has_more"`
		FirstID string `json:"first_id"`
		LastID  string `json:"last_id"`
	}
	if err := json.Unmarshal(AppendList(nil, cat, true, created), &anth); err != nil {
		t.Fatal(err)
	}
	if len(anth.Data) != 3 || anth.FirstID != "a" || anth.LastID != "c" || anth.HasMore || anth.Data[0].Type != "model" || anth.Data[2].DisplayName != "c" {
		t.Fatalf("Anthropic list: %+v", anth)
	}

	var empty map[string]any
	if err := json.Unmarshal(AppendList(nil, &catalog.Catalog{}, true, created), &empty); err != nil || empty["first_id"] != nil {
		t.Fatalf("empty Anthropic list: %v %v", empty, err)
	}
}

func TestAppendTargets(t *testing.T) {
	cat := testCatalog(t)
	m := cat.Model([]byte("a"))
	info := modelinfo.Shipped().Lookup("")
	b := AppendModel(nil, false, "a", m, time.Unix(0, 0))
	b = AppendTargets(b, m, []Target{{Target: "p/k/up-a", UpstreamModel: "up-a", APIs: []string{"chat"}, ModelInfo: &info, Price: &pricing.Price{}}})
	var got struct {
		ID      string `json:"id"`
		Strict  *bool  `json:"strict"`
		Targets []struct {
			Target string
			Price  *pricing.Price
		} `json:"targets"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("model with targets is not JSON: %v\n%s", err, b)
	}
	if got.ID != "a" || got.Strict == nil || len(got.Targets) != 1 || got.Targets[0].Target != "p/k/up-a" || got.Targets[0].Price == nil {
		t.Fatalf("model with targets: %s", b)
	}
}
