package config

import (
	"fmt"
	"strconv"
	"strings"
)

// QuotaEnv configures quota-aware routing, cooldowns, circuit breakers and
// the token ledger.
type QuotaEnv struct {
	// QuotaAwareRouting skips exhausted and unaffordable targets and demotes
	// those approaching their limit (cooldowns and breakers apply anyway).
	QuotaAwareRouting Flag `env:"OMNIROUTE_QUOTA_AWARE_ROUTING" envDefault:"true"`
	// ApproachingThreshold is the remaining share at or below which a
	// dimension is approaching its limit.
	ApproachingThreshold OpenRatio `env:"OMNIROUTE_QUOTA_APPROACHING_THRESHOLD" envDefault:"0.2"`
	// RoutingMaxWait is the longest a request waits for a cooling target
	// to recover when every candidate is out.
	RoutingMaxWait Millis `env:"OMNIROUTE_ROUTING_MAX_WAIT_MS" envDefault:"10000"`
	// CooldownBase and CooldownMax bound the backoff after a transient
	// incident without a provider hint (base × 1.5^(n-1) for the n-th
	// consecutive incident, with ±10 % jitter).
	CooldownBase Millis `env:"OMNIROUTE_COOLDOWN_BASE_MS" envDefault:"1000"`
	CooldownMax  Millis `env:"OMNIROUTE_COOLDOWN_MAX_MS" envDefault:"30000"`
	// QuotaCooldown is the cooldown after a quota, billing or credential
	// failure (doubled per consecutive one, up to an hour or this value).
	QuotaCooldown Millis `env:"OMNIROUTE_QUOTA_COOLDOWN_MS" envDefault:"300000"`
	// BreakerFailures consecutive stream cuts after the first byte make an
	// incident (a failure before the first byte is one by itself).
	BreakerFailures PositiveInt `env:"OMNIROUTE_BREAKER_FAILURE_THRESHOLD" envDefault:"5"`
	// DefaultOutputTokens is reserved for the answer when a request sets no
	// max_tokens.
	DefaultOutputTokens PositiveInt `env:"OMNIROUTE_LEDGER_DEFAULT_OUTPUT_TOKENS" envDefault:"1024"`
}

// OpenRatio is a decimal strictly between 0 and 1 (0 and 1 themselves make
// no sense as a threshold).
type OpenRatio float64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (r *OpenRatio) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' {
			return fmt.Errorf("want a decimal between 0 and 1, such as 0.2")
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f >= 1 {
		return fmt.Errorf("want a decimal between 0 and 1, such as 0.2")
	}
	*r = OpenRatio(f)
	return nil
}

func init() { subsystemValidators = append(subsystemValidators, validateQuotaEnv) }

func validateQuotaEnv(e *Env) []string {
	var errs []string
	q := e.Quota
	if q.CooldownBase == 0 {
		errs = append(errs, "OMNIROUTE_COOLDOWN_BASE_MS must be greater than 0")
	}
	if q.CooldownMax < q.CooldownBase {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_COOLDOWN_MAX_MS (%d) must not be below OMNIROUTE_COOLDOWN_BASE_MS (%d)", q.CooldownMax, q.CooldownBase))
	}
	if q.QuotaCooldown == 0 {
		errs = append(errs, "OMNIROUTE_QUOTA_COOLDOWN_MS must be greater than 0")
	}
	return errs
}
