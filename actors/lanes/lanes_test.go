package lanes

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.LeakOptions()...) }

type env struct {
	t   testing.TB
	h   *Handle
	sys *actor.ActorSystem
	clk *clock.Fake
}

func start(t testing.TB, edit func(*admission.Config), caps ...int) *env {
	t.Helper()
	cfg := admission.DefaultConfig()
	cfg.Mode = admission.ModeEnforce
	cfg.MinLimit, cfg.InitialLimit = 4, 20
	if edit != nil {
		edit(&cfg)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Config: cfg, Clock: clk, ManualTicks: true, TargetCaps: caps})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, h: h, sys: sys, clk: clk}
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	return e
}

func id(s string) tenant.ID {
	var t tenant.ID
	copy(t[:], s)
	return t
}

// pending is an Acquire running in the background.
type pending struct {
	done  chan Reason
	lease Lease
}

func (e *env) acquireAsync(tn string, c admission.Class, cost int64, abort Aborter) *pending {
	p := &pending{done: make(chan Reason, 1)}
	go func() { p.done <- e.h.Acquire(Ticket{Tenant: id(tn), Class: c, Cost: cost, Abort: abort}, &p.lease) }()
	return p
}

func (e *env) acquire(tn string, c admission.Class, cost int64) (*Lease, Reason) {
	var l Lease
	r := e.h.Acquire(Ticket{Tenant: id(tn), Class: c, Cost: cost}, &l)
	return &l, r
}

func (p *pending) wait(t *testing.T) Reason {
	t.Helper()
	select {
	case r := <-p.done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("acquire did not finish")
		return 0
	}
}

func (p *pending) still(t *testing.T) {
	t.Helper()
	select {
	case r := <-p.done:
		t.Fatalf("acquire finished early with %q", r.Code())
	case <-time.After(20 * time.Millisecond):
	}
}

// until polls the snapshot until cond holds.
func (e *env) until(what string, cond func(*Snapshot) bool) *Snapshot {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.h.Sync()
		s := e.h.Snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; snapshot %+v", what, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var success = admission.Completion{Outcome: admission.Success, Latency: 50 * time.Millisecond, Sampled: true}

func TestEnforceAdmitsQueuesAndGrantsOnRelease(t *testing.T) {
	e := start(t, nil)
	var held []*Lease
	for i := 0; i < 4; i++ {
		l, r := e.acquire("a", admission.Interactive, 5)
		if r != None {
			t.Fatalf("acquire %d: %s", i, r.Code())
		}
		held = append(held, l)
	}
	p := e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("one queued", func(s *Snapshot) bool { return s.QueuedCount == 1 && s.QueuedCost == 5 })
	p.still(t)
	// A cheaper request would fit nowhere either, but must not bypass the queue.
	p2 := e.acquireAsync("c", admission.Interactive, 1, nil)
	e.until("two queued", func(s *Snapshot) bool { return s.QueuedCount == 2 })
	e.h.Release(held[0], success)
	if r := p.wait(t); r != None {
		t.Fatalf("queued request: %s", r.Code())
	}
	p2.still(t) // 20 of 20 held: the second waiter does not fit yet
	e.h.Release(held[1], success)
	if r := p2.wait(t); r != None {
		t.Fatalf("second queued request: %s", r.Code())
	}
	s := e.until("drained", func(s *Snapshot) bool { return s.QueuedCount == 0 })
	if s.ActiveCost != 16 || s.ActiveCount != 4 || s.AdmittedCount != 6 {
		t.Fatalf("snapshot %+v", s)
	}
	for _, l := range append(held[2:], &p.lease, &p2.lease) {
		e.h.Release(l, success)
	}
	e.until("all released", func(s *Snapshot) bool { return s.ActiveCost == 0 && s.ActiveCount == 0 })
}

func TestDeadlineQueueFullOversizedAndSolo(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MaxQueueCount = 2; c.DefaultMaxWaitMs = 1000 })
	l, _ := e.acquire("a", admission.Interactive, 20)
	p1 := e.acquireAsync("a", admission.Interactive, 3, nil)
	p2 := e.acquireAsync("a", admission.Interactive, 3, nil)
	e.until("two queued", func(s *Snapshot) bool { return s.QueuedCount == 2 })
	if _, r := e.acquire("a", admission.Interactive, 3); r != QueueFull {
		t.Fatalf("third: %q, want queue full", r.Code())
	}
	if _, r := e.acquire("a", admission.Interactive, 21); r != Oversized {
		t.Fatalf("oversized while busy: %q", r.Code())
	}
	e.clk.Advance(999 * time.Millisecond)
	e.h.Tick()
	p1.still(t)
	e.clk.Advance(time.Millisecond) // the exact deadline counts as expired
	e.h.Tick()
	if r := p1.wait(t); r != Deadline {
		t.Fatalf("p1: %q", r.Code())
	}
	if r := p2.wait(t); r != Deadline {
		t.Fatalf("p2: %q", r.Code())
	}
	e.h.Release(l, success)
	// Idle means nothing waiting either: the expired waiters leave the
	// gate's count when their lane drops them (it races the release).
	e.until("nothing queued", func(s *Snapshot) bool { return s.QueuedCount == 0 && s.ActiveCount == 0 })
	solo, r := e.acquire("a", admission.Interactive, 500)
	if r != None {
		t.Fatalf("solo progress on an idle system: %q", r.Code())
	}
	e.h.Release(solo, success)
	s := e.until("counted", func(s *Snapshot) bool { return s.RejectedCount == 4 })
	if s.RejectedByReason["admission_deadline"] != 2 || s.RejectedByReason["admission_queue_full"] != 1 || s.RejectedByReason["admission_oversized"] != 1 {
		t.Fatalf("reasons %v", s.RejectedByReason)
	}
	if st := e.h.gate.Stats(); st.Waiting != [admission.NumClasses]int64{} {
		t.Fatalf("waiters left in the gate: %+v", st)
	}
}

