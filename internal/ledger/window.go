package ledger

import (
	"sync/atomic"
	"time"
)

// A window counter is one atomic word: the low 44 bits count what is used
// in the window, the high 20 bits name the window (its epoch-aligned index
// modulo 2^20-1, plus one, so that a zero word means "no window yet").
// Reserving is one compare-and-swap that also rolls the counter into a new
// window, so no actor message and no lock is needed on the request path,
// and the check and the charge cannot be separated.
const (
	usedBits = 44
	usedMask = 1<<usedBits - 1
	// idxMod is the number of distinct window indexes.
	idxMod = 1<<(64-usedBits) - 1
)

// WindowIndex is the epoch-aligned index of the window holding t.
func WindowIndex(t time.Time, window time.Duration) uint64 {
	return uint64(t.UnixNano()/int64(window)) % idxMod
}

// WindowBounds returns the start and end of the window holding t.
func WindowBounds(t time.Time, window time.Duration) (start, end time.Time) {
	n := t.UnixNano() / int64(window) * int64(window)
	start = time.Unix(0, n)
	return start, start.Add(window)
}

// ahead reports whether window a is later than b (modulo idxMod).
func ahead(a, b uint64) bool {
	d := (a + idxMod - b) % idxMod
	return d != 0 && d < idxMod/2
}

// Counter is one window counter. The zero value holds no window.
type Counter struct{ w atomic.Uint64 }

func unpack(w uint64) (idx uint64, used uint64, empty bool) {
	tag := w >> usedBits
	if tag == 0 {
		return 0, 0, true
	}
	return tag - 1, w & usedMask, false
}

func pack(idx, used uint64) uint64 {
	if used > usedMask {
		used = usedMask
	}
	return (idx%idxMod+1)<<usedBits | used
}

// Load returns the counter's window and used amount (ok false when the
// counter has never been charged).
func (c *Counter) Load() (idx, used uint64, ok bool) {
	idx, used, empty := unpack(c.w.Load())
	return idx, used, !empty
}

// Used returns what is used in window idx (or in a later window the
// counter already moved to; 0 for an earlier one).
func (c *Counter) Used(idx uint64) uint64 {
	wi, used, ok := c.Load()
	if !ok || (wi != idx && !ahead(wi, idx)) {
		return 0
	}
	return used
}

// Reserve charges cost to window idx if it fits under limit and returns
// the window actually charged (a counter already in a later window is
// charged there) and what it held before. A request larger than the whole
// limit is admitted when the window is empty, so it is sent once per
// window rather than never: the counter never exceeds limit by more than
// one request.
func (c *Counter) Reserve(idx, cost, limit uint64) (charged uint64, before uint64, ok bool) {
	idx %= idxMod
	for {
		w := c.w.Load()
		wi, used, empty := unpack(w)
		switch {
		case empty:
		case wi == idx:
		case ahead(wi, idx):
			idx = wi
		default:
			used = 0
		}
		if used+cost > limit && used != 0 {
			return idx, used, false
		}
		if c.w.CompareAndSwap(w, pack(idx, used+cost)) {
			return idx, used, true
		}
	}
}

// Adjust replaces a reservation of reserved by actual in window idx; it
// does nothing once the counter has moved to another window (the old
// window's budget is gone).
func (c *Counter) Adjust(idx, reserved, actual uint64) {
	for {
		w := c.w.Load()
		wi, used, empty := unpack(w)
		if empty || wi != idx {
			return
		}
		n := used + actual
		if n >= reserved {
			n -= reserved
		} else {
			n = 0
		}
		if c.w.CompareAndSwap(w, pack(idx, n)) {
			return
		}
	}
}
