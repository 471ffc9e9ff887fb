// Package tenantpolicy defines what a tenant may do: its rate limits,
// concurrency cap, spend budgets, allowed models, priority class and fair
// share weight. The same Policy is a tenant entry of the configuration file
// (embedded in config.Tenant) and the body of the management API's key
// routes, so both are decoded and validated by this package alone.
//
// Zero means "no limit" for every limit and budget, so an empty policy
// leaves a tenant unrestricted, as tenants were before policies existed.
package tenantpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/omniroute/gateway/internal/rolling"
)

// Policy is one tenant's limits. JSON names are the configuration file's
// and the management API's field names.
type Policy struct {
	// RequestsPerMinute caps requests started in any minute (0 = none).
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	// TokensPerMinute caps tokens in any minute: input estimate plus
	// max_tokens reserved at admission, settled from the real usage.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty"`
	// The same per hour and per day (any hour, any 24 hours: rolling
	// windows like the minute's, not calendar days).
	RequestsPerHour int64 `json:"requests_per_hour,omitempty"`
	RequestsPerDay  int64 `json:"requests_per_day,omitempty"`
	TokensPerHour   int64 `json:"tokens_per_hour,omitempty"`
	TokensPerDay    int64 `json:"tokens_per_day,omitempty"`
	// MaxConcurrent caps requests in flight at once (0 = none).
	MaxConcurrent int64 `json:"max_concurrent,omitempty"`
	// DailyBudgetUSD caps spend per UTC calendar day, in US dollars.
	DailyBudgetUSD float64 `json:"daily_budget_usd,omitempty"`
	// MonthlyBudgetUSD caps spend per UTC calendar month, in US dollars.
	MonthlyBudgetUSD float64 `json:"monthly_budget_usd,omitempty"`
	// AllowedModels lists the model names (or glob patterns with * and ?)
	// the tenant may ask for; empty allows every model.
	AllowedModels []string `json:"allowed_models,omitempty"`
	// Class is the priority class: interactive or batch (empty = the
	// OMNIROUTE_PRIORITY_DEFAULT_CLASS).
	Class string `json:"class,omitempty"`
	// Weight is the tenant's fair share in the ingest queue and the
	// admission lanes, relative to other tenants (0 = the default, 1).
	Weight int64 `json:"weight,omitempty"`
}

// Bounds of the limits: large enough for any real tenant, small enough that
// the limiter's arithmetic (nanoseconds × tokens, nano-dollars) cannot
// overflow.
const (
	MaxRate          = 1 << 32 // requests or tokens per minute
	MaxConcurrent    = 1 << 20
	MaxBudgetUSD     = 1e9
	MaxWeight        = 1000
	MaxModels        = 256
	MaxPatternLen    = 128
	DefaultWeight    = 1
	ClassInteractive = "interactive"
	ClassBatch       = "batch"
)

// Field describes one policy field. Fields is the one list of them: the
// validator runs each entry's check, a test holds the list, the struct's
// JSON tags and docs/tenants.md in step.
type Field struct {
	Name string // JSON name
	Doc  string // one line for docs and errors
	// check returns "" when the field is valid, else the problem; sub is
	// appended to the path (an element index such as "[2]").
	check func(p *Policy) (sub, problem string)
}

// Fields lists every policy field in the order of the struct.
var Fields = []Field{
	{"requests_per_minute", "requests started in any minute (0 = no limit)", func(p *Policy) (string, string) { return "", checkRate(p.RequestsPerMinute) }},
	{"tokens_per_minute", "tokens in any minute, reserved from the estimate and max_tokens, settled from usage (0 = no limit)", func(p *Policy) (string, string) { return "", checkRate(p.TokensPerMinute) }},
	{"requests_per_hour", "requests started in any hour (0 = no limit)", func(p *Policy) (string, string) {
		return "", checkWindow(p.RequestsPerHour, p.RequestsPerMinute, "requests_per_minute")
	}},
	{"requests_per_day", "requests started in any 24 hours (0 = no limit)", func(p *Policy) (string, string) {
		return "", checkWindow(p.RequestsPerDay, shorter(p.RequestsPerHour, p.RequestsPerMinute), shorterName(p.RequestsPerHour, "requests"))
	}},
	{"tokens_per_hour", "tokens in any hour, counted like tokens_per_minute (0 = no limit)", func(p *Policy) (string, string) {
		return "", checkWindow(p.TokensPerHour, p.TokensPerMinute, "tokens_per_minute")
	}},
	{"tokens_per_day", "tokens in any 24 hours, counted like tokens_per_minute (0 = no limit)", func(p *Policy) (string, string) {
		return "", checkWindow(p.TokensPerDay, shorter(p.TokensPerHour, p.TokensPerMinute), shorterName(p.TokensPerHour, "tokens"))
	}},
	{"max_concurrent", "requests in flight at once (0 = no limit)", func(p *Policy) (string, string) {
		if p.MaxConcurrent < 0 || p.MaxConcurrent > MaxConcurrent {
			return "", fmt.Sprintf("must be between 0 (no limit) and %d, got %d", MaxConcurrent, p.MaxConcurrent)
		}
		return "", ""
	}},
	{"daily_budget_usd", "spend per UTC day in US dollars (0 = no budget)", func(p *Policy) (string, string) { return "", checkBudget(p.DailyBudgetUSD) }},
	{"monthly_budget_usd", "spend per UTC calendar month in US dollars (0 = no budget)", func(p *Policy) (string, string) { return "", checkBudget(p.MonthlyBudgetUSD) }},
	{"allowed_models", "model names or glob patterns (* and ?) the tenant may use (empty = all)", checkModels},
	{"class", "priority class: interactive or batch (empty = OMNIROUTE_PRIORITY_DEFAULT_CLASS)", func(p *Policy) (string, string) {
		switch p.Class {
		case "", ClassInteractive, ClassBatch:
			return "", ""
		}
		return "", fmt.Sprintf("%q is not a priority class; want interactive or batch", p.Class)
	}},
	{"weight", "fair share in the ingest queue and admission lanes (0 = default 1)", func(p *Policy) (string, string) {
		if p.Weight < 0 || p.Weight > MaxWeight {
			return "", fmt.Sprintf("must be between 0 (default 1) and %d, got %d", MaxWeight, p.Weight)
		}
		return "", ""
	}},
}

