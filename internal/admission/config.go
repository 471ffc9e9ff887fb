package admission

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bounds inherited from OmniRoute so that configurations valid there are
// valid here and vice versa.
const (
	// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER.
	MaxSafeInteger = 1<<53 - 1
	// MaxWindowMs bounds windows and waits (one day).
	MaxWindowMs = 86_400_000
	// MaxCostOrLimit bounds costs and limits: floor(MaxSafeInteger / MaxWindowMs),
	// so cost × milliseconds never overflows.
	MaxCostOrLimit = 104_249_991
)

// Mode selects what the controller does with its decisions.
type Mode uint8

// Modes. Shadow is the default: everything is admitted and the controller
// counts what it would have admitted, queued or rejected.
const (
	ModeOff Mode = iota
	ModeShadow
	ModeEnforce
)

var modeNames = [...]string{"off", "shadow", "enforce"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// ParseMode parses off, shadow or enforce (case-insensitive, trimmed).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off":
		return ModeOff, nil
	case "shadow":
		return ModeShadow, nil
	case "enforce":
		return ModeEnforce, nil
	}
	return 0, errors.New("mode must be off|shadow|enforce")
}

// Class is a priority class. Each has a protected floor of the limit.
type Class uint8

// Classes.
const (
	Interactive Class = iota
	Batch
	NumClasses
)

var classNames = [...]string{"interactive", "batch"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// ParseClass parses interactive or batch (case-insensitive, surrounding
// spaces ignored).
func ParseClass(s string) (Class, bool) {
	return ParseClassBytes([]byte(s))
}

// ParseClassBytes is ParseClass for a header value; it does not allocate.
func ParseClassBytes(b []byte) (Class, bool) {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for c, name := range classNames {
		if equalFold(b, name) {
			return Class(c), true
		}
	}
	return 0, false
}

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// Config is the controller configuration. Field names follow OmniRoute's
// (minLimit, maxLimit, …) in the error messages.
type Config struct {
	Mode          Mode
	MinLimit      int64
	MaxLimit      int64
	InitialLimit  int64 // clamped into [MinLimit, MaxLimit]
	MaxQueueCount int64 // per queue (the shared queue, or each tenant lane)
	MaxQueueCost  int64
	WindowMs      int64
	// DefaultMaxWaitMs bounds how long a queued request waits.
	DefaultMaxWaitMs int64
	Cost             CostConfig

	DecreaseFactor           float64
	CriticalDecreaseFactor   float64
	IncreaseStep             int64
	MaxIncreasePerWindow     int64
	ShortLatencyAlpha        float64
	LongLatencyAlpha         float64
	HighUtilizationThreshold float64
	LowUtilizationThreshold  float64
	LatencyGradientThreshold float64

	// VirtualLanes gives every tenant its own lane (queue) and shares freed
	// capacity among lanes by weighted fair queuing on cost.
	VirtualLanes bool

	// Beyond OmniRoute:

	// DriftGuardFactor k: an additive increase never takes the limit above
	// max(initial limit, k × the peak in-flight cost of the last
	// DriftGuardWindows windows). 0 turns the guard off.
	DriftGuardFactor  float64
	DriftGuardWindows int
	// ClassShares are the protected floors of the limit, in percent, by class.
	// Their sum is at most 100.
	ClassShares [NumClasses]int64
	// ClassIdleMs is how long a class keeps its floor reserved after its last
	// request, queued work or in-flight lease: long enough to absorb the gap
	// between two requests of a steady client, short enough that batch gets
	// the whole capacity soon after interactive traffic stops.
	ClassIdleMs int64
	// MaxLanes caps tenant lanes; creating one more evicts the least recently
	// used (its queued work is rejected admission_lane_evicted).
	MaxLanes int
	// LaneIdleMs evicts lanes unused for this long.
	LaneIdleMs int64
	// HistoryHalfLifeMs is the half-life of a lane's virtual-time lead: how
	// fast the scheduler forgets that a tenant was served more than others.
	HistoryHalfLifeMs int64
}

// DefaultCost returns OmniRoute's cost quanta.
func DefaultCost() CostConfig {
	return CostConfig{Base: 1, BodyBytesPerUnit: 16384, TokensPerUnit: 1024, MessagesPerUnit: 32, ToolsPerUnit: 8,
		FanoutPerUnit: 1, StreamingClassCost: 1, NonStreamingClassCost: 2, MaxRequestCost: 1000}
}

// DefaultConfig returns the gateway's runtime defaults (OmniRoute's runtime
// defaults, plus ours for the additions).
func DefaultConfig() Config {
	return Config{
		Mode: ModeShadow, MinLimit: 8, InitialLimit: 64, MaxLimit: 1000, MaxQueueCount: 128, MaxQueueCost: 2000,
		WindowMs: 1000, DefaultMaxWaitMs: 5000, Cost: DefaultCost(),
		DecreaseFactor: 0.8, CriticalDecreaseFactor: 0.5, IncreaseStep: 1, MaxIncreasePerWindow: 1,
		ShortLatencyAlpha: 0.5, LongLatencyAlpha: 0.1,
		HighUtilizationThreshold: 0.7, LowUtilizationThreshold: 0.3, LatencyGradientThreshold: 0.25,
		DriftGuardFactor: 5, DriftGuardWindows: 10,
		ClassShares: [NumClasses]int64{75, 25}, ClassIdleMs: 1000,
		MaxLanes: 1000, LaneIdleMs: 60_000, HistoryHalfLifeMs: 1000,
	}
}

// Window is the adaptation window as a duration.
func (c *Config) Window() time.Duration { return time.Duration(c.WindowMs) * time.Millisecond }

// MaxWait is the default queue wait as a duration.
func (c *Config) MaxWait() time.Duration { return time.Duration(c.DefaultMaxWaitMs) * time.Millisecond }

// ClampedInitial is the initial limit clamped into [MinLimit, MaxLimit].
func (c *Config) ClampedInitial() int64 { return clamp(c.InitialLimit, c.MinLimit, c.MaxLimit) }

// FieldError is one invalid setting. Field is the configuration name
// (minLimit, …) so callers can map it to their own spelling (an
// environment variable).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Msg }

// Errors is every problem Validate found, in OmniRoute's validation order.
type Errors []*FieldError

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, f := range e {
		msgs[i] = f.Msg
	}
	return strings.Join(msgs, "; ")
}

