package relay

import (
	"strings"
	"testing"
)

// TestReasonTables: every fallback reason and every rejection reason has
// its name, unique in its family; a fallback's code says it is Bifrost's;
// a rejection names the error the caller gets.
func TestReasonTables(t *testing.T) {
	if ReasonNone.String() != "" || len(Fallbacks()) != int(NumFallbacks)-1 {
		t.Fatalf("ReasonNone has a code, or Fallbacks does not list every reason")
	}
	seen := map[string]bool{}
	for _, f := range Fallbacks() {
		if !strings.HasPrefix(f.String(), "bifrost-") || seen[f.String()] {
			t.Errorf("fallback %d: code %q missing, not bifrost-…, or repeated", f, f.String())
		}
		seen[f.String()] = true
	}
	if len(Rejections()) != int(NumRejections) {
		t.Fatalf("Rejections lists %d of %d reasons", len(Rejections()), NumRejections)
	}
	seen = map[string]bool{}
	for _, r := range Rejections() {
		if r.String() == "" || seen[r.String()] || r.Code() == 0 || r.Code().Status() < 400 {
			t.Errorf("rejection %d (%q) incomplete or repeated: code %q", r, r.String(), r.Code())
		}
		seen[r.String()] = true
	}
}
