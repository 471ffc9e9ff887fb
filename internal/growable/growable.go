// Package growable is an append-only list that request paths index
// without locks while one writer appends (a config reload registering new
// targets and connections). Entries live in fixed-size chunks that never
// move, so a pointer to an entry (and any atomic inside it) stays valid
// for the list's life, and a reader that got an index from a published
// config finds its entry written: the writer fills the entry before it
// publishes the length, and a config naming the index is published after
// that.
package growable

import (
	"fmt"
	"sync/atomic"
)

const (
	chunkShift = 6
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	maxChunks  = 1024
)

// Max is how many entries a List holds (65,536: far more targets or
// connections than a config file names).
const Max = chunkSize * maxChunks

// List is an append-only list of T. The zero value is empty and ready.
// At and Len may be called from any goroutine; Append from one writer at
// a time (the caller serialises writers).
type List[T any] struct {
	chunks [maxChunks]atomic.Pointer[[chunkSize]T]
	n      atomic.Int64
}

// Make returns a list holding vs.
func Make[T any](vs ...T) *List[T] {
	l := &List[T]{}
	for _, v := range vs {
		l.Append(v)
	}
	return l
}

// Len is the number of entries appended so far.
func (l *List[T]) Len() int { return int(l.n.Load()) }

// At returns entry i, which must be below a Len the caller observed.
func (l *List[T]) At(i int) *T { return &l.chunks[i>>chunkShift].Load()[i&chunkMask] }

// Get returns entry i and true, or nil and false when i is out of range.
func (l *List[T]) Get(i int) (*T, bool) {
	if i < 0 || i >= l.Len() {
		return nil, false
	}
	return l.At(i), true
}

// Append adds v and returns its index. It panics past Max entries.
func (l *List[T]) Append(v T) int {
	i := int(l.n.Load())
	if i >= Max {
		panic(fmt.Sprintf("growable: more than %d entries", Max))
	}
	c := l.chunks[i>>chunkShift].Load()
	if c == nil {
		c = new([chunkSize]T)
		l.chunks[i>>chunkShift].Store(c)
	}
	c[i&chunkMask] = v
	l.n.Store(int64(i + 1))
	return i
}

// Grow appends n zero entries and returns the index of the first. The
// caller may fill them after Grow returned (entries holding atomics
// cannot be copied in): readers must then learn the indexes only through
// something published after the filling, as a reload's routing config.
func (l *List[T]) Grow(n int) int {
	first := l.Len()
	var zero T
	for range n {
		l.Append(zero)
	}
	return first
}
