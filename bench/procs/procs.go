// Package procs builds the benchmark's binaries once per run and runs each
// component (mock provider, reference proxy, gateway) as its own OS process
// on loopback, so each one's CPU time and memory can be read from procfs.
package procs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/omniroute/gateway/internal/ringbuf"
)

// Binaries are the executables of one run.
type Binaries struct {
	// Dir holds them (a temporary directory the caller removes).
	Dir string `json:"dir"`
	// Gateway is cmd/omniroute: the gateway, and the mock provider through
	// its mockprovider subcommand.
	Gateway string `json:"gateway"`
	// Bench is cmd/omniroute-bench, whose hidden refproxy subcommand runs
	// the reference proxy.
	Bench string `json:"bench"`
	// Etcd is cmd/omniroute-etcd, the loopback etcd the cluster scenario's
	// members join through.
	Etcd string `json:"etcd"`
	// Tags are the build tags used (benchpprof adds a profiling listener to
	// the gateway; never used for a product build).
	Tags []string `json:"tags,omitempty"`
	// Command is the exact build command.
	Command string `json:"command"`
}

// BuildOptions tune Build.
type BuildOptions struct {
	// Tags are extra build tags.
	Tags []string
	// NoTrimpath drops -trimpath and keeps the environment's cgo setting
	// instead of CGO_ENABLED=0: the tests use it to share the build cache
	// with an ordinary build (`go vet ./...`, another test's `go build`), so
	// that they link rather than compile the whole module again. Either
	// flag alone changes every package's build.
	NoTrimpath bool
}

// Build compiles cmd/omniroute and cmd/omniroute-bench of the module that
// contains the working directory into dir with one `go build` (no race
// detector; CGO_ENABLED=0 and -trimpath unless NoTrimpath). It takes a few
// seconds with a warm build cache.
func Build(ctx context.Context, dir string, opt BuildOptions) (Binaries, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return Binaries{}, err
	}
	args := []string{"build"}
	if !opt.NoTrimpath {
		args = append(args, "-trimpath")
	}
	if len(opt.Tags) > 0 {
		args = append(args, "-tags", strings.Join(opt.Tags, ","))
	}
	args = append(args, "-o", dir+string(filepath.Separator), "./cmd/omniroute", "./cmd/omniroute-bench", "./cmd/omniroute-etcd")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	prefix := ""
	if !opt.NoTrimpath {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		prefix = "CGO_ENABLED=0 "
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Binaries{}, fmt.Errorf("build the benchmark binaries (%sgo %s in %s): %v\n%s", prefix, strings.Join(args, " "), root, err, out)
	}
	return Binaries{
		Dir: dir, Gateway: filepath.Join(dir, "omniroute"), Bench: filepath.Join(dir, "omniroute-bench"),
		Etcd: filepath.Join(dir, "omniroute-etcd"),
		Tags: opt.Tags, Command: prefix + "go " + strings.Join(args, " "),
	}, nil
}

// ModuleRoot returns the directory of the go.mod governing the working
// directory.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find the module root: run the benchmark from inside the gateway's module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// Spec describes one process.
type Spec struct {
	// Name labels the process in errors and names its log file.
	Name string
	Exe  string
	Args []string
	// Env is added to a cleaned copy of this process's environment (see
	// CleanEnv).
	Env []string
	// Ready is the prefix of the stdout line announcing the address; the
	// rest of that line is host:port.
	Ready string
	// Log receives the process's stdout and stderr (nil: discarded).
	Log string
	// StartTimeout bounds the wait for the ready line (default 20 s).
	StartTimeout time.Duration
}

// Process is a started component.
type Process struct {
	Name string
	Addr string // 127.0.0.1:PORT from the ready line
	Pid  int
	// Extra holds other "<key> listening on http://<addr>" lines printed
	// before the ready line, by key (for example a bench-only profiling
	// listener).
	Extra map[string]string

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	tail     *ringbuf.Tail
	stopOnce sync.Once
	stopErr  error
	logFile  *os.File
}

