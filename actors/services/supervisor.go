package services

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/ringbuf"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/messages"
)

// Errors a command can end with.
var (
	// ErrNotInstalled: start/restart of a service that is not installed.
	ErrNotInstalled = errors.New("service is not installed")
	// ErrNotInstallable: install found no program to run.
	ErrNotInstallable = errors.New("service cannot be installed here")
	// ErrBusy: uninstall of a service that is not stopped.
	ErrBusy = errors.New("service is running")
	// ErrClosed: the gateway is shutting down.
	ErrClosed = errors.New("services are shutting down")
)

// Timings internal to the state machine.
const (
	// A starting service is probed after 10 ms, then at doubling gaps up to
	// startProbeEvery (bounded by its health interval), so a fast sidecar
	// is running within milliseconds and a slow one costs few probes.
	startProbeFirst = 10 * time.Millisecond
	startProbeEvery = 100 * time.Millisecond
	// prespawnTimeout bounds the probe before a spawn (reference: 3 s).
	prespawnTimeout = 3 * time.Second
	// stopPollEvery is how often a stopping group is checked for members.
	stopPollEvery = 25 * time.Millisecond
	// killWait is how long the group may linger after SIGKILL before the
	// stop is declared done anyway (a member stuck in the kernel).
	killWait = 3 * time.Second
	// readerGrace bounds output readers after the group is gone.
	readerGrace = 2 * time.Second
)

// Commands (with a reply channel of capacity 1) and internal events.
type (
	result struct {
		status Status
		err    error
	}
	startCmd struct {
		reply    chan result
		explicit bool
	}
	stopCmd struct {
		reply   chan result
		closing bool
	}
	restartCmd   struct{ reply chan result }
	autoStartCmd struct {
		enabled bool
		reply   chan result
	}
	installCmd struct {
		install bool
		reply   chan result
	}
	prespawnDone struct {
		gen uint64
		res probeResult
	}
	healthTick struct{ gen uint64 }
	healthDone struct {
		gen uint64
		res probeResult
	}
	startDeadline struct{ gen uint64 }
	restartDue    struct{ gen uint64 }
	exited        struct {
		gen  uint64
		exit Exit
	}
	graceOver struct{ gen uint64 }
	stopPoll  struct{ gen uint64 }
)

// supervisor is the actor that owns one service: its process, health,
// restart policy and persisted choices. Every change publishes a new
// Status snapshot; nothing reads the fields below from outside.
type supervisor struct {
	m    *Manager
	h    *Handle
	spec *Spec
	self *actor.PID

	state     State
	health    Health
	gen       uint64
	proc      *child
	spawnedAt time.Time
	startedAt time.Time
	instance  string
	nonce     string // this start's nonce (config.ServiceNonceEnv); "" before the first spawn
	automatic bool   // the attempt is an automatic restart after a crash
	lastError string
	installed bool
	autoStart bool

	probes  probeState  // health checks
	crashes crashState  // crashes, restarts and their backoff
	ending  killState   // the end of the child and of the supervisor
	waiting waiters     // callers waiting on a start or stop
	timers  superTimers // the pending timers
}

// probeState is the health checking of the running child.
type probeState struct {
	healthFails  int
	lastHealthAt time.Time
	probing      bool
	startProbes  int
}

// crashState is the crash history and the restart policy's state.
type crashState struct {
	restarts    uint64
	consecutive int
	crashTimes  []time.Time
	gaveUp      bool
	nextRestart time.Time
	backoff     time.Duration
	lastExit    *Exit
	killReason  string // set when the supervisor kills a child it will count as crashed
}

// killState is how the current child is ending, and whether the
// supervisor is closing for good.
type killState struct {
	exitSeen bool
	killed   bool
	killedAt time.Time
	closing  bool
}

// waiters are the callers waiting for a start or a stop to finish.
type waiters struct {
	startWaiters []chan result
	stopWaiters  []chan result
	afterStop    []chan result
	pendingStart bool
}

