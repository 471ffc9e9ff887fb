package ops

import (
	"reflect"
	"testing"
)

// TestFullestFirst: the dashboard lists the fullest windows first (by
// share of the limit, then by name).
func TestFullestFirst(t *testing.T) {
	ws := []LimitWindow{
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
}
