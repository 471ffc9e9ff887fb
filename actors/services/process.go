//go:build unix

package services

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/ringbuf"
)

// maxLineBytes bounds one stored log line; longer output is split.
const maxLineBytes = 16 << 10

// child is one spawned process and the readers of its output.
//
// The child runs in its own process group (Setpgid), so a stop signals
// the whole group and reaches grandchildren. Its stdout and stderr are
// pipes the supervisor creates itself and hands to exec as *os.File: exec
// then starts no copying goroutines, so Wait returns when the child exits
// even if a grandchild still holds the pipes; our readers end at EOF (all
// writers gone) or at the read deadline set after the group is killed.
type child struct {
	cmd     *exec.Cmd
	pid     int
	outR    *os.File
	errR    *os.File
	readers sync.WaitGroup
}

// spawner starts processes from one goroutine locked to its OS thread.
// Linux delivers Pdeathsig when the *thread* that forked the child exits,
// not the process; Go may retire threads whose locked goroutine exits, so
// forking from arbitrary goroutines would make Pdeathsig fire at random.
// A dedicated locked thread that lives as long as the manager makes it
// mean "the gateway died".
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	for r := range s.reqs {
		r.err <- r.cmd.Start()
	}
}

func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	s.reqs <- r
	return <-r.err
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// startChild spawns argv in its own process group with the given
// environment and working directory; output lines go into ring, each
// through redact (a sidecar may print the keys it was given). onExit
// runs once, from a goroutine, when the child has exited and been reaped.
func startChild(sp *spawner, path string, args, env []string, dir string, ring *ringbuf.Buffer, redact func(string) string, clk clock.Clock, wg *sync.WaitGroup, onExit func(Exit)) (*child, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = sysProcAttr()
	err = sp.start(cmd)
	outW.Close() // the child holds its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, outR: outR, errR: errR}
	started := clk.Now()
	for _, r := range []struct {
		f *os.File
		s ringbuf.Stream
	}{{outR, ringbuf.Stdout}, {errR, ringbuf.Stderr}} {
		c.readers.Add(1)
		wg.Add(1)
		go func(f *os.File, s ringbuf.Stream) {
			defer wg.Done()
			defer c.readers.Done()
			readLines(f, s, ring, redact, clk)
			f.Close()
		}(r.f, r.s)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr := cmd.Wait() // the only Wait of this process
		onExit(describeExit(cmd.ProcessState, werr, started, clk.Now()))
	}()
	return c, nil
}

// readLines copies lines from r into ring until EOF or a read error (such
// as the deadline set by closeReadersAfter).
func readLines(r io.Reader, s ringbuf.Stream, ring *ringbuf.Buffer, redact func(string) string, clk clock.Clock) {
	br := bufio.NewReaderSize(r, maxLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			l := trimEOL(line)
			if len(l) > 0 {
				ring.Push(s, redact(string(l)), clk.Now())
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// signalGroup sends sig to the child's whole process group. The group id
// stays reserved while any member lives, so this cannot hit a recycled
// pid while the group still has members.
func (c *child) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-c.pid, sig)
}

// groupAlive reports whether any non-zombie member of the child's process
// group is left.
func (c *child) groupAlive() bool { return groupHasLiveMembers(c.pid) }

// closeReadersAfter bounds how long the output readers may still block:
// a process that escaped the group (setsid) could hold the pipes forever.
func (c *child) closeReadersAfter(d time.Duration) {
	t := time.Now().Add(d)
	_ = c.outR.SetReadDeadline(t)
	_ = c.errR.SetReadDeadline(t)
}

func describeExit(ps *os.ProcessState, werr error, started, now time.Time) Exit {
	e := Exit{At: now, RanMs: now.Sub(started).Milliseconds()}
	if ps == nil {
		e.Error = werr.Error()
		return e
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal().String()
		return e
	}
	code := ps.ExitCode()
	e.Code = &code
	return e
}
