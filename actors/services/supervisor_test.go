package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
)

func TestStartToHealthyThenStop(t *testing.T) {
	_, h := oneServing(t, "api")
	if st := h.Status(); st.State != Stopped || st.Health != Unknown || st.PID != nil || !st.Installed {
		t.Fatalf("initial status %+v", st)
	}
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running || st.Health != Healthy || st.PID == nil || st.Adopted || st.StartedAt == nil || st.Instance == "" {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	pid := *st.PID
	if !processAlive(pid) {
		t.Fatal("child not running")
	}
	// Output reaches the ring with its stream; the supervisor's own events too.
	waitLog(t, h, "svctest ready on 127.0.0.1:"+strconv.Itoa(st.Port))
	if l := h.Logs().Tail(100, "starting pid"); len(l) == 0 || l[0].Stream != "stderr" {
		t.Fatalf("stderr line: %+v", l)
	}
	waitLog(t, h, fmt.Sprintf("started pid %d", pid))
	// Health checks keep running at the interval.
	first := st.LastHealthAt
	waitStatus(t, h, "a later health check", func(s Status) bool { return s.LastHealthAt != nil && s.LastHealthAt.After(*first) })
	// Starting again is a no-op.
	if again, err := h.Start(ctx10(t)); err != nil || *again.PID != pid {
		t.Fatalf("second start: %v %+v", err, again)
	}
	st, err = h.Stop(ctx10(t))
	if err != nil || st.State != Stopped || st.PID != nil || st.Health != Unknown || st.LastError != nil {
		t.Fatalf("stop: %v %+v", err, st)
	}
	if processAlive(pid) {
		t.Fatal("child survived stop")
	}
	waitLog(t, h, "svctest got SIGTERM")
	if st, err := h.Stop(ctx10(t)); err != nil || st.State != Stopped {
		t.Fatalf("idempotent stop: %v %+v", err, st)
	}
}

func TestCrashLoopBacksOffThenGivesUp(t *testing.T) {
	ft := newFakeTimers()
	e := newEnv(t, map[string]config.ServiceConfig{"crashy": svc(svctest.Crash, func(c *config.ServiceConfig) {
		c.HealthIntervalMs = 10_000
		c.Restart = config.RestartConfig{InitialBackoffMs: 100, MaxBackoffMs: 400, MaxCrashes: 4, CrashWindowMs: 60_000}
	})}, Options{Clock: ft, Rand: func() float64 { return 0 }})
	h := e.get("crashy")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Error || st.LastError == nil || *st.LastError != "Fast crash (exited with code 3)" {
		t.Fatalf("first crash: %v %+v", err, st)
	}
	var backoffs []int64
	for crash := 1; ; crash++ {
		st = waitStatus(t, h, fmt.Sprintf("crash %d handled", crash), func(s Status) bool {
			return s.Crashes == crash && s.State == Error && (s.NextRestartAt != nil || s.GaveUp)
		})
		if st.GaveUp {
			break
		}
		if st.ConsecutiveCrashes != crash || st.Restarts != uint64(crash-1) {
			t.Fatalf("crash %d: %+v", crash, st)
		}
		backoffs = append(backoffs, st.BackoffMs)
		ft.Advance(time.Duration(st.BackoffMs) * time.Millisecond)
	}
	if fmt.Sprint(backoffs) != "[100 200 400 400]" {
		t.Fatalf("backoffs %v; want doubling from 100 ms capped at 400 ms", backoffs)
	}
	if st.Crashes != 5 || st.NextRestartAt != nil || !strings.Contains(*st.LastError, "gave up after 5 crashes within 60s") ||
		!strings.Contains(*st.LastError, "POST /api/services/crashy/start") {
		t.Fatalf("give-up status %+v", st)
	}
	// Every backoff was a delay asked of the injected timers, never a wait
	// on the wall clock.
	if asked := ft.askedFor(backoffs); asked != nil {
		t.Fatalf("backoffs %v were not all asked of the timers (asked %v)", backoffs, asked)
	}
	// No restart is pending any more, however long we wait.
	if n := ft.Pending(); n != 0 {
		t.Fatalf("%d timers still pending after giving up", n)
	}
	ft.Advance(time.Hour)
	if now := h.Status(); now.Restarts != 4 || now.State != Error || !now.GaveUp {
		t.Fatalf("restarted after giving up: %+v", now)
	}
	waitLog(t, h, "gave up after 5 crashes")
	// An explicit start clears the give-up and the crash history.
	st, err = h.Start(ctx10(t))
	if err != nil || st.GaveUp || st.Crashes != 1 || st.ConsecutiveCrashes != 1 || st.BackoffMs != 100 {
		t.Fatalf("start after give-up: %v %+v", err, st)
	}
	if st, _ := h.Stop(ctx10(t)); st.State != Stopped || st.NextRestartAt != nil {
		t.Fatalf("stop cancels the pending restart: %+v", st)
	}
}

func TestBackoffGrowsIsJitteredAndCapped(t *testing.T) {
	for _, tc := range []struct {
		rand float64
		want []float64
	}{
		{0, []float64{100, 200, 400, 800, 1000, 1000, 1000}},
		{0.5, []float64{87.5, 175, 350, 700, 875, 875, 875}},
		{0.999999, []float64{75, 150, 300, 600, 750, 750, 750}},
	} {
		s := &supervisor{m: &Manager{rand: func() float64 { return tc.rand }},
			spec: &Spec{Restart: RestartPolicy{Initial: 100 * time.Millisecond, Max: time.Second}}}
		for n, w := range tc.want {
			got := s.backoffFor(n + 1)
			want := time.Duration(w * float64(time.Millisecond))
			if got < want-time.Millisecond/10 || got > want+time.Millisecond/10 {
				t.Errorf("rand %v crash %d: backoff %s; want %s", tc.rand, n+1, got, want)
			}
			if got > time.Second {
				t.Errorf("backoff %s above the cap", got)
			}
		}
	}
}

func TestStableRunResetsBackoff(t *testing.T) {
	ft := newFakeTimers()
	e := newEnv(t, map[string]config.ServiceConfig{"api": svc(svctest.Serve, func(c *config.ServiceConfig) {
		c.HealthIntervalMs = 20_000
		// The fake clock runs far faster than the wall clock: a start
		// deadline it could reach while a -race child is still starting
		// would count a crash the test did not cause.
		c.StartTimeoutMs = 3_600_000
		c.Restart = config.RestartConfig{InitialBackoffMs: 100, MaxBackoffMs: 10_000, StableAfterMs: 60_000, MaxCrashes: 10, CrashWindowMs: 600_000}
	})}, Options{Clock: ft, Rand: func() float64 { return 0 }})
	h := e.get("api")
	h.m.root.Send(h.pid, startCmd{explicit: true})
	running := func(s Status) bool { return s.State == Running && s.Health == Healthy }
	st := ft.drive(t, h, time.Second, "running", running)
	kill := func(st Status) Status {
		t.Helper()
		pid := *st.PID
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return waitStatus(t, h, "crash noticed", func(s Status) bool { return s.State == Error && s.NextRestartAt != nil })
	}
	// Two quick crashes: the backoff doubles.
	for i, want := range []int64{100, 200} {
		st = kill(st)
		if st.BackoffMs != want || st.ConsecutiveCrashes != i+1 || *st.LastError != "Fast crash (killed by signal killed)" {
			t.Fatalf("crash %d: %q %+v", i+1, *st.LastError, st)
		}
		st = ft.drive(t, h, time.Second, "running again", running)
	}
	// A run longer than stable_after_ms earns a fresh backoff.
	// The advance fires a health check; the kill waits for its answer. A
	// check still in flight when the child dies finds the port held by no
	// member of the child's group and reports a stranger, and that verdict,
	// not the kill, would become the crash's reason.
	ft.Advance(61 * time.Second)
	checked := ft.Now()
	st = kill(waitStatus(t, h, "the stable run's health check answered", func(s Status) bool {
		return running(s) && s.LastHealthAt != nil && !s.LastHealthAt.Before(checked)
	}))
	if st.BackoffMs != 100 || st.ConsecutiveCrashes != 1 || st.Crashes != 3 || *st.LastError != "crashed (killed by signal killed)" {
		t.Fatalf("after a stable run: %q %+v", *st.LastError, st)
	}
	if st.Restarts != 2 {
		t.Fatalf("restarts %d; want 2", st.Restarts)
	}
}

func TestStopKillsGrandchildren(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"forker": svc(svctest.Grandchild, nil)}, Options{})
	h := e.get("forker")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	line := waitLog(t, h, "grandchild ")
	gpid, err := strconv.Atoi(strings.TrimPrefix(line, "grandchild "))
	if err != nil || !processAlive(gpid) {
		t.Fatalf("grandchild %q not running: %v", line, err)
	}
	if st, err := h.Stop(ctx10(t)); err != nil || st.State != Stopped {
		t.Fatalf("stop: %v %+v", err, st)
	}
	if processAlive(gpid) || processAlive(*st.PID) {
		t.Fatalf("grandchild %d or child %d survived the stop", gpid, *st.PID)
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"stubborn": svc(svctest.IgnoreTerm, func(c *config.ServiceConfig) { c.StopTimeoutMs = 300 })}, Options{})
	h := e.get("stubborn")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	pid := *st.PID
	began := time.Now()
	st, err = h.Stop(ctx10(t))
	if err != nil || st.State != Stopped || st.LastError == nil || !strings.Contains(*st.LastError, "did not stop within 300ms of SIGTERM and was killed") {
		t.Fatalf("stop: %v %+v", err, st)
	}
	if time.Since(began) < 300*time.Millisecond || processAlive(pid) {
		t.Fatal("SIGKILL came before the grace period, or did not kill")
	}
	if st.LastExit == nil || st.LastExit.Signal != "killed" {
		t.Fatalf("last exit %+v", st.LastExit)
	}
}

