// Package ringbuf keeps the most recent log lines of a supervised process
// within a byte budget and fans new lines out to live subscribers.
//
// The budget counts each line as its UTF-8 length plus a fixed overhead
// (EntryOverhead), as the reference does, so a flood of empty lines cannot
// grow memory without bound. The oldest lines are evicted first; a single
// line larger than the whole budget is still kept, alone.
//
// Subscribers get lines through a buffered channel. A subscriber that does
// not keep up loses lines (counted in Dropped) instead of blocking the
// process's output readers: a slow log viewer must never stall a child on
// a full pipe.
package ringbuf

import (
	"strings"
	"sync"
	"time"
)

// DefaultCapacity is the budget used when New is given 0: 5 MiB.
const DefaultCapacity = 5 << 20

// EntryOverhead is added to every line's length when charging the budget.
const EntryOverhead = 40

// Stream names where a line came from.
type Stream string

// The streams of a process.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Line is one stored log line.
type Line struct {
	Seq    uint64    `json:"seq"`
	TS     time.Time `json:"ts"`
	Stream Stream    `json:"stream"`
	Line   string    `json:"line"`
}

func (l *Line) weight() int64 { return int64(len(l.Line)) + EntryOverhead }

// Buffer is a byte-bounded ring of lines. It is safe for concurrent use.
type Buffer struct {
	mu    sync.Mutex
	cap   int64
	size  int64
	lines []Line // lines[head:] are live, oldest first
	head  int
	seq   uint64
	subs  map[*Sub]struct{}
}

// New returns a buffer holding at most capacity bytes of lines (0 means
// DefaultCapacity).
func New(capacity int64) *Buffer {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Buffer{cap: capacity, subs: map[*Sub]struct{}{}}
}

// Push appends a line, evicts the oldest lines until it fits, and hands it
// to every subscriber that has room.
func (b *Buffer) Push(stream Stream, line string, ts time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	l := Line{Seq: b.seq, TS: ts, Stream: stream, Line: line}
	w := l.weight()
	for b.size+w > b.cap && b.head < len(b.lines) {
		b.size -= b.lines[b.head].weight()
		b.lines[b.head] = Line{}
		b.head++
	}
	if b.head > 0 && b.head >= len(b.lines)/2 {
		n := copy(b.lines, b.lines[b.head:])
		clear(b.lines[n:])
		b.lines = b.lines[:n]
		b.head = 0
	}
	b.lines = append(b.lines, l)
	b.size += w
	for s := range b.subs {
		if !s.match(&l) {
			continue
		}
		select {
		case s.c <- l:
		default:
			s.dropped++
		}
	}
}

// Len returns the number of stored lines.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines) - b.head
}

// Bytes returns the charged size of the stored lines.
func (b *Buffer) Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// Capacity returns the byte budget.
func (b *Buffer) Capacity() int64 { return b.cap }

// Tail returns up to n of the newest lines that contain filter (case
// insensitive; "" matches all), oldest first.
func (b *Buffer) Tail(n int, filter string) []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tailLocked(n, lowerFilter(filter))
}

func (b *Buffer) tailLocked(n int, f string) []Line {
	if n <= 0 {
		return nil
	}
	var out []Line
	for i := len(b.lines) - 1; i >= b.head && len(out) < n; i-- {
		if matches(b.lines[i].Line, f) {
			out = append(out, b.lines[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Sub is a live subscription. Read lines from C; call Close when done.
type Sub struct {
	b       *Buffer
	c       chan Line
	filter  string
	dropped uint64
	closed  bool
}

// C delivers new lines in order. It is closed by Close.
func (s *Sub) C() <-chan Line { return s.c }

// Dropped returns how many matching lines were lost because C was full.
func (s *Sub) Dropped() uint64 {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.dropped
}

func (s *Sub) match(l *Line) bool { return matches(l.Line, s.filter) }

// Close ends the subscription. It is idempotent.
func (s *Sub) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	delete(s.b.subs, s)
	close(s.c)
}

// Subscribe returns the last tail lines matching filter and a subscription
// to every later matching line, atomically: no line is missed or repeated
// between the two. buffer is the channel capacity (at least 1).
func (b *Buffer) Subscribe(tail int, filter string, buffer int) ([]Line, *Sub) {
	if buffer < 1 {
		buffer = 1
	}
	f := lowerFilter(filter)
	s := &Sub{b: b, c: make(chan Line, buffer), filter: f}
	b.mu.Lock()
	defer b.mu.Unlock()
	snap := b.tailLocked(tail, f)
	b.subs[s] = struct{}{}
	return snap, s
}

// Subscribers returns the number of live subscriptions.
func (b *Buffer) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func lowerFilter(f string) string { return strings.ToLower(f) }

// matches reports whether line contains the lower-cased filter f, ignoring
// ASCII and Unicode case.
func matches(line, f string) bool {
	if f == "" {
		return true
	}
	if strings.Contains(line, f) {
		return true
	}
	return strings.Contains(strings.ToLower(line), f)
}
