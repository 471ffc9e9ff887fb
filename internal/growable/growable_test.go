package growable

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestAppendKeepsAddresses: entries never move when the list grows past a
// chunk, so pointers taken earlier (and atomics in them) stay valid.
func TestAppendKeepsAddresses(t *testing.T) {
	l := Make[atomic.Int64]()
	l.Grow(3)
	p := l.At(1)
	p.Store(7)
	l.Grow(3 * chunkSize)
	if l.At(1) != p || l.At(1).Load() != 7 {
		t.Fatal("entry 1 moved or lost its value after growth")
	}
	if got, want := l.Len(), 3+3*chunkSize; got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	if _, ok := l.Get(l.Len()); ok {
		t.Fatal("Get past the end reported an entry")
	}
	if _, ok := l.Get(-1); ok {
		t.Fatal("Get(-1) reported an entry")
	}
}

// TestConcurrentReadersSeeWrittenEntries: a reader that observes a length
// reads every entry below it as written (run with -race).
func TestConcurrentReadersSeeWrittenEntries(t *testing.T) {
	l := &List[int]{}
	const n = 5 * chunkSize
	var wg sync.WaitGroup
	var done atomic.Bool
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				k := l.Len()
				for i := 0; i < k; i++ {
					if v := *l.At(i); v != i*3 {
						t.Errorf("entry %d = %d, want %d", i, v, i*3)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if got := l.Append(i * 3); got != i {
			t.Fatalf("Append returned %d, want %d", got, i)
		}
	}
	done.Store(true)
	wg.Wait()
}
