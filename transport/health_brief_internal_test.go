package transport

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestHealthSectionThatCannotBeEncodedIsNamed: a section holding a value
// JSON has no form for is replaced by its error, the others are kept, and
// the status says degraded (draining stays draining).
func TestHealthSectionThatCannotBeEncodedIsNamed(t *testing.T) {
	for _, status := range []string{"ok", "draining"} {
		out := map[string]any{"status": status, "version": "v", "good": map[string]int{"n": 1},
			"bad": map[string]float64{"ratio": math.Inf(1)}}
		var got map[string]any
		if err := json.Unmarshal(encodeHealth(out), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"ok": "degraded", "draining": "draining"}[status]
		bad, _ := got["bad"].(map[string]any)
		good, _ := got["good"].(map[string]any)
		if got["status"] != want || good["n"] != float64(1) || !strings.Contains(fmt.Sprint(bad["error"]), "could not be encoded") {
			t.Fatalf("status %s: %v", status, got)
		}
	}
}