// Validate checks every field and reports all problems (OmniRoute stops at
// the first; the messages are the same).
func (c *Config) Validate() error {
	var errs Errors
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	bounded := func(field string, v, max int64) {
		switch {
		case v <= 0 || v > MaxSafeInteger:
			add(field, "%s must be a positive safe integer", field)
		case v > max:
			add(field, "%s must be <= %d", field, max)
		}
	}
	bounded("minLimit", c.MinLimit, MaxCostOrLimit)
	bounded("maxLimit", c.MaxLimit, MaxCostOrLimit)
	if c.MinLimit > 0 && c.MaxLimit > 0 && c.MinLimit > c.MaxLimit {
		add("minLimit", "minLimit must be <= maxLimit")
	}
	bounded("initialLimit", c.InitialLimit, MaxCostOrLimit)
	bounded("maxQueueCount", c.MaxQueueCount, MaxSafeInteger)
	bounded("maxQueueCost", c.MaxQueueCost, MaxCostOrLimit)
	bounded("windowMs", c.WindowMs, MaxWindowMs)
	bounded("defaultMaxWaitMs", c.DefaultMaxWaitMs, MaxWindowMs)
	errs = append(errs, c.Cost.validate()...)
	if c.Mode > ModeEnforce {
		add("mode", "mode must be off|shadow|enforce")
	}
	open01 := func(field string, v float64) {
		if !(v > 0 && v < 1) {
			add(field, "%s must be in (0, 1)", field)
		}
	}
	half01 := func(field string, v float64) {
		if !(v > 0 && v <= 1) {
			add(field, "%s must be in (0, 1]", field)
		}
	}
	open01("decreaseFactor", c.DecreaseFactor)
	open01("criticalDecreaseFactor", c.CriticalDecreaseFactor)
	bounded("increaseStep", c.IncreaseStep, MaxCostOrLimit)
	bounded("maxIncreasePerWindow", c.MaxIncreasePerWindow, MaxCostOrLimit)
	half01("shortLatencyAlpha", c.ShortLatencyAlpha)
	half01("longLatencyAlpha", c.LongLatencyAlpha)
	half01("highUtilizationThreshold", c.HighUtilizationThreshold)
	half01("lowUtilizationThreshold", c.LowUtilizationThreshold)
	if c.CriticalDecreaseFactor > c.DecreaseFactor {
		add("criticalDecreaseFactor", "criticalDecreaseFactor must be <= decreaseFactor")
	}
	if c.LowUtilizationThreshold >= c.HighUtilizationThreshold {
		add("lowUtilizationThreshold", "lowUtilizationThreshold must be < highUtilizationThreshold")
	}
	if c.ShortLatencyAlpha <= c.LongLatencyAlpha {
		add("shortLatencyAlpha", "shortLatencyAlpha must be > longLatencyAlpha")
	}
	half01("latencyGradientThreshold", c.LatencyGradientThreshold)

	if c.DriftGuardFactor != 0 && !(c.DriftGuardFactor >= 1 && c.DriftGuardFactor <= 1000) {
		add("driftGuardFactor", "driftGuardFactor must be 0 (off) or between 1 and 1000")
	}
	if c.DriftGuardWindows < 1 || c.DriftGuardWindows > 1000 {
		add("driftGuardWindows", "driftGuardWindows must be between 1 and 1000")
	}
	sum := int64(0)
	for cl, s := range c.ClassShares {
		if s < 0 || s > 100 {
			add(Class(cl).String()+"Share", "%sShare must be between 0 and 100 (percent of the limit)", Class(cl))
		}
		sum += s
	}
	if sum > 100 {
		add("classShares", "interactiveShare + batchShare must be <= 100 (percent of the limit); they are %d", sum)
	}
	if c.ClassIdleMs < 0 || c.ClassIdleMs > MaxWindowMs {
		add("classIdleMs", "classIdleMs must be between 0 and %d", MaxWindowMs)
	}
	if c.MaxLanes < 1 || c.MaxLanes > 1_000_000 {
		add("maxLanes", "maxLanes must be between 1 and 1000000")
	}
	bounded("laneIdleMs", c.LaneIdleMs, MaxWindowMs)
	bounded("historyHalfLifeMs", c.HistoryHalfLifeMs, MaxWindowMs)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func clamp(v, lo, hi int64) int64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
