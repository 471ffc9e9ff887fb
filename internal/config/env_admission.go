package config

import (
	"fmt"
)

// AdmissionEnv configures admission system 1: the process-wide ingest byte
// budget, its fair queue, and the structural stage. Names and defaults are
// OmniRoute's (see README); unlike OmniRoute, an invalid value stops
// start-up instead of silently meaning a default.
type AdmissionEnv struct {
	// LargeBodyBytes: bodies at least this large reserve budget before
	// they are read (smaller ones are admitted without an actor message).
	LargeBodyBytes Bytes `env:"OMNIROUTE_CHAT_LARGE_BODY_BYTES" envDefault:"262144"`
	// MaxInflightBytes overrides the derived budget (clamped to
	// [8 MiB, 2 GiB]); unset derives it from the memory limit.
	MaxInflightBytes OptionalBytes `env:"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES"`
	// MaxHeavyInFlight caps the number of heavy requests in flight; unset
	// means no count cap (the byte budget alone bounds them).
	MaxHeavyInFlight OptionalPositiveInt `env:"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT"`
	// HealthyHeadroom is the number of extra heavy requests admitted
	// beyond the count cap while the heap is healthy; unset = the count
	// cap; 0 disables.
	HealthyHeadroom OptionalCount `env:"OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM"`
	// QueueWait bounds the time a request waits for admission; 0 rejects
	// at once.
	QueueWait Millis `env:"OMNIROUTE_CHAT_ADMISSION_QUEUE_MS" envDefault:"2000"`
	// MaxQueuedBytes bounds the bytes of all waiting requests.
	MaxQueuedBytes Bytes `env:"OMNIROUTE_CHAT_ADMISSION_MAX_QUEUED_BYTES" envDefault:"4194304"`
	// Structural heaviness thresholds.
	HeavyMessages PositiveInt `env:"OMNIROUTE_CHAT_HEAVY_MESSAGE_COUNT" envDefault:"200"`
	HeavyTools    PositiveInt `env:"OMNIROUTE_CHAT_HEAVY_TOOL_COUNT" envDefault:"64"`
	HeavyTokens   PositiveInt `env:"OMNIROUTE_CHAT_HEAVY_ESTIMATED_TOKENS" envDefault:"32000"`
	// HardMaxMessages > 0 rejects longer conversations with 413.
	HardMaxMessages Count `env:"OMNIROUTE_CHAT_HARD_MAX_MESSAGES" envDefault:"0"`
	// HeapShedRatio: at or above this share of the Go memory limit the
	// healthy headroom is not used.
	HeapShedRatio Ratio `env:"OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO" envDefault:"0.75"`
	// The self-loop key: a request carrying it as Bearer token together
	// with x-omniroute-admission-bypass: internal skips the budget (never
	// the hard size cap). Unset disables the bypass.
	AdmissionSelfLoopKey   string `env:"OMNIROUTE_API_KEY" secret:"true"`
	AdmissionRouterLoopKey string `env:"ROUTER_API_KEY" secret:"true"`
}

// CountCap returns the heavy count cap and whether one is set.
func (a *AdmissionEnv) CountCap() (int, bool) { return a.MaxHeavyInFlight.Get() }

// Headroom returns the healthy headroom: the configured value, else the
// count cap (OmniRoute's default), else 0.
func (a *AdmissionEnv) Headroom() int {
	if n, ok := a.HealthyHeadroom.Get(); ok {
		return n
	}
	n, _ := a.MaxHeavyInFlight.Get()
	return n
}

// SelfLoopKey is OMNIROUTE_API_KEY, else ROUTER_API_KEY, else "" (no
// bypass: there is deliberately no built-in default key).
func (a *AdmissionEnv) SelfLoopKey() string {
	if a.AdmissionSelfLoopKey != "" {
		return a.AdmissionSelfLoopKey
	}
	return a.AdmissionRouterLoopKey
}

// PressureEnv configures the resource-pressure sampler.
type PressureEnv struct {
	PressureHighRatio     Ratio       `env:"OMNIROUTE_PRESSURE_HIGH_RATIO" envDefault:"0.85"`
	PressureCriticalRatio Ratio       `env:"OMNIROUTE_PRESSURE_CRITICAL_RATIO" envDefault:"0.92"`
	PressureRecoveryRatio Ratio       `env:"OMNIROUTE_PRESSURE_RECOVERY_RATIO" envDefault:"0.75"`
	PSIHigh               Percent     `env:"OMNIROUTE_PRESSURE_PSI_HIGH" envDefault:"30"`
	PSICritical           Percent     `env:"OMNIROUTE_PRESSURE_PSI_CRITICAL" envDefault:"60"`
	PSIRecovery           Percent     `env:"OMNIROUTE_PRESSURE_PSI_RECOVERY" envDefault:"15"`
	PSISource             PSISource   `env:"OMNIROUTE_PRESSURE_PSI_SOURCE" envDefault:"auto"`
	SustainHigh           PositiveInt `env:"OMNIROUTE_PRESSURE_SUSTAIN_HIGH" envDefault:"2"`
	SustainCritical       PositiveInt `env:"OMNIROUTE_PRESSURE_SUSTAIN_CRITICAL" envDefault:"2"`
	SustainRecovery       PositiveInt `env:"OMNIROUTE_PRESSURE_SUSTAIN_RECOVERY" envDefault:"1"`
}

