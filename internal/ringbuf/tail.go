package ringbuf

import (
	"bytes"
	"sync"
)

// Tail keeps the last Max bytes written to it: a child process's stderr,
// kept so the error that says why the child did not start can quote it.
// It is the byte-level sibling of Buffer, for a process nobody views live.
type Tail struct {
	mu  sync.Mutex
	Max int
	buf []byte
}

// Write keeps b's bytes, dropping the oldest beyond Max. It never fails,
// so a child writing to its stderr is never blocked or broken by it.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns the kept bytes, trimmed of surrounding white space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