// fakeAbort is an Aborter the test fires by hand.
type fakeAbort struct {
	mu    sync.Mutex
	f     func()
	fired bool
}

func (a *fakeAbort) Notify(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fired {
		return false
	}
	a.f = f
	return true
}

func (a *fakeAbort) fire() {
	a.mu.Lock()
	a.fired = true
	f := a.f
	a.mu.Unlock()
	if f != nil {
		f()
	}
}

func TestClientGoneWhileQueuedIsNotAShed(t *testing.T) {
	e := start(t, nil)
	l, _ := e.acquire("a", admission.Interactive, 20)
	ab := &fakeAbort{}
	p := e.acquireAsync("b", admission.Interactive, 5, ab)
	e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	ab.fire()
	if r := p.wait(t); r != Aborted {
		t.Fatalf("aborted wait: %q", r.Code())
	}
	s := e.until("withdrawn", func(s *Snapshot) bool { return s.QueuedCount == 0 })
	if s.RejectedCount != 0 || s.AbortedCount != 1 {
		t.Fatalf("an abort counted as a shed: %+v", s)
	}
	// Already gone before queueing.
	ab2 := &fakeAbort{fired: true}
	if r := e.h.Acquire(Ticket{Tenant: id("b"), Class: admission.Interactive, Cost: 5, Abort: ab2}, &Lease{}); r != Aborted {
		t.Fatalf("pre-aborted: %q", r.Code())
	}
	e.h.Release(l, success)
	e.until("idle", func(s *Snapshot) bool { return s.ActiveCost == 0 })
	if st := e.h.gate.Stats(); st.Waiting != [admission.NumClasses]int64{} {
		t.Fatalf("waiters left: %+v", st)
	}
}

