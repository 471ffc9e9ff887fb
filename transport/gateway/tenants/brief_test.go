package tenants

import (
	"testing"

	"github.com/omniroute/gateway/transport/ops"
)

// TestBriefTenants: health shows tenants' windows only to management
// callers (the order of windows is ops' TestFullestFirst).
func TestBriefTenants(t *testing.T) {
	ws := []ops.LimitWindow{
		{Kind: "connection", Budget: "p/a", Model: "m", Limit: 100, Used: 90},
		{Kind: "tenant", Budget: "a", Limit: 10, Used: 5},
	}
	body := map[string]any{"activeKeys": 2, "windows": ws, "keyStore": "local"}
	brief := (&Layer{}).Brief(body).(map[string]any)
	if _, ok := brief["windows"]; ok || brief["activeKeys"] != 2 || brief["keyStore"] != "local" {
		t.Fatalf("brief %v", brief)
	}
	if _, ok := body["windows"]; !ok {
		t.Fatal("the tenants' brief changed the full body")
	}
}