// superTimers are the supervisor's timers, at most one of each pending.
type superTimers struct {
	tHealth, tDeadline, tRestart, tGrace, tPoll clock.Timer
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		s.self = ctx.Self()
		if s.h.resume.Swap(false) && s.installed && !s.m.closed.Load() {
			s.event("the supervisor was restarted after a failure; starting the service again")
			s.automatic = true
			s.begin()
		}
	case *actor.Restarting:
		s.abandon()
	case *actor.Stopping:
		s.stopTimers()
	case startCmd:
		s.onStart(m)
	case stopCmd:
		s.onStop(m)
	case restartCmd:
		s.onRestart(m)
	case autoStartCmd:
		s.onAutoStart(m)
	case installCmd:
		s.onInstall(m)
	case prespawnDone:
		s.onPrespawn(m)
	case healthTick:
		s.onHealthTick(m)
	case healthDone:
		s.onHealthDone(m)
	case startDeadline:
		s.onStartDeadline(m)
	case restartDue:
		s.onRestartDue(m)
	case exited:
		s.onExited(m)
	case graceOver:
		s.onGraceOver(m)
	case stopPoll:
		s.onStopPoll(m)
	}
}

// after schedules msg to this actor after d on the injected clock. The
// timer only sends: its goroutine never touches the supervisor.
func (s *supervisor) after(d time.Duration, msg any) clock.Timer {
	root, pid := s.m.root, s.self
	return s.m.clk.AfterFunc(d, func() { root.Send(pid, msg) })
}

func cancelTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

func (s *supervisor) stopTimers() {
	for _, t := range []*clock.Timer{&s.timers.tHealth, &s.timers.tDeadline, &s.timers.tRestart, &s.timers.tGrace, &s.timers.tPoll} {
		cancelTimer(t)
	}
}

func (s *supervisor) now() time.Time { return s.m.clk.Now() }

// bump starts a new attempt generation: events of earlier attempts (and
// of an earlier incarnation of this actor) are ignored from now on.
func (s *supervisor) bump() {
	s.gen++
	s.h.gen.Store(s.gen)
}

// abandon runs when this supervisor failed and is about to be replaced:
// the replacement cannot know the child, so the child's process group is
// killed now, timers are cancelled and every pending command is answered.
// Whether the service was wanted running is left in the handle.
func (s *supervisor) abandon() {
	s.stopTimers()
	s.bump() // the killed child's exit, and probes in flight, are now stale
	wanted := s.waiting.pendingStart || s.state == Starting || s.state == Running || (s.state == Error && !s.crashes.nextRestart.IsZero())
	if p := s.proc; p != nil {
		p.signalGroup(syscall.SIGKILL)
		p.closeReadersAfter(readerGrace)
		s.proc = nil
	}
	s.h.resume.Store(wanted && !s.ending.closing)
	s.event("the supervisor failed; killed the service's process group, a fresh supervisor takes over")
	if s.state != NotInstalled {
		s.state, s.health, s.startedAt, s.crashes.nextRestart = Stopped, Unknown, time.Time{}, time.Time{}
	}
	s.publish()
	failed := errors.New("the service's supervisor failed and was restarted; retry the command")
	s.replyAll(&s.waiting.startWaiters, failed)
	s.replyAll(&s.waiting.afterStop, failed)
	s.replyAll(&s.waiting.stopWaiters, nil) // the process is gone, as asked
}

// event records a supervisor line in the service's log, so the logs
// stream shows starts, exits and restarts next to the output.
func (s *supervisor) event(format string, args ...any) {
	s.h.logs.Push(ringbuf.Stream("supervisor"), fmt.Sprintf(format, args...), s.now())
}