// TestLookalikeIsNeverAdopted is finding 4: a process that answers the
// health check with the right identity was adopted and sent every prompt.
// Anything the gateway did not start itself is a port conflict, and it is
// not signalled.
func TestLookalikeIsNeverAdopted(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := startHelper(t, svctest.Serve, "127.0.0.1:"+strconv.Itoa(port), "api")
	e := newEnv(t, map[string]config.ServiceConfig{"api": svc(svctest.Serve, func(c *config.ServiceConfig) { c.Port = port })}, Options{})
	h := e.get("api")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Error || st.Adopted || st.PID != nil || st.LastError == nil ||
		!strings.Contains(*st.LastError, "already in use by a process this gateway did not start") || !strings.Contains(*st.LastError, "adopts no process") {
		t.Fatalf("start over a look-alike: %v %+v %v", err, st, st.LastError)
	}
	if st.NextRestartAt != nil {
		t.Fatal("an explicit start's conflict must not be retried automatically")
	}
	if !processAlive(other.Process.Pid) {
		t.Fatal("the supervisor signalled a process it did not start")
	}
}

// TestStrangerAfterCrashIsNotAdopted is finding 4's attack: after the
// supervised child crashed, a local process bound the freed port,
// answered the identity string, was adopted and received every prompt;
// when it exited the service stayed in error for good. Now the restart
// meets a port conflict, counts it as a failed restart and keeps trying
// with backoff; once the port is free the supervisor's own child runs
// again.
func TestStrangerAfterCrashIsNotAdopted(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"api": svc(svctest.Serve, func(c *config.ServiceConfig) {
		c.Restart.InitialBackoffMs = 200
		c.Restart.MaxBackoffMs = 200
		c.Restart.MaxCrashes = 50
	})}, Options{})
	h := e.get("api")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running || st.PID == nil {
		t.Fatalf("start: %v %+v", err, st)
	}
	first := *st.PID
	addr := h.Addr()
	_ = syscall.Kill(first, syscall.SIGKILL) // the crash
	// The stranger takes the port as soon as it is free, and answers as
	// the service would (its identity, an instance, a made-up nonce).
	var ln net.Listener
	deadline := time.Now().Add(5 * time.Second)
	for ln == nil {
		if l, err := net.Listen("tcp", addr); err == nil {
			ln = l
		} else if time.Now().After(deadline) {
			t.Fatalf("the port never came free: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	var prompts atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			prompts.Add(1)
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"service": "api", "instance": "stranger", "nonce": "guessed"})
	})}
	go srv.Serve(ln) //nolint:errcheck
	st = waitStatus(t, h, "a restart to meet the stranger", func(st Status) bool {
		return st.Restarts >= 2 && st.LastError != nil && strings.Contains(*st.LastError, "port conflict")
	})
	if st.State == Running || st.Adopted || st.PID != nil || st.NextRestartAt == nil {
		t.Fatalf("the stranger was taken for the service: %+v", st)
	}
	srv.Close()
	st = waitStatus(t, h, "the supervisor's own child to run again", func(st Status) bool { return st.State == Running })
	if st.PID == nil || *st.PID == first || st.Instance == "stranger" || prompts.Load() != 0 {
		t.Fatalf("after the port came free: %+v (the stranger got %d requests)", st, prompts.Load())
	}
}

