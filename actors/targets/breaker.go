package targets

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/omniroute/gateway/messages"
)

// Options tune breakers and cooldowns; zero values take the defaults.
type Options struct {
	// FailureThreshold is the number of consecutive provider-side failures
	// that opens the circuit (default 5).
	FailureThreshold int
	// BackoffBase and BackoffMax bound the cooldown after a transient
	// failure: base × 2^(n-1) for the n-th consecutive one (1 s, 5 min).
	BackoffBase, BackoffMax time.Duration
	// HardCooldown is the cooldown after a quota, billing or credential
	// failure, doubled per consecutive one up to HardCooldownMax (5 min, 1 h).
	HardCooldown, HardCooldownMax time.Duration
	// Jitter spreads backoffs by ±Jitter (default 0.2) so targets cooled
	// together do not recover together. Negative disables it.
	Jitter float64
	// Rand returns numbers in [0,1) for jitter (tests pin it).
	Rand func() float64
	// ProbeTimeout frees a half-open probe whose outcome never arrived
	// (default 15 min: longer than any upstream exchange).
	ProbeTimeout time.Duration
	// OnObservation receives each attempt's parsed rate-limit headers, on
	// the actor's goroutine; the composition root forwards them to the
	// quota and ledger actors.
	OnObservation func(target int, obs *messages.QuotaObservation)
}

func (o *Options) defaults() {
	if o.FailureThreshold <= 0 {
		o.FailureThreshold = 5
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = o.BackoffBase
	}
	if o.HardCooldown <= 0 {
		o.HardCooldown = 5 * time.Minute
	}
	if o.HardCooldownMax < o.HardCooldown {
		o.HardCooldownMax = max(o.HardCooldown, time.Hour)
	}
	if o.Jitter == 0 {
		o.Jitter = 0.2
	}
	if o.Jitter < 0 || o.Jitter >= 1 {
		o.Jitter = 0
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 15 * time.Minute
	}
}

// breaker is one target's circuit and cooldown.
type breaker struct {
	open       bool
	coolUntil  time.Time
	coolReason string
	hardStreak int
	errorRate  float64
	lastReason string
}

// Backoff returns the cooldown for the n-th consecutive transient failure
// before jitter: base × 2^(n-1), capped.
func Backoff(n int, base, maxD time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 40 {
		return maxD
	}
	d := time.Duration(float64(base) * math.Pow(2, float64(n-1)))
	if d > maxD || d <= 0 {
		return maxD
	}
	return d
}

func (o *Options) jittered(d time.Duration) time.Duration {
	if o.Jitter == 0 {
		return d
	}
	f := 1 + o.Jitter*(2*o.Rand()-1)
	return time.Duration(float64(d) * f)
}

// failed applies one provider-side failure (the n-th in a row) at now.
func (b *breaker) failed(m *messages.AttemptFinished, n int, o Options, now time.Time) {
	b.errorRate = 0.9*b.errorRate + 0.1
	b.lastReason = m.Reason
	if m.MidStream {
		// A stream cut after content says less than a failed start: it
		// counts toward opening the circuit but does not cool by itself.
		if n >= o.FailureThreshold && !b.open {
			b.open = true
			b.extend(now.Add(o.jittered(Backoff(n, o.BackoffBase, o.BackoffMax))), "circuit_open")
		}
		return
	}
	hard := m.Class == messages.Quota || m.Class == messages.Auth
	var until time.Time
	reason := m.Reason
	if reason == "" {
		reason = m.Class.String()
	}
	if hard {
		b.hardStreak++
		d := o.HardCooldown
		for i := 1; i < b.hardStreak && d < o.HardCooldownMax; i++ {
			d *= 2
		}
		until = now.Add(min(d, o.HardCooldownMax))
	} else {
		b.hardStreak = 0
		until = now.Add(o.jittered(Backoff(n, o.BackoffBase, o.BackoffMax)))
	}
	if q := m.Quota; q != nil && q.HasRetryAfter {
		if t := now.Add(q.RetryAfter); t.After(until) {
			until = t
		}
	}
	if m.RetryAfter > 0 {
		if t := now.Add(m.RetryAfter); t.After(until) {
			until = t
		}
	}
	if ex := m.Quota.ExhaustedUntil(); ex.After(until) {
		until = ex
	}
	b.extend(until, reason)
	if hard || m.Probe || n >= o.FailureThreshold {
		b.open = true
	}
}

// extend moves the cooldown deadline later, never earlier: a later, shorter
// hint must not cut a longer cooldown short.
func (b *breaker) extend(until time.Time, reason string) {
	if until.After(b.coolUntil) {
		b.coolUntil, b.coolReason = until, reason
	}
}

// succeeded applies a success and reports whether the circuit closed.
func (b *breaker) succeeded(probe bool) bool {
	b.errorRate *= 0.9
	b.hardStreak = 0
	if b.open && probe {
		b.open = false
		b.coolUntil, b.coolReason = time.Time{}, ""
		return true
	}
	return false
}

// view fills the breaker fields of a published Stats as of now.
func (b *breaker) view(out *Stats, now time.Time) {
	out.ErrorRate = math.Round(b.errorRate*1e4) / 1e4
	out.LastFailureReason = b.lastReason
	out.Open, out.CoolUntil = b.open, b.coolUntil
	out.Circuit = CircuitState(b.open, b.coolUntil, now)
	if b.coolUntil.After(now) {
		t := b.coolUntil
		out.CooldownUntil = &t
		out.CooldownReason = b.coolReason
	}
}

// CircuitState names the circuit as of now: an open circuit whose
// cooldown has passed is half open.
func CircuitState(open bool, until, now time.Time) string {
	switch {
	case !open:
		return "closed"
	case now.Before(until):
		return "open"
	}
	return "half_open"
}

// TryProbe claims the single probe of a half-open target; it reports false
// when another request holds it. A claim whose outcome never arrived is
// taken over after ProbeTimeout.
func (h *Handle) TryProbe(target int, now time.Time) bool {
	if target < 0 || target >= len(h.probes) {
		return false
	}
	p := &h.probes[target]
	cur := p.Load()
	if cur != 0 && now.UnixNano()-cur < int64(h.opts.ProbeTimeout) {
		return false
	}
	return p.CompareAndSwap(cur, now.UnixNano())
}

// ReleaseProbe frees a probe claimed but never attempted.
func (h *Handle) ReleaseProbe(target int) {
	if target >= 0 && target < len(h.probes) {
		h.probes[target].Store(0)
	}
}