func (s *supervisor) status() Status {
	st := Status{Tool: s.spec.Name, State: s.state, Health: s.health, Port: s.spec.Port,
		Instance: s.instance, Installed: s.installed, AutoStart: s.autoStart, Restarts: s.crashes.restarts,
		Crashes: len(s.crashes.crashTimes), ConsecutiveCrashes: s.crashes.consecutive, GaveUp: s.crashes.gaveUp, HealthFailures: s.probes.healthFails, LastExit: s.crashes.lastExit}
	if s.proc != nil {
		pid := s.proc.pid
		st.PID = &pid
	}
	if !s.startedAt.IsZero() {
		t := s.startedAt
		st.StartedAt = &t
	}
	if s.lastError != "" {
		e := s.lastError
		st.LastError = &e
	}
	if !s.crashes.nextRestart.IsZero() {
		t := s.crashes.nextRestart
		st.NextRestartAt = &t
		st.BackoffMs = s.crashes.backoff.Milliseconds()
	}
	if !s.probes.lastHealthAt.IsZero() {
		t := s.probes.lastHealthAt
		st.LastHealthAt = &t
	}
	return st
}

func (s *supervisor) publish() {
	st := s.status()
	s.h.snap.Store(&st)
}

func reply(ch chan result, st Status, err error) {
	if ch != nil {
		ch <- result{st, err}
	}
}

func (s *supervisor) replyAll(list *[]chan result, err error) {
	st := s.status()
	for _, ch := range *list {
		reply(ch, st, err)
	}
	*list = nil
}

// --- commands ---

// refuseCommand takes an operator's start or restart out of automatic
// mode and answers it with the error that refuses it (shutting down, not
// installed), reporting whether it did.
func (s *supervisor) refuseCommand(r chan result) bool {
	s.automatic = false
	switch {
	case s.ending.closing:
		reply(r, s.status(), ErrClosed)
		return true
	case !s.installed:
		reply(r, s.status(), ErrNotInstalled)
		return true
	}
	return false
}

func (s *supervisor) onStart(m startCmd) {
	if s.refuseCommand(m.reply) {
		return
	}
	switch s.state {
	case Running:
		reply(m.reply, s.status(), nil)
	case Starting:
		s.waiting.startWaiters = append(s.waiting.startWaiters, m.reply)
	case Stopping:
		s.waiting.pendingStart = true
		s.waiting.afterStop = append(s.waiting.afterStop, m.reply)
	default:
		if m.explicit {
			s.clearCrashes()
		}
		cancelTimer(&s.timers.tRestart)
		s.crashes.nextRestart, s.crashes.backoff = time.Time{}, 0
		if m.reply != nil {
			s.waiting.startWaiters = append(s.waiting.startWaiters, m.reply)
		}
		s.begin()
	}
}

// clearCrashes forgets the crash history: an explicit start is the
// operator saying "try again".
func (s *supervisor) clearCrashes() {
	s.crashes.gaveUp = false
	s.crashes.consecutive = 0
	s.crashes.crashTimes = nil
}

func (s *supervisor) onRestart(m restartCmd) {
	if s.refuseCommand(m.reply) {
		return
	}
	s.clearCrashes()
	switch {
	case s.state == Stopping:
		s.waiting.pendingStart = true
		s.waiting.afterStop = append(s.waiting.afterStop, m.reply)
	case s.proc != nil:
		s.waiting.pendingStart = true
		s.waiting.afterStop = append(s.waiting.afterStop, m.reply)
		s.replyAll(&s.waiting.startWaiters, errors.New("start superseded by restart"))
		s.beginStop()
	default:
		// Nothing of ours runs (stopped, error or probing): a fresh start.
		cancelTimer(&s.timers.tRestart)
		s.crashes.nextRestart, s.crashes.backoff = time.Time{}, 0
		s.replyAll(&s.waiting.startWaiters, errors.New("start superseded by restart"))
		s.waiting.startWaiters = append(s.waiting.startWaiters, m.reply)
		s.begin()
	}
}