// TestChildWithoutNonceProvesItselfBySocket: a sidecar that does not echo
// the nonce (a third-party program) is still recognised as the child the
// supervisor spawned, because the listening socket belongs to its process
// group; a listener of another process group is not.
func TestChildWithoutNonceProvesItselfBySocket(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"plain": svc(svctest.Serve, func(c *config.ServiceConfig) { c.Env[svctest.HideNonceEnv] = "1" })}, Options{})
	st, err := e.get("plain").Start(ctx10(t))
	if err != nil || st.State != Running || st.PID == nil {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	port := e.get("plain").Spec().Port
	if owned, known := listenerOwnedByGroup(port, *st.PID); !known || !owned {
		t.Fatalf("the child's own listener: owned %v known %v", owned, known)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if owned, known := listenerOwnedByGroup(ln.Addr().(*net.TCPAddr).Port, *st.PID); !known || owned {
		t.Fatalf("the test's listener counted as the child's: owned %v known %v", owned, known)
	}
	r := provesOwn(probeResult{ok: true, nonce: "someone-else"}, &Spec{Port: port}, "ours", *st.PID)
	if r.ok || !r.stranger {
		t.Fatalf("a foreign nonce was accepted: %+v", r)
	}
}

// TestChildOutputIsRedacted: a sidecar that prints a key does not put it
// in the log ring the logs API serves.
func TestChildOutputIsRedacted(t *testing.T) {
	_, h := oneServing(t, "api")
	if st, err := h.Start(ctx10(t)); err != nil || st.State != Running {
		t.Fatalf("start: %v %+v", err, st)
	}
	resp, err := http.Post("http://"+h.Addr()+"/emit?line="+url.QueryEscape("using Authorization: Bearer sk-live-0123456789abcdef"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line := waitLog(t, h, "using Authorization")
	if strings.Contains(line, "0123456789abcdef") || !strings.Contains(line, "[REDACTED]") {
		t.Fatalf("log line %q", line)
	}
}

// TestFromConfigPicksDistinctPorts: services with port 0 never share a
// port (each was freed before the next was picked, so the kernel could
// hand the same one out twice).
func TestFromConfigPicksDistinctPorts(t *testing.T) {
	cfg := map[string]config.ServiceConfig{}
	for i := 0; i < 64; i++ {
		cfg["s"+strconv.Itoa(i)] = svc(svctest.Serve, nil)
	}
	specs, err := FromConfig(cfg, BuildOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, sp := range specs {
		if o, dup := seen[sp.Port]; dup {
			t.Fatalf("%s and %s share port %d", o, sp.Name, sp.Port)
		}
		seen[sp.Port] = sp.Name
	}
}

func TestStrangerOnPortIsConflict(t *testing.T) {
	cases := []struct {
		name    string
		serve   func(net.Listener)
		wantMsg string
	}{
		{"raw tcp", func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}, "port conflict"},
		{"wrong identity", func(ln net.Listener) {
			_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"service": "someone-else"})
			}))
		}, `identifies itself as "someone-else", not "api"`},
		{"http error", func(ln net.Listener) {
			_ = http.Serve(ln, http.NotFoundHandler())
		}, "health check answered HTTP 404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { tc.serve(ln); close(done) }()
			defer func() { ln.Close(); <-done }()
			port := ln.Addr().(*net.TCPAddr).Port
			e := newEnv(t, map[string]config.ServiceConfig{"api": svc(svctest.Serve, func(c *config.ServiceConfig) { c.Port = port })}, Options{})
			h := e.get("api")
			st, err := h.Start(ctx10(t))
			if err != nil || st.State != Error || st.PID != nil || st.LastError == nil {
				t.Fatalf("start: %v %+v %v", err, st, st.LastError)
			}
			msg := *st.LastError
			if !strings.HasPrefix(msg, "port conflict: 127.0.0.1:"+strconv.Itoa(port)+" is already in use") || !strings.Contains(msg, tc.wantMsg) ||
				strings.Contains(msg, "EADDRINUSE") || strings.Contains(msg, "address already in use") {
				t.Fatalf("lastError %q", msg)
			}
			if st.NextRestartAt != nil {
				t.Fatal("a conflict must not be retried automatically")
			}
		})
	}
}

