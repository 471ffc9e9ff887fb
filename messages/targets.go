package messages

import "time"

// FailureClass says why an upstream attempt failed, in terms of what it
// means for the target: provider-side classes (RateLimit, Quota, Capacity,
// Timeout, Connect, Auth) say something about the target; request-caused
// classes (Request, Canceled) never count against it.
type FailureClass uint8

// Failure classes.
const (
	// OK: the attempt succeeded.
	OK FailureClass = iota
	// Connect: the connection could not be made or broke before a response.
	Connect
	// Timeout: no first byte, or no data event, within the deadline.
	Timeout
	// RateLimit: a transient rate limit (429 that clears by itself).
	RateLimit
	// Quota: quota or billing exhausted (needs money or a human).
	Quota
	// Capacity: provider overloaded or failing (5xx, 529).
	Capacity
	// Auth: the connection's credential was refused (401/403).
	Auth
	// Request: the request itself was rejected (400, 404 model, 413, 422).
	Request
	// Protocol: the provider answered with something unparseable.
	Protocol
	// Canceled: the caller went away; says nothing about the target.
	Canceled
	// NumFailureClasses is the number of classes.
	NumFailureClasses
)

var failureNames = [...]string{"ok", "connect", "timeout", "rate_limit", "quota", "capacity", "auth", "request", "protocol", "canceled"}

// String returns the metric label of the class.
func (c FailureClass) String() string {
	if int(c) < len(failureNames) {
		return failureNames[c]
	}
	return "unknown"
}

// ProviderSide reports whether the class says something about the target.
func (c FailureClass) ProviderSide() bool {
	switch c {
	case Connect, Timeout, RateLimit, Quota, Capacity, Auth, Protocol:
		return true
	}
	return false
}

// AttemptFinished tells the targets actor how one upstream attempt ended.
// The transport sends it fire-and-forget, once per attempt.
type AttemptFinished struct {
	Target int
	Class  FailureClass
	Status int
	// TTFB is time to response headers (non-streaming: the whole answer).
	TTFB time.Duration
	// MidStream marks a failure after a stream was committed; the attempt
	// itself was already reported as a success.
	MidStream bool
	// Started is when the attempt was sent; At when it ended. The breaker
	// groups failures of attempts that were in flight together into one
	// incident.
	Started time.Time
	At      time.Time
	// Quota carries the rate-limit headers and retry hint of the response,
	// parsed through the connection's header mapping; nil when the response
	// had none. The targets actor uses it for the cooldown and forwards it
	// to the quota and ledger actors, so one message per attempt suffices.
	Quota *QuotaObservation
	// Reason is the failure's machine-readable cause (for example
	// "insufficient_quota" or "anthropic_overloaded"); empty on success.
	Reason string
	// RetryAfter is a retry hint found in the error body (Gemini's
	// RetryInfo.retryDelay); header hints travel in Quota.
	RetryAfter time.Duration
	// Probe marks the single attempt a half-open circuit let through.
	Probe bool
	// NoLatency marks an attempt whose TTFB is no sample of how fast the
	// target answers a prompt (a count_tokens call answers in a fraction
	// of a model call's time): it counts as an attempt and, on success,
	// as a success for the circuit and cooldowns, but leaves the target's
	// TTFB average alone, so counts cannot make a slow target look fast.
	NoLatency bool
}

// SharedCooldown tells every other member that a failure on the sender
// opened a target's circuit or pushed its cooldown later (the sender's
// cooldowns actor, actors/targets' cluster.go, sends it when its targets
// actor reports one; each member's cooldowns actor receives it and cools
// the target of that name until Until, capped by its own clock).
type SharedCooldown struct {
	Target string // the target's name: ids are a member's own
	Until  int64  // Unix ms
	Reason string
	From   string // the sending member's id
}

// ClusterKind implements ClusterMessage.
func (*SharedCooldown) ClusterKind() ClusterKind { return KindSharedCooldown }

// Validate implements ClusterMessage: a target and a sender.
func (m *SharedCooldown) Validate() error {
	if m.Target == "" || m.From == "" {
		return invalid(KindSharedCooldown, "no target or no sender")
	}
	return nil
}

func (m *SharedCooldown) wire(c *wireCodec) {
	c.str(&m.Target)
	c.varint(&m.Until)
	c.str(&m.Reason)
	c.str(&m.From)
}
