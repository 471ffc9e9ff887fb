package config

import (
	"fmt"
	"strings"

	"github.com/omniroute/gateway/internal/admission"
)

// LanesEnv configures the adaptive admission controller, the tenant
// lanes and the priority classes. The ADAPTIVE_ADMISSION_* names and
// defaults are OmniRoute's; unlike OmniRoute, an invalid value stops
// start-up instead of silently falling back to defaults.
type LanesEnv struct {
	AdmissionMode          AdmissionMode `env:"ADAPTIVE_ADMISSION_MODE" envDefault:"shadow"`
	AdmissionMinLimit      SafeInt       `env:"ADAPTIVE_ADMISSION_MIN_LIMIT" envDefault:"8"`
	AdmissionInitialLimit  SafeInt       `env:"ADAPTIVE_ADMISSION_INITIAL_LIMIT" envDefault:"64"`
	AdmissionMaxLimit      SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_LIMIT" envDefault:"1000"`
	AdmissionMaxQueueCount SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT" envDefault:"128"`
	AdmissionMaxQueueCost  SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_QUEUE_COST" envDefault:"2000"`
	AdmissionMaxWaitMs     SafeInt       `env:"ADAPTIVE_ADMISSION_MAX_WAIT_MS" envDefault:"5000"`
	AdmissionWindowMs      SafeInt       `env:"ADAPTIVE_ADMISSION_WINDOW_MS" envDefault:"1000"`
	// AdmissionDriftGuard is k: an increase never takes the limit above
	// max(initial limit, k × recent peak in-flight cost); 0 = off.
	AdmissionDriftGuard WholePercent `env:"ADAPTIVE_ADMISSION_DRIFT_GUARD_FACTOR" envDefault:"5"`
	VirtualLanes        Flag         `env:"OMNIROUTE_CHAT_VIRTUAL_LANES" envDefault:"false"`
	InteractiveShare    WholePercent `env:"OMNIROUTE_PRIORITY_INTERACTIVE_SHARE" envDefault:"75"`
	BatchShare          WholePercent `env:"OMNIROUTE_PRIORITY_BATCH_SHARE" envDefault:"25"`
	DefaultClass        Class        `env:"OMNIROUTE_PRIORITY_DEFAULT_CLASS" envDefault:"interactive"`
	ClassIdleMs         Millis       `env:"OMNIROUTE_PRIORITY_IDLE_MS" envDefault:"1000"`
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
	n, err := parseNonNegative(string(b))
	if err != nil || n < 1 || n > admission.MaxSafeInteger {
		return fmt.Errorf("must be a positive safe integer (digits only, 1 to %d)", int64(admission.MaxSafeInteger))
	}
	*s = SafeInt(n)
	return nil
}

// WholePercent is an integer from 0 to 100.
type WholePercent int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *WholePercent) UnmarshalText(b []byte) error {
	n, err := parseNonNegative(string(b))
	if err != nil || n > 100 {
		return fmt.Errorf("want a whole number from 0 to 100")
	}
	*p = WholePercent(n)
	return nil
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

// admissionVars maps admission.Config field names to the variables that
// set them, so cross-field errors name what the operator must change.
var admissionVars = map[string]string{
	"mode": "ADAPTIVE_ADMISSION_MODE", "minLimit": "ADAPTIVE_ADMISSION_MIN_LIMIT",
	"initialLimit": "ADAPTIVE_ADMISSION_INITIAL_LIMIT", "maxLimit": "ADAPTIVE_ADMISSION_MAX_LIMIT",
	"maxQueueCount": "ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT", "maxQueueCost": "ADAPTIVE_ADMISSION_MAX_QUEUE_COST",
	"defaultMaxWaitMs": "ADAPTIVE_ADMISSION_MAX_WAIT_MS", "windowMs": "ADAPTIVE_ADMISSION_WINDOW_MS",
	"driftGuardFactor": "ADAPTIVE_ADMISSION_DRIFT_GUARD_FACTOR", "interactiveShare": "OMNIROUTE_PRIORITY_INTERACTIVE_SHARE",
	"batchShare": "OMNIROUTE_PRIORITY_BATCH_SHARE", "classShares": "OMNIROUTE_PRIORITY_INTERACTIVE_SHARE + OMNIROUTE_PRIORITY_BATCH_SHARE",
	"classIdleMs": "OMNIROUTE_PRIORITY_IDLE_MS",
}

// Config returns the controller configuration these variables describe,
// with the non-configurable adaptation parameters at OmniRoute's defaults.
func (a LanesEnv) Config() admission.Config {
	c := admission.DefaultConfig()
	c.Mode = admission.Mode(a.AdmissionMode)
	c.MinLimit, c.InitialLimit, c.MaxLimit = int64(a.AdmissionMinLimit), int64(a.AdmissionInitialLimit), int64(a.AdmissionMaxLimit)
	c.MaxQueueCount, c.MaxQueueCost = int64(a.AdmissionMaxQueueCount), int64(a.AdmissionMaxQueueCost)
	c.DefaultMaxWaitMs, c.WindowMs = int64(a.AdmissionMaxWaitMs), int64(a.AdmissionWindowMs)
	c.DriftGuardFactor = float64(a.AdmissionDriftGuard)
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
			name := admissionVars[fe.Field]
			if name == "" {
				out = append(out, "adaptive admission: "+fe.Msg)
				continue
			}
			val := ""
			if !strings.Contains(name, "+") {
				val = "=" + admissionValue(e.Lanes, fe.Field)
			}
			out = append(out, fmt.Sprintf("%s%s: %s", name, val, fe.Msg))
		}
		return out
	})
}

func admissionValue(a LanesEnv, field string) string {
	c := a.Config()
	switch field {
	case "minLimit":
		return fmt.Sprint(c.MinLimit)
	case "initialLimit":
		return fmt.Sprint(c.InitialLimit)
	case "maxLimit":
		return fmt.Sprint(c.MaxLimit)
	case "maxQueueCount":
		return fmt.Sprint(c.MaxQueueCount)
	case "maxQueueCost":
		return fmt.Sprint(c.MaxQueueCost)
	case "defaultMaxWaitMs":
		return fmt.Sprint(c.DefaultMaxWaitMs)
	case "windowMs":
		return fmt.Sprint(c.WindowMs)
	case "driftGuardFactor":
		return fmt.Sprint(c.DriftGuardFactor)
	case "classIdleMs":
		return fmt.Sprint(c.ClassIdleMs)
	case "interactiveShare":
		return fmt.Sprint(c.ClassShares[0])
	case "batchShare":
		return fmt.Sprint(c.ClassShares[1])
	}
	return "?"
}