func TestNeverHealthyIsKilledAtTheDeadline(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"slow": svc(svctest.Unhealthy, func(c *config.ServiceConfig) {
		c.HealthIntervalMs = 50
		c.StartTimeoutMs = 300
		c.Restart.Policy = config.RestartNever
	})}, Options{})
	h := e.get("slow")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Error || st.LastError == nil || *st.LastError != "did not become healthy within 300ms of starting" {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	if st.LastExit == nil || st.LastExit.Signal != "killed" || st.NextRestartAt != nil {
		t.Fatalf("exit %+v", st)
	}
}

func TestFailedLivenessRestartsTheProcess(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"api": svc(svctest.Serve, func(c *config.ServiceConfig) {
		c.HealthIntervalMs = 50
		c.Restart.InitialBackoffMs = 10
	})}, Options{})
	h := e.get("api")
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running {
		t.Fatalf("start: %v %+v %v", err, st, st.LastError)
	}
	first := *st.PID
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Post("http://"+h.Addr()+"/sick", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	st = waitStatus(t, h, "restarted after failing its health checks", func(s Status) bool {
		return s.Restarts == 1 && s.State == Running && s.PID != nil && *s.PID != first
	})
	if processAlive(first) {
		t.Fatal("the unhealthy process was not killed")
	}
	waitLog(t, h, "health check failed 3 times in a row: health check answered HTTP 503")
}

