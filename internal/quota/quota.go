// Package quota is the provider-neutral quota telemetry model: what a
// provider connection has left, per dimension, and how sure we are.
//
// Values come from several sources, ranked provider_api > response_headers
// > configured > estimated > unknown; for each dimension only the best-ranked
// source counts, so a local estimate is never presented as provider data.
// The five states are truthful: "exhausted" needs a source that reports
// nothing left, "unknown" (no source, or no numbers) never disables a
// provider, and "unavailable" means a supported source failed to answer.
//
// Everything here is pure: parsing, ranking and status rules. The actors in
// actors/quota own the state and publish it.
package quota

import (
	"encoding/json"
	"time"

	"github.com/omniroute/gateway/internal/enum"
	"github.com/omniroute/gateway/messages"
)

// Source says where a value came from; a lower rank is more trustworthy.
type Source uint8

// Sources in rank order.
const (
	SourceProviderAPI Source = iota
	SourceResponseHeaders
	SourceConfigured
	SourceEstimated
	SourceUnknown
)

var sourceNames = [...]string{"provider_api", "response_headers", "configured", "estimated", "unknown"}

// String returns the wire name.
func (s Source) String() string { return enum.Name(sourceNames[:], s, "unknown") }

// Rank is the source's position in the preference order (0 is best).
func (s Source) Rank() int {
	if s > SourceUnknown {
		return int(SourceUnknown)
	}
	return int(s)
}

// MarshalText implements encoding.TextMarshaler.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Confidence grades a value.
type Confidence uint8

// Confidence levels.
const (
	ConfidenceUnknown Confidence = iota
	ConfidenceLow
	ConfidenceMedium
	ConfidenceHigh
	ConfidenceAuthoritative
)

var confidenceNames = [...]string{"unknown", "low", "medium", "high", "authoritative"}

// String returns the wire name.
func (c Confidence) String() string { return enum.Name(confidenceNames[:], c, "unknown") }

// MarshalText implements encoding.TextMarshaler.
func (c Confidence) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Status is the state of a connection (or of one model on it).
type Status uint8

// The five states. The zero value is Unknown.
const (
	StatusUnknown Status = iota
	StatusHealthy
	StatusApproaching
	StatusUnavailable
	StatusExhausted
)

var statusNames = [...]string{"unknown", "healthy", "approaching_limit", "unavailable", "exhausted"}

// Statuses lists every status in a stable order (for metrics).
var Statuses = [...]Status{StatusHealthy, StatusApproaching, StatusExhausted, StatusUnavailable, StatusUnknown}

// String returns the wire name.
func (s Status) String() string { return enum.Name(statusNames[:], s, "unknown") }

// ParseStatus maps a wire name to its status.
func ParseStatus(name string) (Status, bool) { return enum.Parse[Status](statusNames[:], name) }

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Severity orders statuses for roll-ups: exhausted is the most severe,
// unknown the least (it says nothing).
func (s Status) Severity() int {
	switch s {
	case StatusExhausted:
		return 4
	case StatusApproaching:
		return 3
	case StatusUnavailable:
		return 2
	case StatusHealthy:
		return 1
	}
	return 0
}

// Flags of a Value saying which numbers are known.
const (
	HasLimit uint8 = 1 << iota
	HasUsed
	HasRemaining
)

// Value is one dimension of a connection's quota from one source.
type Value struct {
	Dimension messages.QuotaDimension
	// Model scopes the value to one upstream model; "" means the whole
	// connection (credits, balances, configured limits).
	Model     string
	Flags     uint8
	Limit     float64
	Used      float64
	Remaining float64
	// ResetAt is when the dimension refills; zero when unknown.
	ResetAt    time.Time
	Unit       string
	Source     Source
	Confidence Confidence
	// Expires is when the value stops being evidence: its window reset, or
	// the end of its freshness horizon. Zero means it does not expire.
	Expires time.Time
}

// Known reports whether the flag's number is present.
func (v *Value) Known(flag uint8) bool { return v.Flags&flag != 0 }

// Stale reports whether the value has expired at now.
func (v *Value) Stale(now time.Time) bool { return !v.Expires.IsZero() && !now.Before(v.Expires) }

type valueJSON struct {
	Dimension  string     `json:"dimension"`
	Model      string     `json:"model,omitempty"`
	Limit      *float64   `json:"limit,omitempty"`
	Used       *float64   `json:"used,omitempty"`
	Remaining  *float64   `json:"remaining,omitempty"`
	ResetAt    *time.Time `json:"resetAt,omitempty"`
	Unit       string     `json:"unit,omitempty"`
	Source     Source     `json:"source"`
	Confidence Confidence `json:"confidence"`
}

