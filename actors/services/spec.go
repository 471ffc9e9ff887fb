package services

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/config"
)

// Spec is one service, resolved: ports chosen, placeholders expanded,
// defaults applied.
type Spec struct {
	Name string
	// Command is as configured ("{self}", a path or a PATH name); Self is
	// what "{self}" means.
	Command string
	Self    string
	Args    []string
	// Env is the child's whole environment.
	Env        []string
	Port       int
	Dir        string
	HealthPath string
	Identity   string

	HealthInterval time.Duration
	HealthTimeout  time.Duration
	HealthFailures int
	StartTimeout   time.Duration
	StopTimeout    time.Duration
	LogBufferBytes int64
	AutoStart      bool
	Restart        RestartPolicy
}

// RestartPolicy is how crashes are handled.
type RestartPolicy struct {
	Enabled     bool
	Initial     time.Duration
	Max         time.Duration
	StableAfter time.Duration
	MaxCrashes  int
	Window      time.Duration
}

// backoff is Initial·2^(n-1) for the n-th consecutive crash, capped at
// Max, with up to 25 % taken off so that services that crashed together
// do not restart in lock step (and the cap is never exceeded).
func (rp RestartPolicy) backoff() backoff.Policy {
	return backoff.Policy{Base: rp.Initial, Max: rp.Max, Factor: 2, Jitter: backoff.Below(0.25)}
}

// Defaults, from the reference (health, stop, logs) and from the
// supervisors this one is measured against (restart policy).
const (
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultHealthFailures = 3
	DefaultStopTimeout    = 15 * time.Second
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultStableAfter    = time.Minute
	DefaultMaxCrashes     = 5
	DefaultCrashWindow    = 5 * time.Minute
	// FastCrash: an exit this soon after spawning is reported as a fast
	// crash (the reference's CRASH_FAST_THRESHOLD_MS).
	FastCrash = 5 * time.Second
)

// Addr is the service's loopback address.
func (s *Spec) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// StartWait bounds how long a start can take to conclude: the probe
// before spawning, the start timeout, and a kill after that.
func (s *Spec) StartWait() time.Duration {
	return s.StartTimeout + s.HealthTimeout + 5*time.Second
}

// StopWait bounds how long a stop can take.
func (s *Spec) StopWait() time.Duration { return s.StopTimeout + 5*time.Second }

// BuildOptions are what FromConfig needs from the gateway.
type BuildOptions struct {
	// Self is the gateway's executable ("" = os.Executable()).
	Self string
	// DataDir holds <DataDir>/services/<name> for {data_dir}.
	DataDir string
	// Getenv reads the variables named in env_passthrough (nil =
	// os.LookupEnv); BaseEnv reads PATH, HOME and the like (nil =
	// os.LookupEnv).
	Getenv  func(string) (string, bool)
	BaseEnv func(string) (string, bool)
	// Ports overrides configured ports by service name (BIFROST_PORT).
	Ports map[string]int
}

// baseEnv are the variables every child inherits from the gateway's own
// environment (GORACE only matters to race-enabled builds, such as test
// binaries standing in for a sidecar).
var baseEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ", "GORACE"}

// FromConfig resolves every service of the file, sorted by name. A port of
// 0 is replaced by a free loopback port, chosen now and kept for the
// gateway's life so restarts and the provider address agree.
func FromConfig(services map[string]config.ServiceConfig, o BuildOptions) ([]Spec, error) {
	if o.Getenv == nil {
		o.Getenv = os.LookupEnv
	}
	if o.BaseEnv == nil {
		o.BaseEnv = os.LookupEnv
	}
	if o.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("services: cannot find the gateway's own executable for {self}: %w", err)
		}
		o.Self = self
	}
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	// Ports are chosen for every service before any is released, so two
	// services never get the same free port.
	held := map[string]net.Listener{}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	var out []Spec
	for _, name := range names {
		c := services[name]
		s := Spec{Name: name, Command: c.Command, Self: o.Self, Port: c.Port, HealthPath: c.HealthPath, Identity: c.Identity,
			Dir: filepath.Join(o.DataDir, "services", name), LogBufferBytes: c.LogBufferBytes, AutoStart: c.AutoStart,
			HealthInterval: orDefault(c.HealthIntervalMs, DefaultHealthInterval), HealthTimeout: orDefault(c.HealthTimeoutMs, DefaultHealthTimeout),
			HealthFailures: c.HealthFailures, StopTimeout: orDefault(c.StopTimeoutMs, DefaultStopTimeout)}
		if p, ok := o.Ports[name]; ok && p > 0 {
			s.Port = p
		}
		if s.HealthFailures == 0 {
			s.HealthFailures = DefaultHealthFailures
		}
		s.StartTimeout = orDefault(c.StartTimeoutMs, 3*s.HealthInterval)
		r := c.Restart
		s.Restart = RestartPolicy{Enabled: r.Policy != config.RestartNever,
			Initial: orDefault(r.InitialBackoffMs, DefaultInitialBackoff), Max: orDefault(r.MaxBackoffMs, DefaultMaxBackoff),
			StableAfter: orDefault(r.StableAfterMs, DefaultStableAfter), MaxCrashes: r.MaxCrashes, Window: orDefault(r.CrashWindowMs, DefaultCrashWindow)}
		if s.Restart.MaxCrashes == 0 {
			s.Restart.MaxCrashes = DefaultMaxCrashes
		}
		if s.Restart.Initial > s.Restart.Max {
			s.Restart.Max = s.Restart.Initial
		}
		if s.Port == 0 {
			ln, err := listenFree()
			if err != nil {
				return nil, fmt.Errorf("services.%s: %w", name, err)
			}
			held[name] = ln
			s.Port = ln.Addr().(*net.TCPAddr).Port
		}
		repl := strings.NewReplacer("{port}", strconv.Itoa(s.Port), "{host}", "127.0.0.1", "{addr}", s.Addr(), "{data_dir}", s.Dir)
		for _, a := range c.Args {
			s.Args = append(s.Args, repl.Replace(a))
		}
		for _, k := range baseEnv {
			if v, ok := o.BaseEnv(k); ok {
				s.Env = append(s.Env, k+"="+v)
			}
		}
		for _, k := range c.EnvPassthrough {
			if v, ok := o.Getenv(k); ok {
				s.Env = append(s.Env, k+"="+v)
			}
		}
		keys := make([]string, 0, len(c.Env))
		for k := range c.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s.Env = append(s.Env, k+"="+repl.Replace(c.Env[k]))
		}
		out = append(out, s)
	}
	return out, nil
}

func orDefault(ms int, d time.Duration) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return d
}

// FreePort asks the kernel for a free loopback port. Another process could
// take it before the service binds; the probe before spawning then reports
// a port conflict instead of a bind error.
func FreePort() (int, error) {
	ln, err := listenFree()
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// listenFree holds a free loopback port until the listener is closed.
func listenFree() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot pick a free loopback port: %w", err)
	}
	return ln, nil
}

// errCommandNotFound says the service's program is not on this machine.
var errCommandNotFound = errors.New("command not found")

// resolveCommand returns the executable to run.
func (s *Spec) resolveCommand() (string, error) {
	cmd := s.Command
	if cmd == config.SelfCommand {
		cmd = s.Self
	}
	if strings.ContainsRune(cmd, os.PathSeparator) {
		st, err := os.Stat(cmd)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s is not an executable file", errCommandNotFound, filepath.Base(cmd))
		}
		return cmd, nil
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not in PATH", errCommandNotFound, cmd)
	}
	return p, nil
}
