package admission

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/enum"
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

// Modes. Enforce is the default; in shadow everything is admitted and the
// controller counts what it would have admitted, queued or rejected.
const (
	ModeOff Mode = iota
	ModeShadow
	ModeEnforce
)

var modeNames = [...]string{"off", "shadow", "enforce"}

func (m Mode) String() string { return enum.Name(modeNames[:], m, "unknown") }

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

func (c Class) String() string { return enum.Name(classNames[:], c, "unknown") }

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
		if ascii.EqualFold(b, name) {
			return Class(c), true
		}
	}
	return 0, false
}

// Config is the admission configuration. Field names follow OmniRoute's
// (minLimit, maxLimit, …) in the error messages.
type Config struct {
	Mode Mode
	// MinLimit, MaxLimit and InitialLimit bound each upstream's adaptive
	// limit, in cost units (one per small request); InitialLimit is where
	// a controller goes after measuring the provider's no-queue latency.
	MinLimit     int64
	MaxLimit     int64
	InitialLimit int64 // clamped into [MinLimit, MaxLimit]
	// GlobalLimit bounds in-flight cost across all upstreams: a safety
	// net for the gateway's own resources (0 = none).
	GlobalLimit   int64
	MaxQueueCount int64 // per queue (the shared queue, or each tenant lane)
	MaxQueueCost  int64
	// WindowMs is the longest controller phase and the reporting window.
	WindowMs int64
	// DefaultMaxWaitMs bounds how long a queued request waits.
	DefaultMaxWaitMs int64
	// QueueTargetMs is the queueing delay above which a new request is
	// refused at once instead of queued (0: half the upstream's no-queue
	// latency, at least 5 ms).
	QueueTargetMs int64
	Cost          CostConfig

	// VirtualLanes gives every tenant its own lane (queue) and shares freed
	// capacity among lanes by weighted fair queuing on cost.
	VirtualLanes bool

	// ClassShares are the protected floors of the limit, in percent, by class.
	// Their sum is at most 100.
	ClassShares [NumClasses]int64
	// ClassIdleMs is how long a class keeps its floor reserved after its last
	// request, queued work or in-flight lease: long enough to absorb the gap
	// between two requests of a steady client, short enough that batch gets
	// the whole capacity soon after interactive traffic stops.
	ClassIdleMs int64
	// MaxLanes caps tenant lanes per upstream; creating one more evicts the
	// least recently used (its queued work is rejected
	// admission_lane_evicted).
	MaxLanes int
	// LaneIdleMs evicts lanes unused for this long.
	LaneIdleMs int64
	// HistoryHalfLifeMs is the half-life of a lane's virtual-time lead: how
	// fast the scheduler forgets that a tenant was served more than others.
	HistoryHalfLifeMs int64
}

// DefaultConfig returns the gateway's runtime defaults: enforce, tenant
// lanes on, and a limit per upstream that starts at 16 and follows the
// provider (see Controller).
func DefaultConfig() Config {
	return Config{
		Mode: ModeEnforce, MinLimit: 1, InitialLimit: 16, MaxLimit: 4096, GlobalLimit: 65536,
		MaxQueueCount: 512, MaxQueueCost: 1024, WindowMs: 1000, DefaultMaxWaitMs: 5000, Cost: DefaultCost(),
		VirtualLanes: true, ClassShares: [NumClasses]int64{75, 25}, ClassIdleMs: 1000,
		MaxLanes: 1000, LaneIdleMs: 60_000, HistoryHalfLifeMs: 1000,
	}
}

// Window is the adaptation window as a duration.
func (c *Config) Window() time.Duration { return time.Duration(c.WindowMs) * time.Millisecond }

// MaxWait is the default queue wait as a duration.
func (c *Config) MaxWait() time.Duration { return time.Duration(c.DefaultMaxWaitMs) * time.Millisecond }

// ClampedInitial is the initial limit clamped into [MinLimit, MaxLimit].
func (c *Config) ClampedInitial() int64 { return clamp(c.InitialLimit, c.MinLimit, c.MaxLimit) }

// Control is the configuration of one upstream's Controller.
func (c *Config) Control() ControlConfig {
	cc := DefaultControlConfig()
	cc.MinLimit, cc.MaxLimit, cc.InitialLimit = c.MinLimit, c.MaxLimit, c.InitialLimit
	cc.Window = c.Window()
	cc.Shadow = c.Mode == ModeShadow
	return cc
}

// QueueTarget is the queueing delay for an upstream whose no-queue
// latency is baseline.
func (c *Config) QueueTarget(baseline time.Duration) time.Duration {
	if c.QueueTargetMs > 0 {
		return time.Duration(c.QueueTargetMs) * time.Millisecond
	}
	return min(max(baseline/2, minQueueTarget), c.MaxWait())
}

// minQueueTarget is the shortest automatic queueing target: below it a
// queue is scheduling noise, not a standing queue.
const minQueueTarget = 5 * time.Millisecond

// FieldError is one invalid setting. Field is the configuration name
// (minLimit, …) so callers can map it to their own spelling (an
// environment variable).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Msg }

// Errors is every problem Validate found.
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
	if c.GlobalLimit < 0 || c.GlobalLimit > MaxCostOrLimit {
		add("globalLimit", "globalLimit must be 0 (none) or a positive integer <= %d", MaxCostOrLimit)
	}
	bounded("maxQueueCount", c.MaxQueueCount, MaxSafeInteger)
	bounded("maxQueueCost", c.MaxQueueCost, MaxCostOrLimit)
	bounded("windowMs", c.WindowMs, MaxWindowMs)
	bounded("defaultMaxWaitMs", c.DefaultMaxWaitMs, MaxWindowMs)
	if c.QueueTargetMs < 0 || c.QueueTargetMs > MaxWindowMs {
		add("queueTargetMs", "queueTargetMs must be 0 (automatic) or a positive number of milliseconds <= %d", MaxWindowMs)
	}
	errs = append(errs, c.Cost.validate()...)
	if c.Mode > ModeEnforce {
		add("mode", "mode must be off|shadow|enforce")
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
