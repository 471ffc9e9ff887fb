package services

import "time"

// Timers schedules callbacks. The supervisor takes every delay (health
// interval, start deadline, backoff, stop grace) from it, so tests can
// drive them without sleeping.
type Timers interface {
	// AfterFunc runs f once after d; the returned func cancels it and
	// reports whether it was still pending.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealTimers uses the runtime's timers.
type RealTimers struct{}

// AfterFunc implements Timers with time.AfterFunc.
func (RealTimers) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
