package mockprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/omniroute/gateway/internal/ringbuf"
)

// Process is a mock running as a child process.
type Process struct {
	Addr string // 127.0.0.1:PORT
	Cmd  *exec.Cmd

	done     chan struct{} // closed when the process has been reaped
	waitErr  error
	stderr   *tailBuffer
	stopOnce sync.Once
	stopErr  error
}

// startTimeout bounds the wait for the ready line when ctx has no deadline.
const startTimeout = 15 * time.Second

// StartProcess runs exe (the current executable when empty) with args and
// ChildEnv=1, and returns once it printed its ready line. Its stdout and
// stderr are drained for its whole life; the stderr tail is quoted in
// errors. ctx bounds only the start-up wait. Stop must be called to reap it.
func StartProcess(ctx context.Context, exe string, args ...string) (*Process, error) {
	if exe == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("mockprovider: find own executable: %w", err)
		}
		exe = self
	}
	ready := make(chan string, 1)
	p := &Process{done: make(chan struct{}), stderr: &tailBuffer{ringbuf.Tail{Max: 8 << 10}}}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	cmd.Stdout = &readyWriter{ready: ready}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 2 * time.Second // do not hang on pipes a grandchild kept open
	setParentDeath(cmd)             // a test binary killed by -timeout must not leave the mock running
	p.Cmd = cmd
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mockprovider: start %s: %w", exe, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case addr := <-ready:
		p.Addr = addr
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("mockprovider: %s exited before it was ready (%v); stderr: %s", exe, p.waitErr, p.stderr)
	case <-ctx.Done():
		_ = p.Stop()
		return nil, fmt.Errorf("mockprovider: %s not ready: %w; stderr: %s", exe, ctx.Err(), p.stderr)
	case <-timer.C:
		_ = p.Stop()
		return nil, fmt.Errorf("mockprovider: %s printed no ready line within %s; stderr: %s", exe, startTimeout, p.stderr)
	}
}

// Stop sends SIGTERM, waits up to 5 s, then kills. It always reaps the
// process and returns nil only for a clean exit with status 0.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		default:
			if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				_ = p.Cmd.Process.Kill()
			}
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				_ = p.Cmd.Process.Kill()
				<-p.done
				p.stopErr = fmt.Errorf("mockprovider: pid %d ignored SIGTERM for 5s and was killed; stderr: %s", p.Cmd.Process.Pid, p.stderr)
				return
			}
		}
		if p.waitErr != nil {
			p.stopErr = fmt.Errorf("mockprovider: pid %d: %w; stderr: %s", p.Cmd.Process.Pid, p.waitErr, p.stderr)
		}
	})
	return p.stopErr
}

// readyWriter scans the child's stdout for the ready line and discards the
// rest, so the child never blocks on a full pipe.
type readyWriter struct {
	ready chan string
	line  []byte
	found bool
}

func (w *readyWriter) Write(b []byte) (int, error) {
	if w.found {
		return len(b), nil
	}
	w.line = append(w.line, b...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			if len(w.line) > 4096 {
				w.line = w.line[:0] // not a ready line; keep the buffer bounded
			}
			return len(b), nil
		}
		line := strings.TrimSpace(string(w.line[:i]))
		w.line = w.line[i+1:]
		if addr, ok := strings.CutPrefix(line, ReadyPrefix); ok {
			w.found = true
			w.line = nil
			w.ready <- addr
			return len(b), nil
		}
	}
}

// tailBuffer is the child's stderr tail, quoted in errors ("(empty)" when
// the child printed nothing, so the error never ends in a blank).
type tailBuffer struct{ ringbuf.Tail }

func (t *tailBuffer) String() string {
	s := t.Tail.String()
	if s == "" {
		return "(empty)"
	}
	return fmt.Sprintf("%q", s)
}
