package routing

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/quota"
)

// MaxPreviewCandidates bounds a route preview request.
const MaxPreviewCandidates = 100

// PreviewError lists every problem of a route preview request.
type PreviewError struct{ Issues []string }

// maxIssuesShown is how many issues the message spells out.
const maxIssuesShown = 5

func (e *PreviewError) Error() string {
	var b strings.Builder
	b.WriteString("Invalid route preview request: ")
	for i, s := range e.Issues {
		if i == maxIssuesShown {
			b.WriteString(" (and " + strconv.Itoa(len(e.Issues)-maxIssuesShown) + " more)")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}

var candidateFields = map[string]bool{"providerId": true, "modelId": true, "capabilityScore": true, "allocation": true,
	"healthScore": true, "circuit": true, "quota": true, "latencyMs": true, "errorRate": true, "modelPreference": true, "costPreference": true}

// ParsePreview validates a POST /api/omniroute/route/preview body:
// {"candidates":[…]} with 1 to 100 candidates, each with providerId and
// modelId (non-empty strings), capabilityScore and healthScore in [0,1],
// allocation allow|warn|deny, circuit closed|open|half_open, quota one of
// the five states, and optionally latencyMs ≥ 0 and errorRate,
// modelPreference, costPreference in [0,1]. Every problem is reported.
func ParsePreview(body []byte) ([]Candidate, error) {
	var top map[string]json.RawMessage
	if err := strictJSON(body, &top); err != nil || top == nil {
		return nil, &PreviewError{Issues: []string{"the body must be a JSON object such as {\"candidates\":[…]}"}}
	}
	var issues []string
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "candidates" {
			issues = append(issues, strconv.Quote(k)+": unknown field; the body has only \"candidates\"")
		}
	}
	raw, ok := top["candidates"]
	var list []json.RawMessage
	switch {
	case !ok:
		issues = append(issues, "candidates: required, an array of 1 to 100 candidates")
	case json.Unmarshal(raw, &list) != nil || list == nil:
		issues = append(issues, "candidates: must be an array of 1 to 100 candidates")
	case len(list) == 0 || len(list) > MaxPreviewCandidates:
		issues = append(issues, "candidates: must hold 1 to 100 candidates, got "+strconv.Itoa(len(list)))
		list = nil
	}
	out := make([]Candidate, len(list))
	for i, item := range list {
		issues = parseCandidate(item, "candidates["+strconv.Itoa(i)+"]", &out[i], issues)
	}
	if len(issues) > 0 {
		return nil, &PreviewError{Issues: issues}
	}
	return out, nil
}

func parseCandidate(raw json.RawMessage, path string, c *Candidate, issues []string) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return append(issues, path+": must be an object")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !candidateFields[k] {
			issues = append(issues, path+"."+k+": unknown field")
		}
	}
	str := func(k string) string {
		v, ok := m[k]
		var s string
		if !ok || json.Unmarshal(v, &s) != nil || strings.TrimSpace(s) == "" || len(s) > 256 {
			issues = append(issues, path+"."+k+": required, a non-empty string of at most 256 characters")
		}
		return s
	}
	number := func(k string, required bool, max float64) Opt {
		v, ok := m[k]
		if !ok {
			if required {
				issues = append(issues, path+"."+k+": required, "+rangeText(max))
			}
			return Opt{}
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || math.IsNaN(f) || f < 0 || f > max {
			issues = append(issues, path+"."+k+": must be "+rangeText(max))
			return Opt{}
		}
		return Some(f)
	}
	enum := func(k string, names string, parse func(string) bool) {
		v, ok := m[k]
		var s string
		if !ok || json.Unmarshal(v, &s) != nil || !parse(s) {
			issues = append(issues, path+"."+k+": required, one of "+names)
		}
	}
	c.ProviderID = str("providerId")
	c.ModelID = str("modelId")
	c.CapabilityScore = number("capabilityScore", true, 1).V
	c.HealthScore = number("healthScore", true, 1).V
	enum("allocation", "allow, warn, deny", func(s string) (ok bool) { c.Allocation, ok = ParseAllocation(s); return })
	enum("circuit", "closed, open, half_open", func(s string) (ok bool) { c.Circuit, ok = ParseCircuit(s); return })
	enum("quota", "healthy, approaching_limit, exhausted, unavailable, unknown", func(s string) (ok bool) { c.Quota, ok = quota.ParseStatus(s); return })
	c.LatencyMs = number("latencyMs", false, math.MaxFloat64)
	c.ErrorRate = number("errorRate", false, 1)
	c.ModelPreference = number("modelPreference", false, 1)
	c.CostPreference = number("costPreference", false, 1)
	return issues
}

func rangeText(max float64) string {
	if max == 1 {
		return "a number between 0 and 1"
	}
	return "a number of at least 0"
}

func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return errTrailing
	}
	return nil
}

type trailingError struct{}

func (trailingError) Error() string { return "trailing data" }

var errTrailing = trailingError{}