func TestVirtualLanesShareByCostNotArrivalOrder(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true })
	l, _ := e.acquire("x", admission.Interactive, 10)
	l2, _ := e.acquire("x", admission.Interactive, 10)
	// Tenant A queues four requests, then B one.
	var as []*pending
	for i := 0; i < 4; i++ {
		as = append(as, e.acquireAsync("a", admission.Interactive, 5, nil))
		e.until("a queued", func(s *Snapshot) bool { return s.LaneQueuedCount == int64(i+1) })
	}
	b := e.acquireAsync("b", admission.Interactive, 5, nil)
	s := e.until("b queued", func(s *Snapshot) bool { return s.LaneQueuedCount == 5 && s.LaneCount == 2 })
	if s.QueuedCount != 0 || len(s.LaneTenants) != 2 || s.LaneTenants[0].TenantKey != "a" || s.LaneTenants[0].QueuedCost != 20 {
		t.Fatalf("lane figures %+v", s)
	}
	// 10 of capacity frees: in arrival order A would get both; fairly, A's
	// first request and B's go, and A's backlog waits.
	e.h.Release(l, success)
	first := []Reason{as[0].wait(t), b.wait(t)}
	if first[0] != None || first[1] != None {
		t.Fatalf("%v", first)
	}
	s = e.until("a's backlog waits", func(s *Snapshot) bool { return s.LaneQueuedCount == 3 })
	for _, p := range as[1:] {
		p.still(t)
	}
	e.h.Release(&as[0].lease, success)
	e.h.Release(&b.lease, success)
	e.h.Release(l2, success)
	for _, p := range as[1:] {
		if r := p.wait(t); r != None {
			t.Fatalf("a: %q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
	_ = s
}

func TestLaneEvictionLRUAndIdle(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true; c.MaxLanes = 2 })
	l, _ := e.acquire("x", admission.Interactive, 20)
	pa := e.acquireAsync("a", admission.Interactive, 5, nil)
	e.until("a", func(s *Snapshot) bool { return s.LaneCount == 1 && s.LaneQueuedCount == 1 })
	e.clk.Advance(time.Millisecond)
	pb := e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b", func(s *Snapshot) bool { return s.LaneCount == 2 && s.LaneQueuedCount == 2 })
	e.clk.Advance(time.Millisecond)
	pc := e.acquireAsync("c", admission.Interactive, 5, nil)
	if r := pa.wait(t); r != LaneEvicted {
		t.Fatalf("least recently used lane: %q, want lane evicted", r.Code())
	}
	s := e.until("c", func(s *Snapshot) bool { return s.LaneCount == 2 && s.LaneQueuedCount == 2 })
	for _, lt := range s.LaneTenants {
		if lt.TenantKey == "a" {
			t.Fatalf("evicted lane still listed: %+v", s.LaneTenants)
		}
	}
	e.h.Release(l, success)
	for _, p := range []*pending{pb, pc} {
		if r := p.wait(t); r != None {
			t.Fatalf("%q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
	e.until("lanes empty", func(s *Snapshot) bool { return s.LaneQueuedCount == 0 && s.ActiveCost == 0 })
	e.clk.Advance(59 * time.Second)
	e.h.CloseWindow()
	if s := e.until("window", func(s *Snapshot) bool { return true }); s.LaneCount != 2 {
		t.Fatalf("evicted before 60 s idle: %d lanes", s.LaneCount)
	}
	e.clk.Advance(time.Second)
	e.h.CloseWindow()
	e.until("idle lanes evicted", func(s *Snapshot) bool { return s.LaneCount == 0 })
	// The tenant comes back: a new lane serves it.
	l, _ = e.acquire("x", admission.Interactive, 20)
	pb = e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b again", func(s *Snapshot) bool { return s.LaneCount == 1 })
	e.h.Release(l, success)
	if r := pb.wait(t); r != None {
		t.Fatalf("%q", r.Code())
	}
	e.h.Release(&pb.lease, success)
}

func TestStopRejectsQueuedWithShutdown(t *testing.T) {
	for _, lanesOn := range []bool{false, true} {
		e := start(t, func(c *admission.Config) { c.VirtualLanes = lanesOn })
		l, _ := e.acquire("a", admission.Interactive, 20)
		p := e.acquireAsync("b", admission.Interactive, 5, nil)
		e.until("queued", func(s *Snapshot) bool { return s.QueuedCount+s.LaneQueuedCount == 1 })
		e.h.Stop()
		if r := p.wait(t); r != Shutdown {
			t.Fatalf("lanes %v: queued at shutdown: %q", lanesOn, r.Code())
		}
		if _, r := e.acquire("a", admission.Interactive, 1); r != Shutdown {
			t.Fatalf("after stop: %q", r.Code())
		}
		e.h.Release(l, success) // harmless after stop
		if !e.h.Snapshot().Shutdown {
			t.Fatal("snapshot does not say shutdown")
		}
	}
}

func TestShadowAdmitsEverythingAndCountsWouldDecisions(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.Mode = admission.ModeShadow; c.MaxQueueCount = 1 })
	var ls []*Lease
	for i := 0; i < 7; i++ { // 4 fit, 1 would queue, 1 would be rejected (queue full), 1 oversized
		cost := int64(5)
		if i == 6 {
			cost = 50
		}
		l, r := e.acquire("a", admission.Interactive, cost)
		if r != None {
			t.Fatalf("shadow rejected: %q", r.Code())
		}
		ls = append(ls, l)
	}
	s := e.until("virtual queue", func(s *Snapshot) bool { return s.VirtualQueuedCount == 1 })
	if s.WouldAdmitCount != 4 || s.WouldQueueCount != 1 || s.WouldRejectCount != 2 || s.RejectedCount != 0 ||
		s.ActiveCost != 80 || s.VirtualActiveCost != 20 || s.AdmittedCount != 7 {
		t.Fatalf("shadow snapshot %+v", s)
	}
	e.h.Release(ls[0], success)
	s = e.until("promoted", func(s *Snapshot) bool { return s.VirtualQueuedCount == 0 && s.VirtualActiveCost == 20 })
	for _, l := range ls[1:] {
		e.h.Release(l, success)
	}
	e.until("released", func(s *Snapshot) bool { return s.ActiveCost == 0 && s.VirtualActiveCost == 0 })
}

func TestOffModeAdmitsWithoutAccounting(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.Mode = admission.ModeOff })
	for i := 0; i < 10; i++ {
		l, r := e.acquire("a", admission.Interactive, 100)
		if r != None || l.Held() {
			t.Fatalf("off: %q held=%v", r.Code(), l.Held())
		}
	}
	if s := e.h.Snapshot(); s.ActiveCost != 0 || s.AdmittedCount != 10 || s.Mode != "off" {
		t.Fatalf("%+v", s)
	}
}