func init() { subsystemValidators = append(subsystemValidators, validateAdmission) }

func validateAdmission(e *Env) []string {
	var errs []string
	a, p := &e.Admission, &e.Pressure
	if a.LargeBodyBytes < 1 {
		errs = append(errs, "OMNIROUTE_CHAT_LARGE_BODY_BYTES must be at least 1")
	}
	if n, ok := a.MaxInflightBytes.Get(); ok && n < 1 {
		errs = append(errs, "OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES=0 is not a budget: want a positive byte count such as 256MiB (it is clamped to [8MiB, 2GiB]), or unset it to derive the budget from the memory limit")
	}
	if a.MaxQueuedBytes < 1 {
		errs = append(errs, "OMNIROUTE_CHAT_ADMISSION_MAX_QUEUED_BYTES must be at least 1 (use OMNIROUTE_CHAT_ADMISSION_QUEUE_MS=0 to reject instead of queueing)")
	}
	if a.HeapShedRatio <= 0 {
		errs = append(errs, "OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO must be greater than 0 and at most 1")
	}
	if !(p.PressureRecoveryRatio < p.PressureHighRatio && p.PressureHighRatio < p.PressureCriticalRatio) {
		errs = append(errs, fmt.Sprintf("pressure ratios must satisfy OMNIROUTE_PRESSURE_RECOVERY_RATIO (%v) < OMNIROUTE_PRESSURE_HIGH_RATIO (%v) < OMNIROUTE_PRESSURE_CRITICAL_RATIO (%v)",
			float64(p.PressureRecoveryRatio), float64(p.PressureHighRatio), float64(p.PressureCriticalRatio)))
	}
	if !(p.PSIRecovery < p.PSIHigh && p.PSIHigh < p.PSICritical) {
		errs = append(errs, fmt.Sprintf("PSI thresholds must satisfy OMNIROUTE_PRESSURE_PSI_RECOVERY (%v) < OMNIROUTE_PRESSURE_PSI_HIGH (%v) < OMNIROUTE_PRESSURE_PSI_CRITICAL (%v)",
			float64(p.PSIRecovery), float64(p.PSIHigh), float64(p.PSICritical)))
	}
	for _, s := range []struct {
		name string
		v    PositiveInt
	}{{"OMNIROUTE_PRESSURE_SUSTAIN_HIGH", p.SustainHigh}, {"OMNIROUTE_PRESSURE_SUSTAIN_CRITICAL", p.SustainCritical}, {"OMNIROUTE_PRESSURE_SUSTAIN_RECOVERY", p.SustainRecovery}} {
		if s.v > 10000 {
			errs = append(errs, fmt.Sprintf("%s=%d is too large: want at most 10000 samples", s.name, s.v))
		}
	}
	return errs
}

// optional is the part the optional settings share: the value, and
// whether the variable was set at all (unset is not the same as 0).
type optional[T int | int64] struct {
	n   T
	set bool
}

// Get returns the value and whether it was set.
func (o optional[T]) Get() (T, bool) { return o.n, o.set }

// OptionalBytes is a byte size that may be unset.
type OptionalBytes struct{ optional[int64] }

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (o *OptionalBytes) UnmarshalText(t []byte) error {
	n, err := ParseBytes(string(t))
	if err != nil {
		return err
	}
	o.n, o.set = n, true
	return nil
}

// OptionalPositiveInt is a positive integer that may be unset. "0" is an
// error, not "unset": OmniRoute silently read it as 1.
type OptionalPositiveInt struct{ optional[int] }

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (o *OptionalPositiveInt) UnmarshalText(b []byte) error {
	var p PositiveInt
	if err := p.UnmarshalText(b); err != nil {
		return fmt.Errorf("want a positive integer (1 or more), or leave it unset for no count cap")
	}
	o.n, o.set = int(p), true
	return nil
}

// OptionalCount is a non-negative integer that may be unset.
type OptionalCount struct{ optional[int] }

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (o *OptionalCount) UnmarshalText(b []byte) error {
	var c Count
	if err := c.UnmarshalText(b); err != nil {
		return err
	}
	o.n, o.set = int(c), true
	return nil
}

// Count is a non-negative integer.
type Count int

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (c *Count) UnmarshalText(b []byte) error {
	return setWhole(c, b, 0, 1<<31-1, "want a non-negative integer (0 or more)")
}

// Ratio is a number in [0, 1].
type Ratio float64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (r *Ratio) UnmarshalText(b []byte) error {
	return setNumber(r, b, 0, 1, "want a number between 0 and 1 such as 0.85")
}

// Percent is a number in [0, 100].
type Percent float64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *Percent) UnmarshalText(b []byte) error {
	return setNumber(p, b, 0, 100, "want a percentage between 0 and 100 such as 30")
}

// PSISource selects the memory pressure stall source.
type PSISource string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *PSISource) UnmarshalText(b []byte) error {
	return setWord(p, b, "want auto (the cgroup's own memory.pressure, else the host's), cgroup, host or off", "auto", "cgroup", "host", "off")
}
