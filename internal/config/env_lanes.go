package config

import (
	"fmt"

	"github.com/omniroute/gateway/internal/admission"
)

// LanesEnv configures adaptive admission (one controller per upstream),
// the tenant lanes and the priority classes. The ADAPTIVE_ADMISSION_*
// names are OmniRoute's; the defaults are ours (enforce, lanes on, limits
// per upstream in units of one small request); an invalid value stops
// start-up instead of silently falling back to a default.
type LanesEnv struct {
	AdmissionMode          AdmissionMode `env:"ADAPTIVE_ADMISSION_MODE" envDefault:"enforce"`
	AdmissionMinLimit      SafeInt       `env:"ADAPTIVE_ADMISSION_MIN_LIMIT" envDefault:"1"`
	AdmissionInitialLimit  SafeInt       `env:"ADAPTIVE_ADMISSION_INITIAL_LIMIT" envDefault:"16"`
	AdmissionMaxLimit      SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_LIMIT" envDefault:"4096"`
	AdmissionGlobalLimit   Count         `env:"ADAPTIVE_ADMISSION_GLOBAL_LIMIT" envDefault:"65536"`
	AdmissionMaxQueueCount SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT" envDefault:"512"`
	AdmissionMaxQueueCost  SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_QUEUE_COST" envDefault:"1024"`
	AdmissionMaxWaitMs     SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_WAIT_MS" envDefault:"5000"`
	AdmissionWindowMs      SafeInt       `env:"ADAPTIVE_ADMISSION_WINDOW_MS" envDefault:"1000"`
	// AdmissionQueueTargetMs: a request whose expected queueing exceeds it
	// is refused at once; 0 = half the upstream's no-queue latency.
	AdmissionQueueTargetMs Millis       `env:"ADAPTIVE_ADMISSION_QUEUE_TARGET_MS" envDefault:"0"`
	VirtualLanes           Flag         `env:"OMNIROUTE_CHAT_VIRTUAL_LANES" envDefault:"true"`
	InteractiveShare       WholePercent `env:"OMNIROUTE_PRIORITY_INTERACTIVE_SHARE" envDefault:"75"`
	BatchShare             WholePercent `env:"OMNIROUTE_PRIORITY_BATCH_SHARE" envDefault:"25"`
	DefaultClass           Class        `env:"OMNIROUTE_PRIORITY_DEFAULT_CLASS" envDefault:"interactive"`
	ClassIdleMs            Millis       `env:"OMNIROUTE_PRIORITY_IDLE_MS" envDefault:"1000"`
}

// AdmissionMode is off, shadow or enforce.
type AdmissionMode admission.Mode

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (m *AdmissionMode) UnmarshalText(b []byte) error {
	v, err := admission.ParseMode(string(b))
	if err != nil {
		return fmt.Errorf("want off, shadow or enforce (%v)", err)
	}
	*m = AdmissionMode(v)
	return nil
}

// SafeInt is a positive integer no larger than JavaScript's
// MAX_SAFE_INTEGER, as OmniRoute's ADAPTIVE_ADMISSION_* integers are.
type SafeInt int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (s *SafeInt) UnmarshalText(b []byte) error {
	return setWhole(s, b, 1, admission.MaxSafeInteger, fmt.Sprintf("must be a positive safe integer (digits only, 1 to %d)", int64(admission.MaxSafeInteger)))
}

// WholePercent is an integer from 0 to 100.
type WholePercent int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *WholePercent) UnmarshalText(b []byte) error {
	return setWhole(p, b, 0, 100, "want a whole number from 0 to 100")
}

// Class is a priority class name: interactive or batch.
type Class admission.Class

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (c *Class) UnmarshalText(b []byte) error {
	v, ok := admission.ParseClassBytes(b)
	if !ok {
		return fmt.Errorf("want interactive or batch")
	}
	*c = Class(v)
	return nil
}

