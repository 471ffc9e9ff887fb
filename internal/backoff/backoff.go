// Package backoff is the one schedule of delays after consecutive
// failures: the target breaker's cooldowns, the quota poller's retries,
// the service supervisor's restarts, the request-log writer's pauses and
// the actor restarts after a burst of panics (actors/supervise) all come
// from a Policy, each with its own numbers.
//
// The n-th consecutive failure waits Base·Factor^(n-1), capped at Max,
// then scaled by a jitter factor drawn from the injected source, so that
// things that failed together do not retry together. Tests pin the source
// to get exact delays.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter is the range a delay is scaled by: the factor From + (To-From)·r
// for r drawn uniformly from [0,1), so From is what r = 0 gives. The zero
// value is no jitter.
type Jitter struct{ From, To float64 }

// Around spreads delays by ±f (f = 0.1: 90 % to 110 % of the delay; r = 0
// is the shortest).
func Around(f float64) Jitter { return Jitter{1 - f, 1 + f} }

// Below takes up to f off each delay (f = 0.25: 100 % down to 75 %; r = 0
// takes nothing off), so the cap is never exceeded.
func Below(f float64) Jitter { return Jitter{1, 1 - f} }

// Policy is a capped exponential schedule with jitter.
type Policy struct {
	// Base is the delay after the first failure; Max caps the delay before
	// jitter (a Max below Base is Base).
	Base, Max time.Duration
	// Factor is the growth per consecutive failure (values ≤ 1 mean 2).
	Factor float64
	Jitter Jitter
}

// Delay is the wait after the n-th consecutive failure (n < 1 counts as
// 1), with r in [0,1) choosing within the jitter.
func (p Policy) Delay(n int, r float64) time.Duration {
	d := p.Capped(n)
	if j := p.Jitter; j != (Jitter{}) {
		d = time.Duration(float64(d) * (j.From + (j.To-j.From)*r))
	}
	return d
}

// Capped is Delay before jitter: Base·Factor^(n-1), at most Max.
func (p Policy) Capped(n int) time.Duration {
	factor := p.Factor
	if factor <= 1 {
		factor = 2
	}
	limit := max(p.Max, p.Base)
	d := float64(p.Base)
	for i := 1; i < n && d < float64(limit); i++ {
		d *= factor
	}
	if d >= float64(limit) {
		return limit // also keeps an overflowing float out of the conversion
	}
	return time.Duration(d)
}

// Backoff counts consecutive failures against a Policy. It is not safe
// for concurrent use: it belongs to one actor.
type Backoff struct {
	Policy Policy
	// Rand returns numbers in [0,1) for the jitter (nil: math/rand/v2).
	Rand     func() float64
	failures int
	last     time.Duration
}

// Failed counts a failure and returns how long to wait before trying
// again.
func (b *Backoff) Failed() time.Duration {
	b.failures++
	r := 0.0
	if b.Policy.Jitter != (Jitter{}) {
		if b.Rand != nil {
			r = b.Rand()
		} else {
			r = rand.Float64()
		}
	}
	b.last = b.Policy.Delay(b.failures, r)
	return b.last
}

// Succeeded ends the run of failures: the next failure waits Base again.
func (b *Backoff) Succeeded() { b.failures, b.last = 0, 0 }

// Failures is the number of consecutive failures counted.
func (b *Backoff) Failures() int { return b.failures }

// Last is the delay the last failure returned (0 after a success).
func (b *Backoff) Last() time.Duration { return b.last }
