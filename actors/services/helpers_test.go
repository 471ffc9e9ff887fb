package services

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) {
	svctest.RunIfChild() // the supervisor spawns this binary as its services
	testutil.VerifyTestMain(m)
}

// svc returns the config of a helper service in mode, with short health
// intervals; mutate adjusts it. newEnv gives each service its own name as
// identity, so one service can never pass for another.
func svc(mode string, mutate func(*config.ServiceConfig)) config.ServiceConfig {
	c := config.ServiceConfig{
		Command: config.SelfCommand,
		Env: map[string]string{svctest.ModeEnv: mode, svctest.AddrEnv: "{addr}", svctest.NameEnv: "svctest",
			"GORACE": "atexit_sleep_ms=0"}, // a -race child otherwise sleeps 1 s at exit
		HealthPath:       "/health",
		Identity:         "svctest",
		HealthIntervalMs: 100,
		StartTimeoutMs:   10_000, // generous: a -race child can be slow to start on a loaded machine
		StopTimeoutMs:    2000,
	}
	if mutate != nil {
		mutate(&c)
	}
	return c
}

type env struct {
	t      *testing.T
	m      *Manager
	system *actor.ActorSystem
	dir    string
	closed bool
}

func newEnv(t *testing.T, services map[string]config.ServiceConfig, o Options) *env {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	for name, c := range services {
		if c.Identity == "svctest" {
			env := map[string]string{}
			for k, v := range c.Env {
				env[k] = v
			}
			env[svctest.NameEnv], c.Identity, c.Env = name, name, env
			services[name] = c
		}
	}
	specs, err := FromConfig(services, BuildOptions{DataDir: o.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	system := testutil.NewActorSystem()
	m, err := Start(system, specs, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, m: m, system: system, dir: o.DataDir}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.closed {
		return
	}
	e.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.m.Close(ctx)
	e.system.Shutdown()
}

// oneServing is an env of one service, name, that serves its health path
// (svctest.Serve), with default options, and that service's handle.
func oneServing(t *testing.T, name string) (*env, *Handle) {
	t.Helper()
	e := newEnv(t, map[string]config.ServiceConfig{name: svc(svctest.Serve, nil)}, Options{})
	return e, e.get(name)
}

func (e *env) get(name string) *Handle {
	h, ok := e.m.Get(name)
	if !ok {
		e.t.Fatalf("no service %s", name)
	}
	return h
}

func ctx10(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitLimit bounds every wait of these tests. It is generous on purpose:
// it is not a speed requirement, and a -race child on a loaded two-core
// machine can take seconds to start or to answer one health check.
const waitLimit = 30 * time.Second

// waitStatus polls until cond holds for h's status (waitLimit).
func waitStatus(t *testing.T, h *Handle, what string, cond func(Status) bool) Status {
	t.Helper()
	return pollStatus(t, h, "waiting for "+what, cond, 5*time.Millisecond, nil)
}

// pollStatus reads h's status every pause until cond holds, failing the
// test (doing what) after waitLimit; between reads, step (if any) is given
// the status that did not do.
func pollStatus(t *testing.T, h *Handle, what string, cond func(Status) bool, pause time.Duration, step func(Status)) Status {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		st := h.Status()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out %s; status %+v", what, st)
		}
		if step != nil {
			step(st)
		}
		time.Sleep(pause)
	}
}

// waitLog waits for a log line starting with s and returns it.
func waitLog(t *testing.T, h *Handle, s string) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, l := range h.Logs().Tail(1000, s) {
			if strings.HasPrefix(l.Line, s) {
				return l.Line
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line containing %q; have %+v", s, h.Logs().Tail(50, ""))
	return ""
}

// fakeTimers is the supervisors' clock in these tests: a clock.Fake,
// so that backoff, deadlines and crash windows move together, that also
// records every delay asked of it.
type fakeTimers struct {
	*clock.Fake
	mu    sync.Mutex
	asked []time.Duration
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{Fake: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
}

func (ft *fakeTimers) AfterFunc(d time.Duration, f func()) clock.Timer {
	ft.mu.Lock()
	ft.asked = append(ft.asked, d)
	ft.mu.Unlock()
	return ft.Fake.AfterFunc(d, f)
}

// askedFor returns nil when the delays in ms were asked of the timers in
// this order (other delays may come between), else every delay asked.
func (ft *fakeTimers) askedFor(ms []int64) []time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	i := 0
	for _, d := range ft.asked {
		if i < len(ms) && d == time.Duration(ms[i])*time.Millisecond {
			i++
		}
	}
	if i == len(ms) {
		return nil
	}
	return append([]time.Duration(nil), ft.asked...)
}

// advanceNext fires the earliest pending timer if it is due within limit,
// moving the clock to exactly its time, and reports whether it did.
// Timers further off (a start deadline, the next health interval) are left
// alone.
func (ft *fakeTimers) advanceNext(limit time.Duration) bool {
	in, ok := ft.Next()
	if !ok || in > limit {
		return false
	}
	ft.Advance(max(in, 0))
	return true
}

// drive moves the fake clock until cond holds for h (waitLimit of wall
// time), and only as far as a start needs on any machine: it fires the
// next timer due within the given span (a restart's backoff, the next start probe),
// never while a starting child has not yet said it listens, and never
// while a probe is in flight (no short timer is pending then). Stepping the
// clock on every poll instead made the fake time a start took grow with
// the wall time a -race child needs on a loaded machine: seconds of it
// turned a fast crash into a plain one and could even reach stable_after.
// The ready line ("svctest ready on", printed once the child listens) is
// told apart from earlier children's by its sequence number.
func (ft *fakeTimers) drive(t *testing.T, h *Handle, within time.Duration, what string, cond func(Status) bool) Status {
	t.Helper()
	seenReady := lastReadySeq(h)
	return pollStatus(t, h, "driving to "+what, cond, 3*time.Millisecond, func(st Status) {
		if st.State != Starting || lastReadySeq(h) > seenReady {
			ft.advanceNext(within)
		}
	})
}

// lastReadySeq is the sequence number of the newest "svctest ready on"
// line in h's logs, 0 if none.
func lastReadySeq(h *Handle) uint64 {
	l := h.Logs().Tail(1, "svctest ready on")
	if len(l) == 0 {
		return 0
	}
	return l[0].Seq
}

// startHelper runs the helper service in mode outside any supervisor, on
// addr, and returns it with its instance id once it is ready.
func startHelper(t *testing.T, mode, addr, name string) (*exec.Cmd, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), svctest.ModeEnv+"="+mode, svctest.AddrEnv+"="+addr, svctest.NameEnv+"="+name, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, inst, ok := strings.Cut(sc.Text(), " instance "); ok && strings.HasPrefix(sc.Text(), "svctest ready") {
			go io.Copy(io.Discard, out) //nolint:errcheck
			return cmd, inst
		}
	}
	t.Fatal("helper did not become ready")
	return nil, ""
}