func TestProbeSkipsAreCounted(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true }, 1)
	l, _ := e.acquire("a", admission.Interactive, 18)
	if r := e.h.Probe(admission.Interactive, 5, 0, true); r != admission.ProbeLanes {
		t.Fatalf("no room: %v", r)
	}
	if r := e.h.Probe(admission.Interactive, 2, 0, true); r != admission.ProbeOK {
		t.Fatalf("room: %v", r)
	}
	if r := e.h.Probe(admission.Interactive, 2, 0, true); r != admission.ProbeTarget {
		t.Fatalf("cap: %v", r)
	}
	e.h.ReleaseTarget(0)
	// A model's only target: the parent's lease covers it, only the cap applies.
	if r := e.h.Probe(admission.Interactive, 50, 0, false); r != admission.ProbeOK {
		t.Fatalf("single target: %v", r)
	}
	e.h.ReleaseTarget(0)
	s := e.h.Snapshot()
	if s.FanoutProbeSkipped != 1 || s.TargetBusySkipped != 1 || s.ActiveCost != 18 {
		t.Fatalf("%+v", s)
	}
	e.h.Release(l, success)
}

func TestLatencyAndDropsDriveTheLimit(t *testing.T) {
	e := start(t, nil)
	// A window of steady completions at high utilisation grows the limit.
	var ls []*Lease
	for i := 0; i < 3; i++ {
		l, _ := e.acquire("a", admission.Interactive, 5)
		ls = append(ls, l)
	}
	e.clk.Advance(900 * time.Millisecond)
	e.h.Tick()
	e.h.Sync()
	e.h.Release(ls[0], success)
	e.h.Sync()
	e.clk.Advance(100 * time.Millisecond)
	e.h.CloseWindow()
	s := e.until("grew", func(s *Snapshot) bool { return s.LastWindow.Rule != "hold" })
	if s.CurrentLimit != 21 || s.LastWindow.Rule != "increase" {
		t.Fatalf("%+v", s.LastWindow)
	}
	// A drop (a 429 that was failed over) cuts it.
	e.h.Release(ls[1], admission.Completion{Outcome: admission.Success, Latency: 50 * time.Millisecond, Sampled: true, Drops: 1})
	e.h.Sync()
	e.clk.Advance(time.Second)
	e.h.CloseWindow()
	s = e.until("cut", func(s *Snapshot) bool { return s.CurrentLimit == 16 })
	if s.LastWindow.Rule != "decrease" || s.LastWindow.Drops != 1 {
		t.Fatalf("%+v", s.LastWindow)
	}
	// Critical pressure halves it at once.
	e.h.ObservePressure(admission.PressureCritical, "test")
	s = e.until("halved", func(s *Snapshot) bool { return s.CurrentLimit == 8 })
	if s.ResourceSeverity != "critical" || s.ResourceReason != "test" || s.Pressure != "critical" {
		t.Fatalf("%+v", s)
	}
	e.h.Release(ls[2], success)
}