func TestStatePersistsAcrossManagers(t *testing.T) {
	dir := t.TempDir()
	cfg := map[string]config.ServiceConfig{"api": svc(svctest.Serve, nil)}
	e := newEnv(t, cfg, Options{DataDir: dir})
	h := e.get("api")
	if st, err := h.SetAutoStart(ctx10(t), true); err != nil || !st.AutoStart {
		t.Fatalf("auto-start: %v %+v", err, st)
	}
	if st, err := h.Uninstall(ctx10(t)); err != nil || st.State != NotInstalled || st.Installed {
		t.Fatalf("uninstall: %v %+v", err, st)
	}
	if _, err := h.Start(ctx10(t)); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("start of an uninstalled service: %v", err)
	}
	if st, err := h.Stop(ctx10(t)); err != nil || st.State != NotInstalled {
		t.Fatalf("stop of an uninstalled service: %v %+v", err, st)
	}
	e.close()
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil || !strings.Contains(string(b), `"autoStart": true`) || !strings.Contains(string(b), `"installed": false`) {
		t.Fatalf("state file: %v %s", err, b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, StateFileName)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v", fi.Mode())
	}
	e2 := newEnv(t, cfg, Options{DataDir: dir})
	h2 := e2.get("api")
	if st := h2.Status(); st.State != NotInstalled || !st.AutoStart {
		t.Fatalf("reloaded status %+v", st)
	}
	if failed := e2.m.StartAuto(ctx10(t)); len(failed) != 0 || h2.Status().State != NotInstalled {
		t.Fatalf("auto-start of an uninstalled service: %+v", failed)
	}
	if st, err := h2.Install(ctx10(t)); err != nil || st.State != Stopped || !st.Installed {
		t.Fatalf("install: %v %+v", err, st)
	}
	if failed := e2.m.StartAuto(ctx10(t)); len(failed) != 0 || h2.Status().State != Running {
		t.Fatalf("auto-start: %+v %+v", failed, h2.Status())
	}
	if _, err := h2.Uninstall(ctx10(t)); !errors.Is(err, ErrBusy) {
		t.Fatalf("uninstall while running: %v", err)
	}
}

