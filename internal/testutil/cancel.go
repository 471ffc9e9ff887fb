package testutil

import "sync"

// Cancel is a caller going away, fired by the test by hand. It serves the
// ports that take such a signal (lanes.Aborter, planner.Canceller: Notify
// and Cancelled), so a queued acquire or a plan's wait is tested without
// a real connection.
type Cancel struct {
	mu    sync.Mutex
	f     func()
	fired bool
}

// Notify registers f to run once when Fire is called (nil clears it); it
// reports false, registering nothing, when Fire was called already.
func (c *Cancel) Notify(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		return false
	}
	c.f = f
	return true
}

// Cancelled reports whether Fire was called.
func (c *Cancel) Cancelled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

// Fire cancels: it runs the registered function, if any, outside the lock
// (as a real connection's hang-up does, on its own goroutine or the test's).
func (c *Cancel) Fire() {
	c.mu.Lock()
	c.fired = true
	f := c.f
	c.mu.Unlock()
	if f != nil {
		f()
	}
}
