package transport

import (
	"reflect"
	"testing"
)

// TestFullestFirstAndBriefTenants: the dashboard lists the fullest windows
// first (by share of the limit, then by name), and health shows tenants'
// windows only to management callers.
func TestFullestFirstAndBriefTenants(t *testing.T) {
	ws := []limitWindow{
		{Kind: "tenant", Budget: "b", Limit: 10, Used: 5},
		{Kind: "connection", Budget: "p/a", Model: "m", Limit: 100, Used: 90},
		{Kind: "tenant", Budget: "a", Limit: 10, Used: 5},
		{Kind: "connection", Budget: "p/a", Model: "n", Limit: 0},
	}
	fullestFirst(ws)
	var got []string
	for _, w := range ws {
		got = append(got, w.Budget+w.Model)
	}
	if want := []string{"p/am", "a", "b", "p/an"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	body := map[string]any{"activeKeys": 2, "windows": ws, "keyStore": "local"}
	brief := briefTenants(body).(map[string]any)
	if _, ok := brief["windows"]; ok || brief["activeKeys"] != 2 || brief["keyStore"] != "local" {
		t.Fatalf("brief %v", brief)
	}
	if _, ok := body["windows"]; !ok {
		t.Fatal("briefTenants changed the full body")
	}
}