func (s *supervisor) onStop(m stopCmd) {
	if m.closing {
		s.ending.closing = true
	}
	switch {
	case s.state == Stopping:
		s.waiting.stopWaiters = append(s.waiting.stopWaiters, m.reply)
	case s.proc != nil:
		s.waiting.stopWaiters = append(s.waiting.stopWaiters, m.reply)
		s.replyAll(&s.waiting.startWaiters, errors.New("start cancelled by stop"))
		s.beginStop()
	default:
		// Nothing of ours runs: a probe in flight is invalidated, a
		// pending restart is cancelled.
		s.bump()
		s.stopTimers()
		s.probes.probing = false
		s.instance = ""
		s.startedAt, s.crashes.nextRestart, s.crashes.backoff = time.Time{}, time.Time{}, 0
		s.health, s.probes.healthFails = Unknown, 0
		if s.state != NotInstalled {
			s.state = Stopped
			s.crashes.gaveUp = false
		}
		s.replyAll(&s.waiting.startWaiters, errors.New("start cancelled by stop"))
		s.publish()
		reply(m.reply, s.status(), nil)
	}
}

func (s *supervisor) onAutoStart(m autoStartCmd) {
	enabled := m.enabled
	if err := s.m.store.update(s.spec.Name, s.now(), func(st *serviceState) { st.AutoStart = &enabled }); err != nil {
		reply(m.reply, s.status(), err)
		return
	}
	s.autoStart = enabled
	s.publish()
	reply(m.reply, s.status(), nil)
}

func (s *supervisor) onInstall(m installCmd) {
	if !m.install {
		if s.state != Stopped && s.state != Error && s.state != NotInstalled {
			reply(m.reply, s.status(), ErrBusy)
			return
		}
		f := false
		if err := s.m.store.update(s.spec.Name, s.now(), func(st *serviceState) { st.Installed = &f }); err != nil {
			reply(m.reply, s.status(), err)
			return
		}
		s.bump()
		s.stopTimers()
		s.installed, s.state, s.crashes.nextRestart, s.crashes.backoff = false, NotInstalled, time.Time{}, 0
		s.clearCrashes()
		s.publish()
		reply(m.reply, s.status(), nil)
		return
	}
	if _, err := s.spec.resolveCommand(); err != nil {
		reply(m.reply, s.status(), fmt.Errorf("%w: %v; install the program and set services.%s.command to it", ErrNotInstallable, err, s.spec.Name))
		return
	}
	t := true
	if err := s.m.store.update(s.spec.Name, s.now(), func(st *serviceState) { st.Installed = &t }); err != nil {
		reply(m.reply, s.status(), err)
		return
	}
	s.installed = true
	if s.state == NotInstalled {
		s.state, s.lastError = Stopped, ""
	}
	s.publish()
	reply(m.reply, s.status(), nil)
}

// --- start ---

// begin starts an attempt: probe the port first, then spawn (or report a
// conflict).
func (s *supervisor) begin() {
	s.bump()
	s.state, s.health, s.lastError = Starting, Unknown, ""
	s.instance, s.probes.healthFails, s.startedAt = "", 0, time.Time{}
	s.publish()
	gen, spec, hc, root, pid := s.gen, s.spec, s.m.hc, s.m.root, s.self
	s.m.goProbe(func() {
		timeout := min(prespawnTimeout, spec.HealthTimeout)
		r := probe(s.m.ctx, hc, spec, timeout)
		if !r.ok && !r.inUse {
			r.inUse = portInUse(spec.Addr(), time.Second)
		}
		root.Send(pid, prespawnDone{gen, r})
	})
}

func (s *supervisor) onPrespawn(m prespawnDone) {
	if m.gen != s.gen || s.state != Starting {
		return
	}
	r := m.res
	if !r.ok && !r.inUse {
		s.spawn()
		return
	}
	// Whatever holds the port, the gateway did not start it in this
	// attempt: it is never adopted, however well it answers (a stranger
	// that binds a freed port and copies the health answer would receive
	// every prompt).
	msg := fmt.Sprintf("port conflict: 127.0.0.1:%d is already in use by a process this gateway did not start", s.spec.Port)
	switch {
	case r.ok:
		msg += fmt.Sprintf(" (it answers the health check as %s; the gateway adopts no process)", s.spec.Name)
	case r.detail != "":
		msg += " (" + r.detail + ")"
	}
	msg += "; stop that process or set services." + s.spec.Name + ".port to a free port, then start again"
	if s.automatic {
		// A restart after a crash: keep trying with backoff, the port may
		// come free again; the crash count still bounds it.
		s.crash(msg, 0)
		return
	}
	s.fail(msg)
}

