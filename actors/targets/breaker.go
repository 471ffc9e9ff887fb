package targets

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/messages"
)

// Options tune breakers and cooldowns; zero values take the defaults.
type Options struct {
	// FailureThreshold is the number of consecutive stream cuts after the
	// first byte that count as an incident (default 5). A failure before
	// the first byte is an incident by itself.
	FailureThreshold int
	// BackoffBase and BackoffMax bound the cooldown after a transient
	// incident that carried no provider hint: base × 1.5^(n-1) for the n-th
	// consecutive incident, capped (1 s, 30 s).
	BackoffBase, BackoffMax time.Duration
	// HardCooldown is the cooldown after a quota, billing or credential
	// failure, doubled per consecutive one up to HardCooldownMax (5 min, 1 h).
	HardCooldown, HardCooldownMax time.Duration
	// Jitter spreads backoffs by ±Jitter (default 0.1) so targets cooled
	// together do not recover together; 10 % is enough for that and keeps
	// the first probe after a 10 s outage within 5 s of the recovery even
	// when every draw is the longest. Negative disables it.
	Jitter float64
	// Rand returns numbers in [0,1) for jitter (tests pin it).
	Rand func() float64
	// ProbeTimeout frees a half-open probe whose outcome never arrived
	// (default 15 min: longer than any upstream exchange).
	ProbeTimeout time.Duration
}

