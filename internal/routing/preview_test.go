package routing

import (
	"fmt"
	"strings"
	"testing"
)

const good = `{"providerId":"openai","modelId":"gpt-4o","capabilityScore":1,"allocation":"allow","healthScore":0.9,"circuit":"closed","quota":"healthy"}`

func TestParsePreview(t *testing.T) {
	cs, err := ParsePreview([]byte(`{"candidates":[` + good + `,{"providerId":"b","modelId":"m","capabilityScore":0.5,"allocation":"deny","healthScore":1,"circuit":"half_open","quota":"unknown","latencyMs":250,"errorRate":0.1,"modelPreference":1,"costPreference":0}]}`))
	if err != nil || len(cs) != 2 {
		t.Fatalf("%v %+v", err, cs)
	}
	if c := cs[1]; c.Allocation != AllocationDeny || c.Circuit != CircuitHalfOpen || !c.LatencyMs.Set || c.LatencyMs.V != 250 || !c.CostPreference.Set || c.CostPreference.V != 0 {
		t.Fatalf("second candidate %+v", c)
	}
	bad := []struct {
		body  string
		wants []string
	}{
		{`[]`, []string{"the body must be a JSON object"}},
		{`nope`, []string{"the body must be a JSON object"}},
		{`{}`, []string{"candidates: required"}},
		{`{"candidates":[]}`, []string{"must hold 1 to 100 candidates, got 0"}},
		{`{"candidates":{}}`, []string{"candidates: must be an array"}},
		{`{"candidates":[` + good + `],"engine":"auto"}`, []string{`"engine": unknown field`}},
		{`{"candidates":[1]}`, []string{"candidates[0]: must be an object"}},
		{`{"candidates":[{"providerId":"","modelId":7,"capabilityScore":1.5,"allocation":"maybe","healthScore":-1,"circuit":"ajar","quota":"fine","latencyMs":-5,"errorRate":2,"latency":1}]}`,
			[]string{"candidates[0].latency: unknown field", "candidates[0].providerId: required", "candidates[0].modelId: required",
				"candidates[0].capabilityScore: must be a number between 0 and 1", "candidates[0].healthScore: must be", "(and 5 more)"}},
	}
	for _, b := range bad {
		_, err := ParsePreview([]byte(b.body))
		if err == nil {
			t.Fatalf("%s accepted", b.body)
		}
		for _, w := range b.wants {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q lacks %q", b.body, err, w)
			}
		}
	}
	var many []string
	for i := 0; i < 101; i++ {
		many = append(many, good)
	}
	if _, err := ParsePreview([]byte(`{"candidates":[` + strings.Join(many, ",") + `]}`)); err == nil || !strings.Contains(err.Error(), "got 101") {
		t.Fatalf("101 candidates: %v", err)
	}
	if _, err := ParsePreview([]byte(fmt.Sprintf(`{"candidates":[%s]} {}`, good))); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func FuzzParsePreview(f *testing.F) {
	f.Add(`{"candidates":[` + good + `]}`)
	f.Add(`{"candidates":[{"providerId":"a","latencyMs":1e308}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		cs, err := ParsePreview([]byte(body))
		if err == nil && (len(cs) == 0 || len(cs) > MaxPreviewCandidates) {
			t.Fatalf("accepted %d candidates", len(cs))
		}
		if err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
		if err == nil {
			ranked, sel := Rank(cs)
			if sel >= 0 && !ranked[sel].Eligible {
				t.Fatal("selected an ineligible candidate")
			}
		}
	})
}