// fail ends an attempt in Error without a restart (a problem a restart
// cannot fix: the port is taken, the program cannot be executed).
func (s *supervisor) fail(msg string) {
	s.state, s.health, s.lastError = Error, Unknown, msg
	s.event("%s", msg)
	s.publish()
	s.replyAll(&s.waiting.startWaiters, nil)
}

func (s *supervisor) spawn() {
	path, err := s.spec.resolveCommand()
	if err != nil {
		s.fail("cannot start " + s.spec.Name + ": " + sanitize.Message(err.Error(), "command not found"))
		return
	}
	if err := os.MkdirAll(s.spec.Dir, 0o700); err != nil {
		s.fail("cannot create the service directory: " + sanitize.Message(err.Error(), "permission denied"))
		return
	}
	gen, root, pid := s.gen, s.m.root, s.self
	s.nonce = newNonce()
	env := append(append(make([]string, 0, len(s.spec.Env)+1), s.spec.Env...), config.ServiceNonceEnv+"="+s.nonce)
	c, err := startChild(s.m.spawner, path, s.spec.Args, env, s.spec.Dir, s.h.logs, s.m.redact, s.m.clk, &s.m.wg,
		func(e Exit) { root.Send(pid, exited{gen, e}) })
	if err != nil {
		s.fail("cannot start " + s.spec.Name + ": " + sanitize.Message(err.Error(), "exec failed"))
		return
	}
	s.proc = c
	s.spawnedAt = s.now()
	s.startedAt = s.spawnedAt
	s.event("started pid %d on port %d", c.pid, s.spec.Port)
	s.timers.tDeadline = s.after(s.spec.StartTimeout, startDeadline{gen})
	s.probes.startProbes = 0
	s.timers.tHealth = s.after(s.startProbeDelay(), healthTick{gen})
	s.publish()
}

// --- health ---

func (s *supervisor) onHealthTick(m healthTick) {
	s.timers.tHealth = nil
	if m.gen != s.gen || (s.state != Starting && s.state != Running) || s.probes.probing {
		return
	}
	s.probes.probing = true
	gen, spec, hc, root, pid := s.gen, s.spec, s.m.hc, s.m.root, s.self
	nonce, pgid := s.nonce, 0
	if s.proc != nil {
		pgid = s.proc.pid
	}
	s.m.goProbe(func() {
		r := probe(s.m.ctx, hc, spec, spec.HealthTimeout)
		if r.ok {
			r = provesOwn(r, spec, nonce, pgid)
		}
		root.Send(pid, healthDone{gen, r})
	})
}

func (s *supervisor) onHealthDone(m healthDone) {
	if m.gen != s.gen {
		return
	}
	s.probes.probing = false
	s.probes.lastHealthAt = s.now()
	r := m.res
	switch s.state {
	case Starting:
		if r.ok {
			cancelTimer(&s.timers.tDeadline)
			s.state, s.health, s.probes.healthFails, s.instance = Running, Healthy, 0, r.instance
			s.event("healthy after %dms", s.now().Sub(s.spawnedAt).Milliseconds())
			s.timers.tHealth = s.after(s.spec.HealthInterval, healthTick{s.gen})
			s.publish()
			s.replyAll(&s.waiting.startWaiters, nil)
			return
		}
		s.timers.tHealth = s.after(s.startProbeDelay(), healthTick{s.gen})
	case Running:
		if r.ok {
			s.health, s.probes.healthFails = Healthy, 0
			s.publish()
		} else {
			s.probes.healthFails++
			if r.stranger {
				// Another process answers on the port: our child does not
				// serve it, and nothing may be sent there a moment longer.
				s.probes.healthFails = max(s.probes.healthFails, s.spec.HealthFailures)
			}
			if s.probes.healthFails >= s.spec.HealthFailures && s.health != Unhealthy {
				s.health = Unhealthy
				s.lastError = fmt.Sprintf("health check failed %d times in a row: %s", s.probes.healthFails, r.detail)
				s.event("%s", s.lastError)
				switch {
				case s.proc != nil && s.spec.Restart.Enabled:
					s.crashes.killReason = s.lastError
					s.proc.signalGroup(syscall.SIGKILL)
					s.publish()
					return // the exit restarts it
				}
			}
			s.publish()
		}
		s.timers.tHealth = s.after(s.spec.HealthInterval, healthTick{s.gen})
	}
}