func (o *Options) defaults() {
	if o.FailureThreshold <= 0 {
		o.FailureThreshold = 5
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
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
		o.Jitter = 0.1
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
//
// Failures are counted by incident, not one by one: when a provider hangs
// or sheds, every request in flight to it fails at about the same moment,
// and nine timeouts of one hang are one piece of evidence, not nine. An
// incident opens with the first provider-side failure of an attempt that
// started after the last incident opened; failures of attempts that were
// already in flight then belong to it and may only lengthen its cooldown
// by a provider hint. Each incident opens the circuit: the target cools
// for what the provider asked (Retry-After, a reset header, a body hint),
// or without a hint for a short jittered backoff by the number of
// consecutive incidents; then it is half open and one probe goes through,
// whose success closes the circuit at once.
type breaker struct {
	open       bool
	coolUntil  time.Time
	coolReason string
	// incidentAt is when the current incident opened (zero: none since
	// the last success); incidents counts consecutive incidents.
	incidentAt time.Time
	incidents  int
	hardStreak int
	midStreak  int // consecutive stream cuts after the first byte
	errorRate  float64
	lastReason string
}

// BackoffFactor is how much longer each consecutive incident without a
// provider hint cools the target than the one before. 1.5 rather than
// TCP's 2 keeps the first probes after an outage close together: after a
// 10 s storm the next probe comes 1–4 s after the provider recovered.
const BackoffFactor = 1.5

// backoff is the cooldown schedule of incidents without a provider hint:
// BackoffBase × 1.5^(n-1) for the n-th, capped at BackoffMax, then ±Jitter.
func (o *Options) backoff() backoff.Policy {
	p := backoff.Policy{Base: o.BackoffBase, Max: o.BackoffMax, Factor: BackoffFactor}
	if o.Jitter > 0 {
		p.Jitter = backoff.Around(o.Jitter)
	}
	return p
}

// hardBackoff is the cooldown schedule of quota, billing and credential
// failures: HardCooldown doubled per consecutive one, up to
// HardCooldownMax, without jitter (a human acts on it, not a herd).
func (o *Options) hardBackoff() backoff.Policy {
	return backoff.Policy{Base: o.HardCooldown, Max: o.HardCooldownMax, Factor: 2}
}

// cooldown is the jittered backoff for the n-th consecutive incident.
func (o *Options) cooldown(n int) time.Duration { return o.backoff().Delay(n, o.Rand()) }

// hint is the latest recovery the provider announced for m at now: its
// Retry-After header, a body retry hint, or the reset of an exhausted
// rate-limit dimension; zero when it announced none.
func hint(m *messages.AttemptFinished, now time.Time) time.Time {
	var t time.Time
	if q := m.Quota; q != nil && q.HasRetryAfter {
		t = now.Add(q.RetryAfter)
	}
	if m.RetryAfter > 0 {
		t = later(t, now.Add(m.RetryAfter))
	}
	return later(t, m.Quota.ExhaustedUntil())
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// failed applies one provider-side failure at now.
func (b *breaker) failed(m *messages.AttemptFinished, o Options, now time.Time) {
	b.errorRate = 0.9*b.errorRate + 0.1
	b.lastReason = m.Reason
	if m.MidStream {
		// A stream cut after content says less than a failed start: only
		// a run of them is an incident.
		if b.midStreak++; b.midStreak < o.FailureThreshold || b.open {
			return
		}
		b.midStreak = 0
		b.incidents++
		b.incidentAt = now
		b.open = true
		b.extend(now.Add(o.cooldown(b.incidents)), "stream_cuts")
		return
	}
	reason := m.Reason
	if reason == "" {
		reason = m.Class.String()
	}
	// In flight when the incident opened: the same incident (a probe is
	// always sent after it, so its failure is a new one).
	same := !b.incidentAt.IsZero() && !m.Probe && !m.Started.IsZero() && m.Started.Before(b.incidentAt)
	if !same {
		b.incidents++
		b.incidentAt = now
	}
	b.open = true
	until := hint(m, now)
	if m.Class == messages.Quota || m.Class == messages.Auth {
		// Money or a human is needed: a long cooldown, doubled per
		// consecutive hard failure, whatever the provider hinted.
		if !same {
			b.hardStreak++
		}
		until = later(until, now.Add(o.hardBackoff().Capped(b.hardStreak)))
	} else if until.IsZero() && !same {
		until = now.Add(o.cooldown(b.incidents))
	}
	if !until.IsZero() {
		b.extend(until, reason)
	}
}

// peer applies a cooldown another node saw: the circuit opens and the
// target cools until until (never sooner than it already does), without
// counting an incident here; a probe of this node closes it afterwards as
// any open circuit.
func (b *breaker) peer(until time.Time, reason string) bool {
	before := b.coolUntil
	b.open = true
	b.extend(until, reason)
	return b.coolUntil != before
}

// extend moves the cooldown deadline later, never earlier: a later, shorter
// hint must not cut a longer cooldown short.
func (b *breaker) extend(until time.Time, reason string) {
	if until.After(b.coolUntil) {
		b.coolUntil, b.coolReason = until, reason
	}
}

// succeeded applies a success of an attempt that started at started and
// reports whether the circuit closed: a probe's success closes it, and so
// does that of any attempt sent after the incident opened (the provider
// answers again). A success of an attempt that was in flight before the
// incident says nothing about the provider now.
func (b *breaker) succeeded(probe bool, started time.Time) bool {
	b.errorRate *= 0.9
	b.hardStreak, b.midStreak = 0, 0
	if !b.open {
		b.incidents, b.incidentAt = 0, time.Time{}
		return false
	}
	if probe || (!started.IsZero() && !started.Before(b.incidentAt)) {
		b.open = false
		b.coolUntil, b.coolReason = time.Time{}, ""
		b.incidents, b.incidentAt = 0, time.Time{}
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
	out.Incidents = b.incidents
	if !b.incidentAt.IsZero() {
		t := b.incidentAt
		out.IncidentSince = &t
	}
	if b.coolUntil.After(now) {
		t := b.coolUntil
		out.CooldownUntil = &t
		out.CooldownReason = b.coolReason
	}
	out.RateLimited = failure.IsRateLimit(b.coolReason)
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
	sl, ok := h.slots.Get(target)
	if !ok {
		return false
	}
	p := &sl.probe
	cur := p.Load()
	if cur != 0 && now.UnixNano()-cur < int64(h.opts.ProbeTimeout) {
		return false
	}
	return p.CompareAndSwap(cur, now.UnixNano())
}

// ReleaseProbe frees a probe claimed but never attempted.
func (h *Handle) ReleaseProbe(target int) {
	if sl, ok := h.slots.Get(target); ok {
		sl.probe.Store(0)
	}
}
