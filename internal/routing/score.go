// Package routing scores and ranks upstream candidates: the reference's
// nine-factor score (capability, allocation, health, reliability, latency,
// preference, cost, quota, circuit), eligibility (quota not exhausted,
// allocation not deny, circuit not open, plus the live gates: not cooling
// down and affordable by the token ledger), human-readable reasons and a
// stable ranking. It is pure: callers bring the evidence from the actors'
// published snapshots.
package routing

import (
	"math"
	"sort"
	"strconv"

	"github.com/omniroute/gateway/internal/enum"
	"github.com/omniroute/gateway/internal/quota"
)

// Allocation is the governance verdict for a candidate.
type Allocation uint8

// Allocations.
const (
	AllocationAllow Allocation = iota
	AllocationWarn
	AllocationDeny
)

var allocationNames = [...]string{"allow", "warn", "deny"}

func (a Allocation) String() string { return enum.Name(allocationNames[:], a, "allow") }

// ParseAllocation maps a wire name to an allocation.
func ParseAllocation(s string) (Allocation, bool) {
	return enum.Parse[Allocation](allocationNames[:], s)
}

// Circuit is a circuit breaker state.
type Circuit uint8

// Circuit states.
const (
	CircuitClosed Circuit = iota
	CircuitOpen
	CircuitHalfOpen
)

var circuitNames = [...]string{"closed", "open", "half_open"}

func (c Circuit) String() string { return enum.Name(circuitNames[:], c, "closed") }

// MarshalText implements encoding.TextMarshaler.
func (c Circuit) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// ParseCircuit maps a wire name to a circuit state.
func ParseCircuit(s string) (Circuit, bool) { return enum.Parse[Circuit](circuitNames[:], s) }

// Budget is the token ledger's verdict for a candidate.
type Budget uint8

// Budget verdicts. Unconfigured (no known limit) is affordable: fail open.
const (
	BudgetUnconfigured Budget = iota
	BudgetAffordable
	BudgetExhausted
	BudgetInsufficient
)

// Affordable reports whether the ledger lets the request through.
func (b Budget) Affordable() bool { return b == BudgetUnconfigured || b == BudgetAffordable }

// Opt is an optional number.
type Opt struct {
	V   float64
	Set bool
}

// Some returns a set Opt.
func Some(v float64) Opt { return Opt{V: v, Set: true} }

// Candidate is what routing knows about one target.
type Candidate struct {
	ProviderID      string
	ModelID         string
	CapabilityScore float64
	Allocation      Allocation
	HealthScore     float64
	Circuit         Circuit
	Quota           quota.Status
	LatencyMs       Opt
	ErrorRate       Opt
	ModelPreference Opt
	CostPreference  Opt
	// Live gates (not part of the preview API): a target cooling down after
	// a failure, and the ledger's verdict.
	Cooling bool
	Budget  Budget
}

// Factors are the nine multiplicands of the score.
type Factors struct {
	Capability  float64 `json:"capability"`
	Allocation  float64 `json:"allocation"`
	Health      float64 `json:"health"`
	Reliability float64 `json:"reliability"`
	Latency     float64 `json:"latency"`
	Preference  float64 `json:"preference"`
	Cost        float64 `json:"cost"`
	Quota       float64 `json:"quota"`
	Circuit     float64 `json:"circuit"`
}

// clamp01 clamps x to [0,1]; a non-finite x gives fallback.
func clamp01(x, fallback float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fallback
	}
	return math.Min(1, math.Max(0, x))
}

func opt(o Opt, fallback float64) float64 {
	if !o.Set {
		return fallback
	}
	return clamp01(o.V, fallback)
}

// QuotaFactor is the quota multiplicand: exhausted 0, approaching 0.65,
// unavailable 0.9, unknown and healthy 1 (unknown is neutral).
func QuotaFactor(s quota.Status) float64 {
	switch s {
	case quota.StatusExhausted:
		return 0
	case quota.StatusApproaching:
		return 0.65
	case quota.StatusUnavailable:
		return 0.9
	}
	return 1
}