// admissionVars names, for each admission.Config field a validation error
// may name, the variable that sets it and how to print its value, so
// cross-field errors say what the operator must change. It is the one
// list of them: a test checks every field Validate can name is here.
var admissionVars = map[string]struct {
	env   string
	value func(c *admission.Config) any
}{
	"mode":             {"ADAPTIVE_ADMISSION_MODE", func(c *admission.Config) any { return c.Mode }},
	"minLimit":         {"ADAPTIVE_ADMISSION_MIN_LIMIT", func(c *admission.Config) any { return c.MinLimit }},
	"initialLimit":     {"ADAPTIVE_ADMISSION_INITIAL_LIMIT", func(c *admission.Config) any { return c.InitialLimit }},
	"maxLimit":         {"ADAPTIVE_ADMISSION_MAX_LIMIT", func(c *admission.Config) any { return c.MaxLimit }},
	"globalLimit":      {"ADAPTIVE_ADMISSION_GLOBAL_LIMIT", func(c *admission.Config) any { return c.GlobalLimit }},
	"maxQueueCount":    {"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT", func(c *admission.Config) any { return c.MaxQueueCount }},
	"maxQueueCost":     {"ADAPTIVE_ADMISSION_MAX_QUEUE_COST", func(c *admission.Config) any { return c.MaxQueueCost }},
	"defaultMaxWaitMs": {"ADAPTIVE_ADMISSION_MAX_WAIT_MS", func(c *admission.Config) any { return c.DefaultMaxWaitMs }},
	"windowMs":         {"ADAPTIVE_ADMISSION_WINDOW_MS", func(c *admission.Config) any { return c.WindowMs }},
	"queueTargetMs":    {"ADAPTIVE_ADMISSION_QUEUE_TARGET_MS", func(c *admission.Config) any { return c.QueueTargetMs }},
	"interactiveShare": {"OMNIROUTE_PRIORITY_INTERACTIVE_SHARE", func(c *admission.Config) any { return c.ClassShares[admission.Interactive] }},
	"batchShare":       {"OMNIROUTE_PRIORITY_BATCH_SHARE", func(c *admission.Config) any { return c.ClassShares[admission.Batch] }},
	"classShares":      {"OMNIROUTE_PRIORITY_INTERACTIVE_SHARE + OMNIROUTE_PRIORITY_BATCH_SHARE", nil},
	"classIdleMs":      {"OMNIROUTE_PRIORITY_IDLE_MS", func(c *admission.Config) any { return c.ClassIdleMs }},
}

// Config returns the admission configuration these variables describe.
func (a LanesEnv) Config() admission.Config {
	c := admission.DefaultConfig()
	c.Mode = admission.Mode(a.AdmissionMode)
	c.MinLimit, c.InitialLimit, c.MaxLimit = int64(a.AdmissionMinLimit), int64(a.AdmissionInitialLimit), int64(a.AdmissionMaxLimit)
	c.GlobalLimit = int64(a.AdmissionGlobalLimit)
	c.MaxQueueCount, c.MaxQueueCost = int64(a.AdmissionMaxQueueCount), int64(a.AdmissionMaxQueueCost)
	c.DefaultMaxWaitMs, c.WindowMs = int64(a.AdmissionMaxWaitMs), int64(a.AdmissionWindowMs)
	c.QueueTargetMs = int64(a.AdmissionQueueTargetMs)
	c.VirtualLanes = bool(a.VirtualLanes)
	c.ClassShares = [admission.NumClasses]int64{int64(a.InteractiveShare), int64(a.BatchShare)}
	c.ClassIdleMs = int64(a.ClassIdleMs)
	return c
}

func init() {
	subsystemValidators = append(subsystemValidators, func(e *Env) []string {
		cfg := e.Lanes.Config()
		err := cfg.Validate()
		if err == nil {
			return nil
		}
		var out []string
		for _, fe := range err.(admission.Errors) {
			v, ok := admissionVars[fe.Field]
			switch {
			case !ok:
				out = append(out, "adaptive admission: "+fe.Msg)
			case v.value == nil:
				out = append(out, fmt.Sprintf("%s: %s", v.env, fe.Msg))
			default:
				out = append(out, fmt.Sprintf("%s=%v: %s", v.env, v.value(&cfg), fe.Msg))
			}
		}
		return out
	})
}
