package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/omniroute/gateway/messages"
)

// Aborter stops an upload being read (the transport sets a read deadline
// in the past on the client connection). It is called from the ingest
// actor's goroutine and must not block.
type Aborter interface {
	AbortRead()
}

// Lease is a granted reservation: bytes of the budget and, for a heavy
// request, a count slot. The bytes go back when the body is no longer held
// (ReleaseBytes, e.g. once a stream committed and its body was freed); the
// slot goes back with Release, at the end of the request. Both are
// idempotent. Close (io.Closer) is Release, so a lease parked in fasthttp's
// user values is released even if the handler never runs.
type Lease struct {
	h       *Handle
	bytes   atomic.Int64
	slot    uint8
	start   int64 // clock nanoseconds at grant
	done    atomic.Bool
	aborted atomic.Bool

	// guarded by the registry shard lock
	reading bool
	watcher Aborter
	shard   uint32
	idx     uint32
}

func (h *Handle) newLease(bytes int64, slot uint8) *Lease {
	// A new lease is for a body about to be read: abortable from the start,
	// so an abort that comes before the reader registered is not lost.
	l := &Lease{h: h, slot: slot, start: h.clk.Now().UnixNano(), reading: true}
	l.bytes.Store(bytes)
	h.leases.register(l)
	return l
}

// Bytes returns the bytes the lease holds.
func (l *Lease) Bytes() int64 { return l.bytes.Load() }

// Heavy reports whether the lease holds a count slot.
func (l *Lease) Heavy() bool { return l.slot != slotNone }

// Grow raises the reservation to at least target bytes (a chunked upload
// that keeps arriving), through the same gate as a new reservation.
func (l *Lease) Grow(key [20]byte, target int64, gone <-chan struct{}) messages.IngestOutcome {
	cur := l.bytes.Load()
	if target <= cur {
		return messages.IngestAdmitted
	}
	h := l.h
	extra := target - cur
	if target > h.max {
		h.Shed(messages.ShedBodyExceedsBudget)
		return messages.ShedBodyExceedsBudget
	}
	if h.waiting.Load() == 0 && h.addBytes(extra) {
		l.bytes.Add(extra)
		return messages.IngestAdmitted
	}
	out := h.queue(key, extra, false, gone)
	if out == messages.IngestAdmitted {
		l.bytes.Add(extra)
	}
	return out
}

// StartReading registers the reader of the upload; under critical
// pressure the actor may abort it through a (at once, if it was aborted
// before the reader registered).
func (l *Lease) StartReading(a Aborter) { l.h.leases.setReading(l, a) }

// DoneReading marks the body as fully read (or the lease as not for a
// body being read): it is no longer abortable.
func (l *Lease) DoneReading() { l.h.leases.setReading(l, nil) }

// Aborted reports whether the actor aborted the upload.
func (l *Lease) Aborted() bool { return l.aborted.Load() }

// ReleaseBytes returns the bytes to the budget.
func (l *Lease) ReleaseBytes() {
	if n := l.bytes.Swap(0); n > 0 {
		l.h.putBytes(n)
	}
}

// Release returns everything the lease holds.
func (l *Lease) Release() {
	if !l.done.CompareAndSwap(false, true) {
		return
	}
	l.h.leases.unregister(l)
	l.ReleaseBytes()
	l.h.putSlot(l.slot)
}

// Close releases the lease.
func (l *Lease) Close() error {
	l.Release()
	return nil
}

// registry holds the live leases, for the occupancy hint and for aborting
// the largest uploads. It is sharded so that heavy requests do not meet on
// one lock; light requests never touch it.
type registry struct {
	shards [regShards]regShard
	next   atomic.Uint32
}

const regShards = 16

type regShard struct {
	mu    sync.Mutex
	slots []*Lease
	free  []uint32
	_     [40]byte
}

func (r *registry) register(l *Lease) {
	si := r.next.Add(1) % regShards
	s := &r.shards[si]
	s.mu.Lock()
	var idx uint32
	if n := len(s.free); n > 0 {
		idx = s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[idx] = l
	} else {
		idx = uint32(len(s.slots))
		s.slots = append(s.slots, l)
	}
	l.shard, l.idx = si, idx
	s.mu.Unlock()
}

func (r *registry) unregister(l *Lease) {
	s := &r.shards[l.shard]
	s.mu.Lock()
	if int(l.idx) < len(s.slots) && s.slots[l.idx] == l {
		s.slots[l.idx] = nil
		s.free = append(s.free, l.idx)
	}
	l.reading, l.watcher = false, nil
	s.mu.Unlock()
}

func (r *registry) setReading(l *Lease, a Aborter) {
	s := &r.shards[l.shard]
	s.mu.Lock()
	l.reading, l.watcher = a != nil, a
	if a != nil && l.aborted.Load() {
		a.AbortRead()
	}
	s.mu.Unlock()
}

// youngest returns the grant time of the most recent live heavy lease
// (clock nanoseconds), or 0.
func (r *registry) youngest() int64 {
	var y int64
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, l := range s.slots {
			if l != nil && l.slot != slotNone && l.start > y {
				y = l.start
			}
		}
		s.mu.Unlock()
	}
	return y
}

// reading lists the leases of uploads being read with their bytes.
func (r *registry) readingLeases() []readingLease {
	var out []readingLease
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, l := range s.slots {
			if l != nil && l.reading && !l.aborted.Load() {
				out = append(out, readingLease{l: l, bytes: l.bytes.Load()})
			}
		}
		s.mu.Unlock()
	}
	return out
}

type readingLease struct {
	l     *Lease
	bytes int64
}

// abort stops l's upload if it is still being read. The shard lock keeps
// the watcher valid: the transport clears it (DoneReading, Release) under
// the same lock before it reuses anything the watcher points at.
func (r *registry) abort(l *Lease) bool {
	s := &r.shards[l.shard]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !l.reading {
		return false
	}
	l.aborted.Store(true)
	if l.watcher != nil {
		l.watcher.AbortRead()
	}
	return true
}