// ComputeFactors evaluates the nine factors.
func ComputeFactors(c *Candidate) Factors {
	f := Factors{
		Capability:  clamp01(c.CapabilityScore, 0),
		Health:      clamp01(c.HealthScore, 0.5),
		Reliability: 1 - opt(c.ErrorRate, 0),
		Latency:     1,
		Preference:  opt(c.ModelPreference, 0.5),
		Cost:        opt(c.CostPreference, 1),
		Quota:       QuotaFactor(c.Quota),
		Circuit:     1,
	}
	switch c.Allocation {
	case AllocationDeny:
		f.Allocation = 0
	case AllocationWarn:
		f.Allocation = 0.85
	default:
		f.Allocation = 1
	}
	if c.LatencyMs.Set && !math.IsNaN(c.LatencyMs.V) && !math.IsInf(c.LatencyMs.V, 0) {
		f.Latency = math.Max(0.4, 1-math.Min(c.LatencyMs.V, 30000)/50000)
	}
	switch c.Circuit {
	case CircuitOpen:
		f.Circuit = 0
	case CircuitHalfOpen:
		f.Circuit = 0.5
	}
	return f
}

// round6 rounds to six decimals, as the reference does.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Score returns the candidate's score (product of the factors, rounded to
// six decimals) and its eligibility, without building reasons.
func Score(c *Candidate) (float64, bool) {
	f := ComputeFactors(c)
	s := round6(f.Capability * f.Allocation * f.Health * f.Reliability * f.Latency * f.Preference * f.Cost * f.Quota * f.Circuit)
	eligible := s > 0 && c.Allocation != AllocationDeny && c.Circuit != CircuitOpen && c.Quota != quota.StatusExhausted &&
		!c.Cooling && c.Budget.Affordable()
	return s, eligible
}

// Explanation is one scored candidate with its reasons.
type Explanation struct {
	ProviderID string   `json:"providerId"`
	ModelID    string   `json:"modelId"`
	Score      float64  `json:"score"`
	Eligible   bool     `json:"eligible"`
	Reasons    []string `json:"reasons"`
	Factors    Factors  `json:"factors"`
}

// Explain scores a candidate and says why.
func Explain(c *Candidate) Explanation {
	f := ComputeFactors(c)
	s, eligible := Score(c)
	e := Explanation{ProviderID: c.ProviderID, ModelID: c.ModelID, Score: s, Eligible: eligible, Factors: f}
	if f.Capability >= 0.8 {
		e.Reasons = append(e.Reasons, "capability match")
	} else {
		e.Reasons = append(e.Reasons, "partial capability match")
	}
	switch c.Allocation {
	case AllocationDeny:
		e.Reasons = append(e.Reasons, "allocation denied")
	case AllocationWarn:
		e.Reasons = append(e.Reasons, "allocation permitted with warning")
	default:
		e.Reasons = append(e.Reasons, "allocation permitted")
	}
	if f.Health >= 0.8 {
		e.Reasons = append(e.Reasons, "provider healthy")
	} else {
		e.Reasons = append(e.Reasons, "provider health degraded")
	}
	e.Reasons = append(e.Reasons, "circuit "+c.Circuit.String())
	if c.Quota == quota.StatusUnknown {
		e.Reasons = append(e.Reasons, "quota state unknown but not exhausted")
	} else {
		e.Reasons = append(e.Reasons, "quota "+c.Quota.String())
	}
	if c.LatencyMs.Set && !math.IsNaN(c.LatencyMs.V) && !math.IsInf(c.LatencyMs.V, 0) {
		e.Reasons = append(e.Reasons, "latency "+strconv.FormatFloat(math.Round(c.LatencyMs.V), 'f', -1, 64)+"ms")
	}
	if c.ErrorRate.Set && !math.IsNaN(c.ErrorRate.V) && !math.IsInf(c.ErrorRate.V, 0) {
		e.Reasons = append(e.Reasons, strconv.FormatFloat(math.Round(c.ErrorRate.V*100), 'f', -1, 64)+"% recent errors")
	}
	if c.Cooling {
		e.Reasons = append(e.Reasons, "cooling down after a failure")
	}
	switch c.Budget {
	case BudgetExhausted:
		e.Reasons = append(e.Reasons, "token budget exhausted")
	case BudgetInsufficient:
		e.Reasons = append(e.Reasons, "token budget insufficient for this request")
	}
	return e
}

// Rank scores every candidate and sorts them by score, highest first,
// keeping the given order among equal scores. selected is the index (into
// the ranked slice) of the first eligible candidate, or -1.
func Rank(cs []Candidate) (ranked []Explanation, selected int) {
	ranked = make([]Explanation, len(cs))
	for i := range cs {
		ranked[i] = Explain(&cs[i])
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].Score > ranked[j].Score })
	selected = -1
	for i := range ranked {
		if ranked[i].Eligible {
			selected = i
			break
		}
	}
	return ranked, selected
}