// startProbeDelay is the gap before the next probe of a starting service.
func (s *supervisor) startProbeDelay() time.Duration {
	d := startProbeFirst << min(s.probes.startProbes, 4)
	s.probes.startProbes++
	return min(d, startProbeEvery, s.spec.HealthInterval)
}

func (s *supervisor) onStartDeadline(m startDeadline) {
	s.timers.tDeadline = nil
	if m.gen != s.gen || s.state != Starting || s.proc == nil {
		return
	}
	s.crashes.killReason = fmt.Sprintf("did not become healthy within %dms of starting", s.spec.StartTimeout.Milliseconds())
	s.proc.signalGroup(syscall.SIGKILL)
}

// --- exit and restart ---

func (s *supervisor) onExited(m exited) {
	if m.gen != s.gen || s.proc == nil {
		return
	}
	e := m.exit
	s.crashes.lastExit = &e
	if s.state == Stopping {
		s.ending.exitSeen = true
		s.event("pid %d exited (%s)", s.proc.pid, exitText(e))
		s.checkStopped()
		return
	}
	p := s.proc
	p.signalGroup(syscall.SIGKILL) // leave no grandchild behind
	p.closeReadersAfter(readerGrace)
	s.proc = nil
	cancelTimer(&s.timers.tHealth)
	cancelTimer(&s.timers.tDeadline)
	s.probes.probing = false
	reason := s.crashes.killReason
	s.crashes.killReason = ""
	if reason == "" {
		reason = exitText(e)
		if e.RanMs < FastCrash.Milliseconds() {
			reason = "Fast crash (" + reason + ")"
		} else {
			reason = "crashed (" + reason + ")"
		}
	}
	s.crash(reason, time.Duration(e.RanMs)*time.Millisecond)
}

func exitText(e Exit) string {
	switch {
	case e.Signal != "":
		return "killed by signal " + e.Signal
	case e.Code != nil:
		return "exited with code " + strconv.Itoa(*e.Code)
	case e.Error != "":
		return e.Error
	}
	return "exited with code unknown"
}

// crash applies the restart policy after an unexpected end of the child.
func (s *supervisor) crash(reason string, ran time.Duration) {
	now := s.now()
	s.health, s.probes.healthFails, s.startedAt = Unknown, 0, time.Time{}
	rp := s.spec.Restart
	if ran >= rp.StableAfter {
		s.crashes.consecutive = 0 // a stable run earns a fresh backoff
	}
	s.crashes.consecutive++
	kept := s.crashes.crashTimes[:0]
	for _, t := range s.crashes.crashTimes {
		if now.Sub(t) < rp.Window {
			kept = append(kept, t)
		}
	}
	s.crashes.crashTimes = append(kept, now)
	s.state, s.lastError = Error, reason
	switch {
	case s.ending.closing || !rp.Enabled:
		s.event("%s", reason)
	case len(s.crashes.crashTimes) > rp.MaxCrashes:
		s.crashes.gaveUp = true
		s.lastError = fmt.Sprintf("gave up after %d crashes within %ds (last: %s); fix the service, then POST /api/services/%s/start",
			len(s.crashes.crashTimes), int(rp.Window/time.Second), reason, s.spec.Name)
		s.event("%s", s.lastError)
	default:
		d := s.backoffFor(s.crashes.consecutive)
		s.crashes.backoff, s.crashes.nextRestart = d, now.Add(d)
		s.event("%s; restarting in %dms (crash %d of at most %d within %ds)", reason, d.Milliseconds(), len(s.crashes.crashTimes), rp.MaxCrashes, int(rp.Window/time.Second))
		s.timers.tRestart = s.after(d, restartDue{s.gen})
	}
	s.publish()
	s.replyAll(&s.waiting.startWaiters, nil)
}

