package planner

import "time"

// Canceller is the caller's going-away signal: upstream.Cancel.
type Canceller interface {
	// Notify registers f to run once when the caller goes (nil clears
	// it); false when it went already.
	Notify(f func()) bool
	Cancelled() bool
}

// WaitEnd is why a Waiter's wait ended.
type WaitEnd uint8

// Ways a wait ends.
const (
	// WaitElapsed: the recovery is due.
	WaitElapsed WaitEnd = iota
	// WaitChanged: some target's state changed (a probe closed a
	// circuit): re-rank early.
	WaitChanged
	// WaitCancelled: the caller went away.
	WaitCancelled
)

// Waiter sleeps a request until a cooling target recovers: on a timer,
// woken early by a change of the targets' state or by the caller leaving.
// It never polls. Its timer and wake channel are made on first use and
// kept, so a pooled caller waits without allocating them again.
type Waiter struct {
	wake  chan struct{}
	timer *time.Timer
}

// Wait sleeps up to d, or until changed is closed (or receives), or the
// caller cancels. It reports how the wait ended and how long it really
// took (wall time, for the record only).
func (w *Waiter) Wait(d time.Duration, changed <-chan struct{}, c Canceller) (WaitEnd, time.Duration) {
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
		w.timer = time.NewTimer(time.Hour)
		w.timer.Stop()
	}
	wake := w.wake
	if !c.Notify(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}) {
		return WaitCancelled, 0
	}
	w.timer.Reset(d)
	start := time.Now()
	end := WaitElapsed
	select {
	case <-w.timer.C:
	case <-changed:
		end = WaitChanged
	case <-wake:
		end = WaitCancelled
	}
	w.timer.Stop()
	c.Notify(nil)
	select {
	case <-wake:
		end = WaitCancelled
	default:
	}
	if c.Cancelled() {
		end = WaitCancelled
	}
	return end, time.Since(start)
}