// CleanEnv is os.Environ without the settings that would make a run depend
// on the caller's shell: every OMNIROUTE_* and ADAPTIVE_ADMISSION_* variable,
// HEAP_PRESSURE_THRESHOLD_MB and the Go runtime knobs (GOMAXPROCS, GOGC,
// GOMEMLIMIT, GODEBUG). Each process then gets exactly the settings the
// benchmark names.
func CleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "OMNIROUTE_"), strings.HasPrefix(k, "ADAPTIVE_ADMISSION_"),
			k == "HEAP_PRESSURE_THRESHOLD_MB", k == "GOMAXPROCS", k == "GOGC", k == "GOMEMLIMIT", k == "GODEBUG":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Start runs the process and returns once it printed its ready line.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if s.StartTimeout <= 0 {
		s.StartTimeout = 20 * time.Second
	}
	p := &Process{Name: s.Name, Extra: map[string]string{}, done: make(chan struct{}), tail: &ringbuf.Tail{Max: 8 << 10}}
	var logw io.Writer = p.tail
	if s.Log != "" {
		f, err := os.Create(s.Log)
		if err != nil {
			return nil, fmt.Errorf("start %s: create log: %w", s.Name, err)
		}
		p.logFile = f
		logw = io.MultiWriter(f, p.tail)
	}
	cmd := exec.Command(s.Exe, s.Args...)
	cmd.Env = append(CleanEnv(), s.Env...)
	cmd.Stderr = logw
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.closeLog()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	cmd.WaitDelay = 2 * time.Second
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		p.closeLog()
		return nil, fmt.Errorf("start %s (%s): %w", s.Name, s.Exe, err)
	}
	p.Pid = cmd.Process.Pid

	ready := make(chan string, 1)
	var extraMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logw, line)
			if announced {
				continue
			}
			if addr, ok := strings.CutPrefix(line, s.Ready); ok {
				announced = true
				ready <- strings.TrimSpace(addr)
				continue
			}
			if key, addr, ok := strings.Cut(line, " listening on http://"); ok {
				extraMu.Lock()
				p.Extra[key] = strings.TrimSpace(addr)
				extraMu.Unlock()
			}
		}
		_, _ = io.Copy(logw, stdout)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	timer := time.NewTimer(s.StartTimeout)
	defer timer.Stop()
	select {
	case addr := <-ready:
		extraMu.Lock()
		defer extraMu.Unlock()
		p.Addr = addr
		return p, nil
	case <-p.done:
		p.closeLog()
		return nil, fmt.Errorf("%s exited before it was ready (%v); its output ends with: %s", s.Name, p.waitErr, p.tail)
	case <-ctx.Done():
		_ = p.Stop()
		return nil, fmt.Errorf("%s not ready: %w", s.Name, ctx.Err())
	case <-timer.C:
		_ = p.Stop()
		return nil, fmt.Errorf("%s printed no line starting %q within %s; its output ends with: %s", s.Name, s.Ready, s.StartTimeout, p.tail)
	}
}

// Alive reports whether the process is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, waits up to 10 s, then kills; it always reaps the
// process and returns nil only for a clean exit.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		defer p.closeLog()
		if Terminate(p.cmd, p.done) {
			p.stopErr = fmt.Errorf("%s did not stop within 10 s of SIGTERM and was killed", p.Name)
			return
		}
		if p.waitErr != nil {
			p.stopErr = fmt.Errorf("%s: %v; its output ends with: %s", p.Name, p.waitErr, p.tail)
		}
	})
	return p.stopErr
}

// Terminate ends cmd, whose waiter closes done once it is reaped: SIGTERM,
// then SIGKILL if it has not exited within 10 s. It returns once done is
// closed, and reports whether the process had to be killed; one already
// gone is not signalled.
func Terminate(cmd *exec.Cmd, done <-chan struct{}) (killed bool) {
	select {
	case <-done:
		return false
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return false
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return true
	}
}

func (p *Process) closeLog() {
	if p.logFile != nil {
		_ = p.logFile.Close()
	}
}
