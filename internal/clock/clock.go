// Package clock is the one source of time for actors and policies: it
// tells the time and runs timers, behind an interface, so tests drive
// windows, deadlines, ticks and backoff with a Fake instead of sleeping.
//
// An actor that needs a timer asks its injected Clock for one
// (AfterFunc) and, in the callback, only sends itself a message: the
// callback runs on a goroutine of the clock's choosing (the runtime's
// timer goroutine for Real, the goroutine calling Advance for Fake),
// never on the actor's, so it must not touch the actor's state.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Clock tells the time and schedules callbacks on that time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once, on a goroutine of its own choosing, when d
	// has passed on this clock. f must not block for long and must not
	// call back into a Fake's Advance or Set.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a call scheduled by AfterFunc. Its methods have the meaning of
// time.Timer's for a timer made by time.AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still
	// pending (false: it already ran, or is running, or was stopped).
	Stop() bool
	// Reset schedules the call again, d from now, whether or not it
	// already ran; it reports whether it was still pending.
	Reset(d time.Duration) bool
}

// Real is the wall clock and the runtime's timers.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or is c, or the real clock when c is nil: the default of every
// component's optional Clock option.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Fake is a clock that moves only when a test moves it. It is safe for
// concurrent use.
//
// Advance and Set jump: the clock is set to the new time first, then the
// timers that were due by it when the jump began fire, each once, on the
// goroutine that called Advance or Set, one at a time, earliest first
// (timers due at the same instant in the order they were scheduled or last
// reset), as a process frozen for that long would see them on waking. A
// timer stopped or reset by an earlier callback of the same jump does not
// fire in it. Now reads the new time in every callback, so a timer a
// callback schedules (a repeating tick) is due relative to it and fires at
// the earliest on the next Advance: one Advance sends a periodic actor at
// most one tick, however far it jumps, and never floods its mailbox. A
// timer scheduled with d <= 0 is due at once and fires on the next
// Advance, Advance(0) included: time never moves by itself. Advance and
// Set calls are serialised, so callbacks of two of them never interleave;
// a callback must not call Advance or Set itself (it would wait for
// itself).
type Fake struct {
	advancing sync.Mutex // held by Advance and Set for their whole run
	mu        sync.Mutex // guards the fields below and every timer's
	now       time.Time
	seq       uint64
	pending   []*fakeTimer
}

// NewFake returns a fake clock set to t, with no timers.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d, then fires the timers due by the
// new time (see Fake), and returns the new time. A negative d moves the
// clock back without firing anything.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	return f.moveTo(target)
}

// Set sets the fake time. A later t fires the timers due by it, as
// Advance does; an earlier one fires nothing.
func (f *Fake) Set(t time.Time) { f.moveTo(t) }

func (f *Fake) moveTo(target time.Time) time.Time {
	f.advancing.Lock()
	defer f.advancing.Unlock()
	f.mu.Lock()
	forward := !target.Before(f.now)
	f.now = target
	// Timers scheduled or reset from here on (by the callbacks) have a
	// later seq: they wait for the next jump.
	last := f.seq
	for forward {
		t := f.earliest(last)
		if t == nil || t.at.After(target) {
			break
		}
		f.remove(t)
		f.mu.Unlock()
		t.fn()
		f.mu.Lock()
	}
	f.mu.Unlock()
	return target
}

// AfterFunc schedules f at Now()+d; see Fake for when it runs.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	f.mu.Lock()
	f.schedule(t, d)
	f.mu.Unlock()
	return t
}

// Pending is how many timers are scheduled and have neither fired nor
// been stopped. Tests wait on it (an actor arms its timer on its own
// goroutine) before advancing past the timer's instant.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// Next returns how long from now the earliest pending timer is due
// (zero or negative: due already); ok is false when none is pending.
func (f *Fake) Next() (in time.Duration, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.earliest(f.seq)
	if t == nil {
		return 0, false
	}
	return t.at.Sub(f.now), true
}

// schedule and the helpers below run under f.mu.
func (f *Fake) schedule(t *fakeTimer, d time.Duration) {
	f.seq++
	t.at, t.seq = f.now.Add(max(d, 0)), f.seq // as time.AfterFunc: a negative d is 0
	f.pending = append(f.pending, t)
}

// earliest is the pending timer due first among those scheduled or last
// reset at or before seq.
func (f *Fake) earliest(seq uint64) *fakeTimer {
	var first *fakeTimer
	for _, t := range f.pending {
		if t.seq > seq {
			continue
		}
		if first == nil || t.at.Before(first.at) || (t.at.Equal(first.at) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

// remove takes t off the pending list and reports whether it was on it.
func (f *Fake) remove(t *fakeTimer) bool {
	i := slices.Index(f.pending, t)
	if i < 0 {
		return false
	}
	f.pending = slices.Delete(f.pending, i, i+1)
	return true
}

type fakeTimer struct {
	f   *Fake
	fn  func()
	at  time.Time // guarded by f.mu
	seq uint64    // guarded by f.mu
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.remove(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.remove(t)
	t.f.schedule(t, d)
	return was
}
