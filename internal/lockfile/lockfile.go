// Package lockfile makes a data directory exclusive to one gateway: two
// gateways on one directory would overwrite each other's service state and
// share one install secret's file unknowingly. The lock is an advisory
// flock on <dir>/gateway.lock, which the kernel drops when the process
// ends, however it ends, so a crash never leaves a stale lock behind.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Name is the lock file in the data directory.
const Name = "gateway.lock"

// Lock is a held data-directory lock.
type Lock struct {
	f *os.File
}

// ErrHeld means another process (or another gateway in this process)
// holds the directory.
var ErrHeld = errors.New("the data directory is in use by another gateway")

// Acquire locks dir (creating it, mode 0700) or reports who holds it.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the data directory (set OMNIROUTE_DATA_DIR): %w", err)
	}
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the data directory lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = " (pid " + pid + ")"
			}
		}
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w%s: %s is locked; stop the other gateway, or give this one its own OMNIROUTE_DATA_DIR", ErrHeld, holder, dir)
		}
		return nil, fmt.Errorf("cannot lock the data directory %s: %w", dir, err)
	}
	// Say who holds it, for the next one's error message.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock; it is idempotent and safe on a nil Lock.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	unlock(l.f)
	l.f.Close()
	l.f = nil
}