func checkRate(v int64) string {
	if v < 0 || v > MaxRate {
		return fmt.Sprintf("must be between 0 (no limit) and %d, got %d", int64(MaxRate), v)
	}
	return ""
}

// checkWindow checks a longer window's limit v against the limit of the
// next shorter window that is set (name): below it, the shorter window
// could never be used up, which is never what was meant.
func checkWindow(v, shorter int64, name string) string {
	if msg := checkRate(v); msg != "" {
		return msg
	}
	if v > 0 && shorter > v {
		return fmt.Sprintf("%d is below %s (%d): that limit could never be reached; raise this one or lower %s", v, name, shorter, name)
	}
	return ""
}

// shorter is the hour's limit when set, else the minute's.
func shorter(hour, minute int64) int64 {
	if hour > 0 {
		return hour
	}
	return minute
}

func shorterName(hour int64, dim string) string {
	if hour > 0 {
		return dim + "_per_hour"
	}
	return dim + "_per_minute"
}

func checkBudget(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxBudgetUSD {
		return fmt.Sprintf("must be between 0 (no budget) and %g US dollars, got %g", MaxBudgetUSD, v)
	}
	return ""
}

func checkModels(p *Policy) (string, string) {
	if len(p.AllowedModels) > MaxModels {
		return "", fmt.Sprintf("lists %d models; at most %d", len(p.AllowedModels), MaxModels)
	}
	seen := make(map[string]bool, len(p.AllowedModels))
	for i, m := range p.AllowedModels {
		if err := ValidPattern(m); err != nil {
			return fmt.Sprintf("[%d]", i), err.Error()
		}
		if seen[m] {
			return fmt.Sprintf("[%d]", i), fmt.Sprintf("%q is listed twice", m)
		}
		seen[m] = true
	}
	return "", ""
}

// FieldError is one invalid field, named by its JSON path.
type FieldError struct {
	Path    string
	Message string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Message }

// Errors are every invalid field of a policy.
type Errors []FieldError

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// Validate checks every field; each error's path is prefix + "." + the
// field name (just the field name when prefix is empty). It returns nil or
// an Errors.
func (p *Policy) Validate(prefix string) error {
	var errs Errors
	for _, f := range Fields {
		if sub, msg := f.check(p); msg != "" {
			path := f.Name + sub
			if prefix != "" {
				path = prefix + "." + path
			}
			errs = append(errs, FieldError{Path: path, Message: msg})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// Limited reports whether the policy restricts anything the limiter checks
// (rates, concurrency, budgets or models).
func (p *Policy) Limited() bool {
	return p.RequestsPerMinute > 0 || p.TokensPerMinute > 0 || p.RequestsPerHour > 0 || p.RequestsPerDay > 0 ||
		p.TokensPerHour > 0 || p.TokensPerDay > 0 || p.MaxConcurrent > 0 ||
		p.DailyBudgetUSD > 0 || p.MonthlyBudgetUSD > 0 || len(p.AllowedModels) > 0
}

// Rates are the policy's rolling rate limits.
func (p *Policy) Rates() rolling.Limits {
	var l rolling.Limits
	l[rolling.Requests] = [rolling.NumPeriods]int64{p.RequestsPerMinute, p.RequestsPerHour, p.RequestsPerDay}
	l[rolling.Tokens] = [rolling.NumPeriods]int64{p.TokensPerMinute, p.TokensPerHour, p.TokensPerDay}
	return l
}

// EffectiveWeight is Weight after its default.
func (p *Policy) EffectiveWeight() int64 {
	if p.Weight <= 0 {
		return DefaultWeight
	}
	return p.Weight
}

// AllowsModel reports whether model may be asked for. It does not allocate.
func (p *Policy) AllowsModel(model []byte) bool {
	if len(p.AllowedModels) == 0 {
		return true
	}
	for _, pat := range p.AllowedModels {
		if Match(pat, model) {
			return true
		}
	}
	return false
}

// Decode reads a policy from JSON strictly: unknown fields, wrong types and
// trailing data are errors naming the field, then the fields are validated.
func Decode(data []byte) (Policy, error) {
	var p Policy
	if err := DecodeStrict(data, &p); err != nil {
		return Policy{}, err
	}
	if err := p.Validate(""); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// DecodeStrict decodes one JSON object into v (which may embed Policy)
// refusing unknown fields and trailing data; errors are FieldErrors when a
// field is to blame.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object; send exactly one object")
	}
	return nil
}

// JSONPath removes the name of the embedded Policy struct that
// encoding/json puts in a type error's field path ("Policy.weight"), so the
// path is the one the user wrote.
func JSONPath(field string) string {
	if field == "Policy" {
		return ""
	}
	field = strings.TrimPrefix(field, "Policy.")
	return strings.ReplaceAll(field, ".Policy.", ".")
}

func describe(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return FieldError{Path: JSONPath(te.Field), Message: fmt.Sprintf("wants %v, got JSON %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return FieldError{Path: name, Message: "unknown field; see docs/tenants.md for the policy fields"}
	case errors.Is(err, io.EOF):
		return errors.New("empty body; want a JSON object")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}