// MarshalJSON renders unknown numbers as absent, never as zero.
func (v Value) MarshalJSON() ([]byte, error) {
	out := valueJSON{Dimension: v.Dimension.String(), Model: v.Model, Unit: v.Unit, Source: v.Source, Confidence: v.Confidence}
	if v.Known(HasLimit) {
		out.Limit = &v.Limit
	}
	if v.Known(HasUsed) {
		out.Used = &v.Used
	}
	if v.Known(HasRemaining) {
		out.Remaining = &v.Remaining
	}
	if !v.ResetAt.IsZero() {
		t := v.ResetAt.UTC()
		out.ResetAt = &t
	}
	return json.Marshal(out)
}

// DefaultApproachingThreshold is the remaining share at or below which a
// dimension is approaching its limit.
const DefaultApproachingThreshold = 0.2

// StatusForValues applies the reference's rules: no values → unknown; any
// value with remaining ≤ 0, or used ≥ limit → exhausted; any value with
// remaining/limit ≤ threshold (limit > 0) → approaching_limit; else healthy
// (including values without numbers).
func StatusForValues(values []Value, threshold float64) Status {
	if len(values) == 0 {
		return StatusUnknown
	}
	for i := range values {
		v := &values[i]
		if v.Known(HasRemaining) && v.Remaining <= 0 {
			return StatusExhausted
		}
		if v.Known(HasUsed) && v.Known(HasLimit) && v.Used >= v.Limit {
			return StatusExhausted
		}
	}
	for i := range values {
		v := &values[i]
		if v.Known(HasRemaining) && v.Known(HasLimit) && v.Limit > 0 && v.Remaining/v.Limit <= threshold {
			return StatusApproaching
		}
	}
	return StatusHealthy
}

// Reading is what one source adapter currently knows.
type Reading struct {
	Source Source
	// Supported is true when the adapter applies to the connection and has
	// tried to read it (a poller that polled, a header mapping that saw a
	// response with its headers, configured limits that exist).
	Supported bool
	Values    []Value
	// Err is the adapter's last failure, "" when none.
	Err string
}

// State is the merged view of a connection or of one model on it.
type State struct {
	Supported bool
	Status    Status
	Values    []Value
	Error     string
	// Until is when the state may change by itself: the earliest expiry
	// among the values kept. Zero when nothing expires.
	Until time.Time
	// StatusUntil is how long an exhausted or approaching status holds on
	// the evidence at hand: the latest expiry among the values that cause
	// it (zero when one of them never expires, or for other statuses).
	StatusUntil time.Time
}

// causes reports whether v alone would put a state in status s.
func causes(v *Value, s Status, threshold float64) bool {
	switch s {
	case StatusExhausted:
		return (v.Known(HasRemaining) && v.Remaining <= 0) || (v.Known(HasUsed) && v.Known(HasLimit) && v.Used >= v.Limit)
	case StatusApproaching:
		return v.Known(HasRemaining) && v.Known(HasLimit) && v.Limit > 0 && v.Remaining/v.Limit <= threshold
	}
	return false
}

// Collect merges adapter readings, in the order given (ties keep the
// earlier value), keeping per dimension the value of the best-ranked
// source. Values that are stale at now are dropped first. A reading for
// another model than model (and not connection-wide) is ignored; model ""
// collects only connection-wide values. The last adapter error wins.
func Collect(readings []Reading, model string, threshold float64, now time.Time) State {
	var st State
	var byDim [messages.NumQuotaDimensions]int8
	for i := range byDim {
		byDim[i] = -1
	}
	for _, r := range readings {
		if !r.Supported && len(r.Values) == 0 && r.Err == "" {
			continue
		}
		// A source supports this scope when it failed, when it answered
		// without values, or when it has values for the scope; a source
		// whose values are all about other models says nothing here.
		applies := r.Err != "" || len(r.Values) == 0
		for i := range r.Values {
			if r.Values[i].Model == "" || r.Values[i].Model == model {
				applies = true
				break
			}
		}
		if !applies {
			continue
		}
		st.Supported = true
		if r.Err != "" {
			st.Error = r.Err
		}
		for _, v := range r.Values {
			if v.Model != "" && v.Model != model {
				continue
			}
			if v.Stale(now) || v.Dimension >= messages.NumQuotaDimensions {
				continue
			}
			if cur := byDim[v.Dimension]; cur >= 0 {
				if v.Source.Rank() < st.Values[cur].Source.Rank() {
					st.Values[cur] = v
				}
				continue
			}
			byDim[v.Dimension] = int8(len(st.Values))
			st.Values = append(st.Values, v)
		}
	}
	switch {
	case len(st.Values) > 0:
		st.Status = StatusForValues(st.Values, threshold)
	case st.Supported:
		st.Status = StatusUnavailable
	default:
		st.Status = StatusUnknown
	}
	forever := false
	for i := range st.Values {
		v := &st.Values[i]
		e := v.Expires
		if !e.IsZero() && (st.Until.IsZero() || e.Before(st.Until)) {
			st.Until = e
		}
		if causes(v, st.Status, threshold) {
			if e.IsZero() {
				forever = true
			} else if e.After(st.StatusUntil) {
				st.StatusUntil = e
			}
		}
	}
	if forever {
		st.StatusUntil = time.Time{}
	}
	return st
}
