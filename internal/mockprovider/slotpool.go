package mockprovider

import "sync"

// slotPool is a model's concurrency cap: a FIFO semaphore whose size can
// change while requests hold and wait for slots, so a benchmark can halve
// or restore a provider's capacity at a chosen moment and get exactly that
// capacity from then on:
//
//   - shrinking never interrupts a request being served; no waiter is
//     granted a slot until the holders are below the new size;
//   - growing grants the freed room to the oldest waiters at once;
//   - size 0 is unlimited (every waiter is granted).
//
// Waiters are served in arrival order, which gives the provider the sharp
// latency knee of a real FIFO queue. (A buffered channel used as a
// semaphore cannot be resized: a replacement channel would let the holders
// and waiters of the old one run beside the new one, briefly doubling the
// capacity.)
type slotPool struct {
	mu      sync.Mutex
	size    int // 0: unlimited
	used    int
	waiters []*slotWaiter // FIFO; granted ones are removed
}

// slotWaiter is one queued request. granted receives one value when the
// slot is the waiter's.
type slotWaiter struct {
	granted chan struct{}
}

// resize sets the pool's size (0: unlimited) and grants any room it opens.
func (p *slotPool) resize(n int) {
	p.mu.Lock()
	if p.size != n {
		p.size = n
		p.grantLocked()
	}
	p.mu.Unlock()
}

// capacity is the current size (0: unlimited).
func (p *slotPool) capacity() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size
}

// tryAcquire takes a slot if one is free and nobody waits for one.
func (p *slotPool) tryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) == 0 && p.roomLocked() {
		p.used++
		return true
	}
	return false
}

// enqueue registers a waiter; its granted channel fires when it holds a
// slot. Call tryAcquire first.
func (p *slotPool) enqueue() *slotWaiter {
	w := &slotWaiter{granted: make(chan struct{}, 1)}
	p.mu.Lock()
	p.waiters = append(p.waiters, w)
	p.grantLocked()
	p.mu.Unlock()
	return w
}

// cancel withdraws a waiter that stopped waiting. If it was granted in the
// meantime, the slot goes back to the pool.
func (p *slotPool) cancel(w *slotWaiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.waiters {
		if o == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
	// Not queued any more: it was granted.
	p.used--
	p.grantLocked()
}

// release returns a held slot.
func (p *slotPool) release() {
	p.mu.Lock()
	p.used--
	p.grantLocked()
	p.mu.Unlock()
}

func (p *slotPool) roomLocked() bool { return p.size <= 0 || p.used < p.size }

func (p *slotPool) grantLocked() {
	n := 0
	for n < len(p.waiters) && p.roomLocked() {
		p.used++
		p.waiters[n].granted <- struct{}{}
		n++
	}
	if n > 0 {
		p.waiters = append(p.waiters[:0], p.waiters[n:]...)
	}
}