// backoffFor is the delay before the restart after the n-th consecutive
// crash (RestartPolicy.backoff).
func (s *supervisor) backoffFor(n int) time.Duration {
	return s.spec.Restart.backoff().Delay(n, s.m.rand())
}

func (s *supervisor) onRestartDue(m restartDue) {
	s.timers.tRestart = nil
	if m.gen != s.gen || s.state != Error || s.crashes.gaveUp || s.ending.closing {
		return
	}
	s.crashes.restarts++
	s.crashes.nextRestart, s.crashes.backoff = time.Time{}, 0
	s.automatic = true
	s.begin()
}

// --- stop ---

func (s *supervisor) beginStop() {
	cancelTimer(&s.timers.tHealth)
	cancelTimer(&s.timers.tDeadline)
	cancelTimer(&s.timers.tRestart)
	s.probes.probing = false
	s.state = Stopping
	s.ending.exitSeen, s.ending.killed = false, false
	s.proc.signalGroup(syscall.SIGTERM)
	s.event("stopping pid %d (SIGTERM to its process group, SIGKILL after %dms)", s.proc.pid, s.spec.StopTimeout.Milliseconds())
	s.timers.tGrace = s.after(s.spec.StopTimeout, graceOver{s.gen})
	s.timers.tPoll = s.after(stopPollEvery, stopPoll{s.gen})
	s.publish()
}

func (s *supervisor) onGraceOver(m graceOver) {
	s.timers.tGrace = nil
	if m.gen != s.gen || s.state != Stopping || s.proc == nil {
		return
	}
	s.ending.killed, s.ending.killedAt = true, s.now()
	s.event("still running %dms after SIGTERM; sending SIGKILL to the process group", s.spec.StopTimeout.Milliseconds())
	s.proc.signalGroup(syscall.SIGKILL)
}

func (s *supervisor) onStopPoll(m stopPoll) {
	s.timers.tPoll = nil
	if m.gen != s.gen || s.state != Stopping {
		return
	}
	if s.ending.exitSeen {
		s.checkStopped()
	}
	if s.state == Stopping {
		s.timers.tPoll = s.after(stopPollEvery, stopPoll{s.gen})
	}
}

// checkStopped finishes a stop once the child has exited and no member of
// its process group is left (or the group outlived SIGKILL by killWait).
func (s *supervisor) checkStopped() {
	p := s.proc
	if p.groupAlive() {
		if !s.ending.killed || s.now().Sub(s.ending.killedAt) < killWait {
			return
		}
		s.event("process group %d still has members %dms after SIGKILL; giving up on it", p.pid, killWait.Milliseconds())
	}
	p.closeReadersAfter(readerGrace)
	s.proc = nil
	cancelTimer(&s.timers.tGrace)
	cancelTimer(&s.timers.tPoll)
	s.state, s.health, s.probes.healthFails = Stopped, Unknown, 0
	s.startedAt, s.instance = time.Time{}, ""
	if s.ending.killed {
		s.lastError = fmt.Sprintf("did not stop within %dms of SIGTERM and was killed", s.spec.StopTimeout.Milliseconds())
	}
	s.event("stopped")
	s.publish()
	s.replyAll(&s.waiting.stopWaiters, nil)
	if s.waiting.pendingStart && !s.ending.closing {
		s.waiting.pendingStart = false
		s.waiting.startWaiters = append(s.waiting.startWaiters, s.waiting.afterStop...)
		s.waiting.afterStop = nil
		s.begin()
		return
	}
	s.waiting.pendingStart = false
	s.replyAll(&s.waiting.afterStop, ErrClosed)
}