func TestBatchBorrowsAndInteractiveRegainsItsFloor(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.InitialLimit = 40 }) // floors: interactive 30, batch 10
	var batch []*Lease
	for i := 0; i < 8; i++ {
		l, r := e.acquire("bulk", admission.Batch, 5)
		if r != None {
			t.Fatalf("batch borrowing idle interactive capacity: %q", r.Code())
		}
		batch = append(batch, l)
	}
	pi := e.acquireAsync("user", admission.Interactive, 5, nil)
	e.until("interactive waits", func(s *Snapshot) bool { return s.Classes["interactive"].WaitingCount == 1 })
	pb := e.acquireAsync("bulk", admission.Batch, 5, nil)
	e.until("batch waits", func(s *Snapshot) bool { return s.Classes["batch"].WaitingCount == 1 })
	e.h.Release(batch[0], success)
	if r := pi.wait(t); r != None {
		t.Fatalf("interactive: %q", r.Code())
	}
	pb.still(t)
	s := e.h.Snapshot()
	if s.Classes["interactive"].ActiveCost != 5 || s.Classes["batch"].ActiveCost != 35 || s.Classes["interactive"].FloorCost != 30 {
		t.Fatalf("%+v", s.Classes)
	}
	e.h.Release(&pi.lease, success)
	for _, l := range batch[1:] {
		e.h.Release(l, success)
	}
	if r := pb.wait(t); r != None {
		t.Fatalf("batch: %q", r.Code())
	}
	e.h.Release(&pb.lease, success)
}

// TestLightLaneKeepsItsRecentDemand: a tenant with a backlog may not take
// the room a light tenant used in the last ClassIdle (up to its fair
// share), so the light tenant's next request is admitted at once.
func TestLightLaneKeepsItsRecentDemand(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true })
	x1, _ := e.acquire("x", admission.Interactive, 10)
	x2, _ := e.acquire("x", admission.Interactive, 10)
	var as []*pending
	for i := 0; i < 4; i++ {
		as = append(as, e.acquireAsync("a", admission.Interactive, 5, nil))
		e.until("a queued", func(s *Snapshot) bool { return s.LaneQueuedCount == int64(i+1) })
	}
	b := e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b queued", func(s *Snapshot) bool { return s.LaneQueuedCount == 5 })
	e.h.Release(x1, success)
	for _, p := range []*pending{as[0], b} {
		if r := p.wait(t); r != None {
			t.Fatalf("%q", r.Code())
		}
	}
	e.h.Release(x2, success)
	for _, p := range as[1:3] {
		if r := p.wait(t); r != None {
			t.Fatalf("%q", r.Code())
		}
	}
	// B's request ends: its 5 stay free for B although A waits.
	e.h.Release(&b.lease, success)
	e.until("b released", func(s *Snapshot) bool { return s.ActiveCost == 15 })
	as[3].still(t)
	b2 := e.acquireAsync("b", admission.Interactive, 5, nil)
	if r := b2.wait(t); r != None {
		t.Fatalf("light tenant: %q", r.Code())
	}
	as[3].still(t)
	e.h.Release(&b2.lease, success)
	e.until("b2 released", func(s *Snapshot) bool { return s.ActiveCost == 15 })
	// Once B has been idle for ClassIdle, A may use the room.
	e.clk.Advance(1100 * time.Millisecond)
	e.h.Tick()
	if r := as[3].wait(t); r != None {
		t.Fatalf("a after b went idle: %q", r.Code())
	}
	for _, p := range as {
		e.h.Release(&p.lease, success)
	}
}

// TestQueuedDemandGrowsTheLimitFast: a full window in which a request had
// to wait at the limit grows it ×1.25 from the initial limit up (slow
// start), not one step.
func TestQueuedDemandGrowsTheLimitFast(t *testing.T) {
	e := start(t, nil) // limit 20
	var ls []*Lease
	for i := 0; i < 4; i++ {
		l, r := e.acquire("a", admission.Interactive, 5)
		if r != None {
			t.Fatalf("acquire %d: %v", i, r.Code())
		}
		ls = append(ls, l)
	}
	waiting := e.acquireAsync("b", admission.Interactive, 5, nil) // the limit is full: it waits
	waiting.still(t)
	e.clk.Advance(900 * time.Millisecond)
	e.h.Tick()
	e.h.Sync()
	e.h.Release(ls[0], success) // a completion in the window; the waiter takes the freed room
	if r := waiting.wait(t); r != None {
		t.Fatalf("waiter: %v", r.Code())
	}
	e.clk.Advance(100 * time.Millisecond)
	e.h.CloseWindow()
	s := e.until("grew", func(s *Snapshot) bool { return s.LastWindow.Rule != "hold" })
	if s.CurrentLimit != 25 || s.LastWindow.Rule != "increase" || !s.LastWindow.SlowStart {
		t.Fatalf("limit %d after %+v; want slow start ×1.25 to 25", s.CurrentLimit, s.LastWindow)
	}
	for _, l := range append(ls[1:], &waiting.lease) {
		e.h.Release(l, success)
	}
}