func TestMissingCommandIsNotInstalled(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{"ghost": {Command: "omniroute-no-such-program", HealthPath: "/health"}}, Options{})
	h := e.get("ghost")
	st := h.Status()
	if st.State != NotInstalled || st.LastError == nil || !strings.Contains(*st.LastError, `"omniroute-no-such-program" is not in PATH`) {
		t.Fatalf("status %+v", st)
	}
	if _, err := h.Install(ctx10(t)); !errors.Is(err, ErrNotInstallable) || !strings.Contains(err.Error(), "services.ghost.command") {
		t.Fatalf("install: %v", err)
	}
}

func TestCorruptStateFileStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(dir); err == nil || !strings.Contains(err.Error(), "is not valid JSON") || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("err %v", err)
	}
}

func TestCloseLeavesNoChild(t *testing.T) {
	e := newEnv(t, map[string]config.ServiceConfig{
		"forker":   svc(svctest.Grandchild, nil),
		"stubborn": svc(svctest.IgnoreTerm, func(c *config.ServiceConfig) { c.StopTimeoutMs = 200 }),
		"crashy":   svc(svctest.Crash, func(c *config.ServiceConfig) { c.Restart.InitialBackoffMs = 60_000 }),
	}, Options{})
	var pids []int
	for _, name := range []string{"forker", "stubborn"} {
		st, err := e.get(name).Start(ctx10(t))
		if err != nil || st.State != Running {
			t.Fatalf("%s: %v %+v", name, err, st)
		}
		pids = append(pids, *st.PID)
	}
	if st, _ := e.get("crashy").Start(ctx10(t)); st.NextRestartAt == nil {
		t.Fatalf("crashy should wait for a restart: %+v", st)
	}
	g, _ := strconv.Atoi(strings.TrimPrefix(waitLog(t, e.get("forker"), "grandchild "), "grandchild "))
	pids = append(pids, g)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.m.Close(ctx)
	for _, pid := range pids {
		if processAlive(pid) {
			t.Fatalf("pid %d survived Close", pid)
		}
	}
	if st := e.get("crashy").Status(); st.Restarts != 0 {
		t.Fatalf("crashy restarted during close: %+v", st)
	}
	if _, err := e.get("forker").Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after close: %v", err)
	}
}

func TestFromConfigExpandsAndIsolates(t *testing.T) {
	getenv := func(k string) (string, bool) {
		v, ok := map[string]string{"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-x", "OMNIROUTE_MANAGEMENT_KEY": "mk"}[k]
		return v, ok
	}
	specs, err := FromConfig(map[string]config.ServiceConfig{
		"bifrost": {Command: "bifrost", Args: []string{"-host", "{host}", "-port", "{port}", "-app-dir", "{data_dir}"},
			EnvPassthrough: []string{"OPENAI_API_KEY"}, Env: map[string]string{"LISTEN": "{addr}"}, HealthPath: "/v1/models"},
		"mock": {Command: "{self}", Port: 4321, HealthPath: "/h"},
	}, BuildOptions{Self: "/opt/omniroute", DataDir: "/data", Getenv: getenv, BaseEnv: getenv, Ports: map[string]int{"bifrost": 8089}})
	if err != nil {
		t.Fatal(err)
	}
	b, m := specs[0], specs[1]
	if b.Name != "bifrost" || b.Port != 8089 || strings.Join(b.Args, " ") != "-host 127.0.0.1 -port 8089 -app-dir /data/services/bifrost" {
		t.Fatalf("bifrost spec %+v", b)
	}
	if strings.Join(b.Env, " ") != "PATH=/usr/bin OPENAI_API_KEY=sk-x LISTEN=127.0.0.1:8089" {
		t.Fatalf("child env %q (the management key must not leak)", b.Env)
	}
	if b.HealthInterval != DefaultHealthInterval || b.StopTimeout != DefaultStopTimeout || b.HealthFailures != 3 || !b.Restart.Enabled || b.Restart.MaxCrashes != 5 {
		t.Fatalf("defaults %+v", b)
	}
	if m.Port != 4321 || m.Addr() != "127.0.0.1:4321" {
		t.Fatalf("mock spec %+v", m)
	}
	if p, err := m.resolveCommand(); err == nil || p != "" {
		t.Fatalf("/opt/omniroute should not resolve here: %q", p)
	}
}
