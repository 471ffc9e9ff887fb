package lanes

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type env struct {
	t   testing.TB
	h   *Handle
	sys *actor.ActorSystem
	clk *clock.Fake
}

// start runs the admission actors on a fake clock with one upstream (or
// one per cap given) at a fixed limit of 20 (min = max = initial), so the
// lane mechanics are tested apart from the controller; edit may free the
// limit.
func start(t testing.TB, edit func(*admission.Config), caps ...int) *env {
	t.Helper()
	cfg := admission.DefaultConfig()
	cfg.Mode = admission.ModeEnforce
	cfg.VirtualLanes = false
	cfg.MinLimit, cfg.InitialLimit, cfg.MaxLimit = 20, 20, 20
	if edit != nil {
		edit(&cfg)
	}
	if len(caps) == 0 {
		caps = []int{0}
	}
	var ups []UpstreamSpec
	for i, c := range caps {
		ups = append(ups, UpstreamSpec{Name: fmt.Sprintf("u%d", i), Cap: c})
	}
	sys := testutil.NewActorSystem()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Config: cfg, Clock: clk, ManualTicks: true, Upstreams: ups})
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

// held is a set of leases of at most a quarter of the limit each (what a
// lease may hold) that together hold cost.
type held struct {
	e  *env
	ls []*Lease
}

func (e *env) hold(tn string, cost int64) *held {
	e.t.Helper()
	h := &held{e: e}
	for cost > 0 {
		c := min(cost, 5)
		l, r := e.acquire(tn, admission.Interactive, c)
		if r != None {
			e.t.Fatalf("holding %d: %q", cost, r.Code())
		}
		h.ls = append(h.ls, l)
		cost -= c
	}
	return h
}

func (h *held) release() {
	for _, l := range h.ls {
		h.e.h.Release(l, success)
	}
}

func (e *env) acquire(tn string, c admission.Class, cost int64) (*Lease, Reason) {
	var l Lease
	r := e.h.Acquire(Ticket{Tenant: id(tn), Class: c, Cost: cost}, &l)
	return &l, r
}

func (p *pending) wait(t *testing.T) Reason {
	t.Helper()
	return testutil.Recv(t, "acquire finished", p.done)
}

func (p *pending) still(t *testing.T) {
	t.Helper()
	select {
	case r := <-p.done:
		t.Fatalf("acquire finished early with %q", r.Code())
	case <-time.After(20 * time.Millisecond):
	}
}

// offer sends one request of tn, which must queue or be shed, and reports
// whether it was shed (else it queued and is returned). The snapshot's
// queue count must be current when it is called (grants counted): a
// queued request is told by the count rising past it.
func (e *env) offer(t *testing.T, tn string) (*pending, bool) {
	t.Helper()
	n := e.h.Snapshot().QueuedCount
	p := e.acquireAsync(tn, admission.Interactive, 1, nil)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		select {
		case r := <-p.done:
			if r != Overloaded {
				t.Fatalf("%s: %q, want queued or %q", tn, r.Code(), Overloaded.Code())
			}
			return nil, true
		default:
		}
		if e.h.Snapshot().QueuedCount > n {
			return p, false
		}
		if time.Now().After(deadline) {
			t.Fatal("the request was neither queued nor shed")
		}
	}
}

// until polls the snapshot until cond holds.
func (e *env) until(what string, cond func(*Snapshot) bool) *Snapshot {
	e.t.Helper()
	var s *Snapshot
	testutil.Until(e.t, what, func() bool {
		e.h.Sync()
		s = e.h.Snapshot()
		return cond(s)
	})
	return s
}

var success = Completion{Outcome: Success}

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

func TestDeadlineAndQueueFull(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MaxQueueCount = 2; c.DefaultMaxWaitMs = 1000 })
	l := e.hold("a", 20)
	p1 := e.acquireAsync("a", admission.Interactive, 3, nil)
	p2 := e.acquireAsync("a", admission.Interactive, 3, nil)
	e.until("two queued", func(s *Snapshot) bool { return s.QueuedCount == 2 })
	if _, r := e.acquire("a", admission.Interactive, 3); r != QueueFull {
		t.Fatalf("third: %q, want queue full", r.Code())
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
	l.release()
	s := e.until("counted", func(s *Snapshot) bool { return s.RejectedCount == 3 })
	if s.RejectedByReason["admission_deadline"] != 2 || s.RejectedByReason["admission_queue_full"] != 1 {
		t.Fatalf("reasons %v", s.RejectedByReason)
	}
	if st := (*e.h.ups.At(0)).gate.Stats(); st.Waiting != [admission.NumClasses]int64{} {
		t.Fatalf("waiters left in the gate: %+v", st)
	}
}

// TestCallerDeadlineEndsTheWait: a queued request with a stated deadline
// shorter than the max wait is refused at its deadline, not after the
// max wait, and never admitted after it.
func TestCallerDeadlineEndsTheWait(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.DefaultMaxWaitMs = 5000 })
	l := e.hold("a", 20)
	p := &pending{done: make(chan Reason, 1)}
	deadline := e.clk.Now().Add(time.Second)
	go func() {
		p.done <- e.h.Acquire(Ticket{Tenant: id("b"), Class: admission.Interactive, Cost: 5, Deadline: deadline}, &p.lease)
	}()
	e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	e.clk.Advance(time.Second)
	e.h.Tick()
	if r := p.wait(t); r != Deadline {
		t.Fatalf("past its deadline: %q", r.Code())
	}
	// A deadline already past is refused without queueing.
	var l2 Lease
	if r := e.h.Acquire(Ticket{Tenant: id("b"), Class: admission.Interactive, Cost: 5, Deadline: e.clk.Now()}, &l2); r != Deadline || l2.Held() {
		t.Fatalf("past deadline: %q", r.Code())
	}
	l.release()
}

// TestBigRequestsAreChargedAShareOfTheLimit: a request priced above a
// quarter of its upstream's limit holds a quarter, so it is admitted in
// its turn rather than refused or left waiting for an idle upstream.
func TestBigRequestsAreChargedAShareOfTheLimit(t *testing.T) {
	e := start(t, nil) // limit 20: at most 5 per request
	var small []*Lease
	for i := 0; i < 15; i++ {
		l, _ := e.acquire("a", admission.Interactive, 1)
		small = append(small, l)
	}
	big, r := e.acquire("b", admission.Interactive, 500)
	if r != None || big.Cost != 5 {
		t.Fatalf("big request: %q, charged %d", r.Code(), big.Cost)
	}
	// Full now: the next big one waits for 5 to free, then goes.
	p := e.acquireAsync("b", admission.Interactive, 500, nil)
	e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	for _, l := range small[:5] {
		e.h.Release(l, success)
	}
	if r := p.wait(t); r != None || p.lease.Cost != 5 {
		t.Fatalf("queued big request: %q, charged %d", r.Code(), p.lease.Cost)
	}
	for _, l := range append(small[5:], big, &p.lease) {
		e.h.Release(l, success)
	}
}

func TestClientGoneWhileQueuedIsNotAShed(t *testing.T) {
	e := start(t, nil)
	l := e.hold("a", 20)
	ab := &testutil.Cancel{}
	p := e.acquireAsync("b", admission.Interactive, 5, ab)
	e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	ab.Fire()
	if r := p.wait(t); r != Aborted {
		t.Fatalf("aborted wait: %q", r.Code())
	}
	s := e.until("withdrawn", func(s *Snapshot) bool { return s.QueuedCount == 0 })
	if s.RejectedCount != 0 || s.AbortedCount != 1 {
		t.Fatalf("an abort counted as a shed: %+v", s)
	}
	// Already gone before queueing.
	ab2 := &testutil.Cancel{}
	ab2.Fire()
	if r := e.h.Acquire(Ticket{Tenant: id("b"), Class: admission.Interactive, Cost: 5, Abort: ab2}, &Lease{}); r != Aborted {
		t.Fatalf("pre-aborted: %q", r.Code())
	}
	l.release()
	e.until("idle", func(s *Snapshot) bool { return s.ActiveCost == 0 })
	if st := (*e.h.ups.At(0)).gate.Stats(); st.Waiting != [admission.NumClasses]int64{} {
		t.Fatalf("waiters left: %+v", st)
	}
}

func TestVirtualLanesShareByCostNotArrivalOrder(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true })
	l := e.hold("x", 10)
	l2 := e.hold("x", 10)
	// Tenant A queues four requests, then B one.
	var as []*pending
	for i := 0; i < 4; i++ {
		as = append(as, e.acquireAsync("a", admission.Interactive, 5, nil))
		e.until("a queued", func(s *Snapshot) bool { return s.QueuedCount == int64(i+1) })
	}
	b := e.acquireAsync("b", admission.Interactive, 5, nil)
	s := e.until("b queued", func(s *Snapshot) bool { return s.QueuedCount == 5 && s.LaneCount == 2 })
	if len(s.Upstreams[0].LaneTenants) != 2 || s.Upstreams[0].LaneTenants[0].TenantKey != "a" || s.Upstreams[0].LaneTenants[0].QueuedCost != 20 {
		t.Fatalf("lane figures %+v", s)
	}
	// 10 of capacity frees: in arrival order A would get both; fairly, A's
	// first request and B's go, and A's backlog waits.
	l.release()
	first := []Reason{as[0].wait(t), b.wait(t)}
	if first[0] != None || first[1] != None {
		t.Fatalf("%v", first)
	}
	s = e.until("a's backlog waits", func(s *Snapshot) bool { return s.QueuedCount == 3 })
	for _, p := range as[1:] {
		p.still(t)
	}
	e.h.Release(&as[0].lease, success)
	e.h.Release(&b.lease, success)
	l2.release()
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
	l := e.hold("x", 20)
	pa := e.acquireAsync("a", admission.Interactive, 5, nil)
	e.until("a", func(s *Snapshot) bool { return s.LaneCount == 1 && s.QueuedCount == 1 })
	e.clk.Advance(time.Millisecond)
	pb := e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b", func(s *Snapshot) bool { return s.LaneCount == 2 && s.QueuedCount == 2 })
	e.clk.Advance(time.Millisecond)
	pc := e.acquireAsync("c", admission.Interactive, 5, nil)
	if r := pa.wait(t); r != LaneEvicted {
		t.Fatalf("least recently used lane: %q, want lane evicted", r.Code())
	}
	s := e.until("c", func(s *Snapshot) bool { return s.LaneCount == 2 && s.QueuedCount == 2 })
	for _, lt := range s.Upstreams[0].LaneTenants {
		if lt.TenantKey == "a" {
			t.Fatalf("evicted lane still listed: %+v", s.Upstreams[0].LaneTenants)
		}
	}
	l.release()
	for _, p := range []*pending{pb, pc} {
		if r := p.wait(t); r != None {
			t.Fatalf("%q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
	e.until("lanes empty", func(s *Snapshot) bool { return s.QueuedCount == 0 && s.ActiveCost == 0 })
	e.clk.Advance(59 * time.Second)
	e.h.CloseWindow()
	if s := e.until("window", func(s *Snapshot) bool { return true }); s.LaneCount != 2 {
		t.Fatalf("evicted before 60 s idle: %d lanes", s.LaneCount)
	}
	e.clk.Advance(time.Second)
	e.h.CloseWindow()
	e.until("idle lanes evicted", func(s *Snapshot) bool { return s.LaneCount == 0 })
	// The tenant comes back: a new lane serves it.
	l = e.hold("x", 20)
	pb = e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b again", func(s *Snapshot) bool { return s.LaneCount == 1 })
	l.release()
	if r := pb.wait(t); r != None {
		t.Fatalf("%q", r.Code())
	}
	e.h.Release(&pb.lease, success)
}

func TestStopRejectsQueuedWithShutdown(t *testing.T) {
	for _, lanesOn := range []bool{false, true} {
		e := start(t, func(c *admission.Config) { c.VirtualLanes = lanesOn })
		l := e.hold("a", 20)
		p := e.acquireAsync("b", admission.Interactive, 5, nil)
		e.until("queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
		e.h.Stop()
		if r := p.wait(t); r != Shutdown {
			t.Fatalf("lanes %v: queued at shutdown: %q", lanesOn, r.Code())
		}
		if _, r := e.acquire("a", admission.Interactive, 1); r != Shutdown {
			t.Fatalf("after stop: %q", r.Code())
		}
		l.release() // harmless after stop
		if !e.h.Snapshot().Shutdown {
			t.Fatal("snapshot does not say shutdown")
		}
	}
}

func TestShadowAdmitsEverythingAndCountsWouldDecisions(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.Mode = admission.ModeShadow; c.MaxQueueCount = 1 })
	var ls []*Lease
	for i := 0; i < 7; i++ { // 4 fit, 1 would queue, 2 would be rejected (queue full); the big one is charged 5
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
		s.ActiveCost != 35 || s.VirtualActiveCost != 20 || s.AdmittedCount != 7 {
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

func TestTryAcquireAndTheUpstreamCap(t *testing.T) {
	e := start(t, nil, 1, 0) // upstream 0 has a cap of 1
	var l0, l1, l2 Lease
	if r := e.h.TryAcquire(Ticket{Upstream: 0, Tenant: id("a"), Cost: 1}, &l0); r != None {
		t.Fatalf("room: %q", r.Code())
	}
	if r := e.h.TryAcquire(Ticket{Upstream: 0, Tenant: id("a"), Cost: 1}, &l1); r != Busy || l1.Held() {
		t.Fatalf("at the cap: %q", r.Code())
	}
	// The other upstream has its own limit: a full one does not block it.
	for i := 0; i < 4; i++ {
		var l Lease
		if r := e.h.TryAcquire(Ticket{Upstream: 1, Tenant: id("a"), Cost: 5}, &l); r != None {
			t.Fatalf("upstream 1, %d: %q", i, r.Code())
		}
	}
	if r := e.h.TryAcquire(Ticket{Upstream: 1, Tenant: id("a"), Cost: 5}, &l2); r != Busy {
		t.Fatalf("upstream 1 full: %q", r.Code())
	}
	s := e.h.Snapshot()
	if s.BusyCount != 2 || s.RejectedCount != 0 || s.Upstreams[0].ActiveCount != 1 || s.Upstreams[1].ActiveCost != 20 || s.Upstreams[0].Cap != 1 {
		t.Fatalf("%+v", s)
	}
	e.h.Release(&l0, success)
}

// TestAnswersDriveEachUpstreamsLimit: the controller of an upstream
// learns from that upstream's answers only: queued answers on one do not
// lower the other's limit, and critical pressure halves both.
func TestAnswersDriveEachUpstreamsLimit(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 1, 16, 4096 }, 0, 0)
	// A closed loop of 24 callers on each upstream: answers on upstream 0
	// take 100 ms (no queue below 16), on upstream 1 they queue past 8.
	step := func(u int, leases []*Lease, lat func(inflight int) time.Duration) []*Lease {
		for len(leases) < 24 {
			var l Lease
			if e.h.TryAcquire(Ticket{Upstream: u, Tenant: id("a"), Cost: 1}, &l) != None {
				break
			}
			leases = append(leases, &l)
		}
		keep := leases[:0]
		for _, l := range leases {
			if e.clk.Now().Sub(l.AdmittedAt) >= lat(len(leases)) {
				e.h.Release(l, success)
				continue
			}
			keep = append(keep, l)
		}
		return keep
	}
	var l0, l1 []*Lease
	for i := 0; i < 4000; i++ { // 20 s in 5 ms steps
		e.clk.Advance(5 * time.Millisecond)
		l0 = step(0, l0, func(int) time.Duration { return 100 * time.Millisecond })
		l1 = step(1, l1, func(n int) time.Duration { return 100 * time.Millisecond * time.Duration(max(n, 8)) / 8 })
		e.h.Tick()
		e.h.Sync() // the controllers judge each step at the clock it was sent on
	}
	e.h.Sync()
	s := e.h.Snapshot()
	if s.Upstreams[1].CurrentLimit > 11 || s.Upstreams[1].CurrentLimit < 6 {
		t.Fatalf("upstream 1 (queues past 8): limit %d, want about 8 (%+v)", s.Upstreams[1].CurrentLimit, s.Upstreams[1])
	}
	if s.Upstreams[0].CurrentLimit < 20 {
		t.Fatalf("upstream 0 (no queue): limit %d, want it to grow past 20 (%+v)", s.Upstreams[0].CurrentLimit, s.Upstreams[0])
	}
	before := [2]int64{s.Upstreams[0].CurrentLimit, s.Upstreams[1].CurrentLimit}
	e.h.ObservePressure(admission.PressureCritical, "test")
	s = e.until("halved", func(s *Snapshot) bool {
		return s.Upstreams[0].CurrentLimit <= (before[0]+1)/2 && s.Upstreams[1].CurrentLimit <= (before[1]+1)/2
	})
	if s.ResourceSeverity != "critical" || s.ResourceReason != "test" {
		t.Fatalf("%+v", s)
	}
	for _, l := range append(l0, l1...) {
		e.h.Release(l, success)
	}
}

func TestBatchBorrowsAndInteractiveRegainsItsFloor(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 40, 40, 40 }) // floors: interactive 30, batch 10
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
	if s.Classes["interactive"].ActiveCost != 5 || s.Classes["batch"].ActiveCost != 35 || s.Classes["interactive"].SharePercent != 75 {
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

// TestLightLaneIsServedNext: a tenant that arrives while another, already
// served, has a backlog is granted the next place that frees, ahead of
// the backlog that queued before it (fair queuing on cost with history),
// and nothing is held idle for it while it has nothing queued.
func TestLightLaneIsServedNext(t *testing.T) {
	e := start(t, func(c *admission.Config) { c.VirtualLanes = true })
	x := e.hold("x", 20)
	var as []*pending
	for i := 0; i < 6; i++ {
		as = append(as, e.acquireAsync("a", admission.Interactive, 5, nil))
		e.until("a queued", func(s *Snapshot) bool { return s.QueuedCount == int64(i+1) })
	}
	// a is served twice: it has a history now.
	for i := 0; i < 2; i++ {
		e.h.Release(x.ls[i], success)
		if r := as[i].wait(t); r != None {
			t.Fatalf("a: %q", r.Code())
		}
	}
	b := e.acquireAsync("b", admission.Interactive, 5, nil)
	e.until("b queued", func(s *Snapshot) bool { return s.QueuedCount == 5 })
	e.h.Release(x.ls[2], success) // 5 free: one grant
	if r := b.wait(t); r != None {
		t.Fatalf("light tenant: %q", r.Code())
	}
	for _, p := range as[2:] {
		p.still(t)
	}
	// b's place freed while b has nothing queued: it goes to a at once.
	e.h.Release(&b.lease, success)
	if r := as[2].wait(t); r != None {
		t.Fatalf("backlogged tenant: %q", r.Code())
	}
	e.h.Release(x.ls[3], success)
	for _, p := range as[:3] {
		e.h.Release(&p.lease, success)
	}
	for _, p := range as[3:] {
		if r := p.wait(t); r != None {
			t.Fatalf("%q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
	e.until("idle", func(s *Snapshot) bool { return s.ActiveCost == 0 })
}

// warmFull starts lanes with a fixed limit of 8 (the lane mechanics
// apart from the controller), warms them with answers of 100 ms (a drain
// rate of 80 a second), and fills the limit so that everything else
// queues: the leases holding it are returned.
func warmFull(t *testing.T) (*env, Upstream, []*Lease) {
	t.Helper()
	e := start(t, func(c *admission.Config) { c.MinLimit, c.InitialLimit, c.MaxLimit = 8, 8, 8; c.VirtualLanes = true })
	var leases []*Lease
	for i := 0; i < 40; i++ {
		for j := 0; j < 8; j++ {
			var l Lease
			if r := e.h.TryAcquire(Ticket{Tenant: id("w"), Cost: 1}, &l); r != None {
				t.Fatalf("warm-up: %q", r.Code())
			}
			leases = append(leases, &l)
		}
		e.clk.Advance(100 * time.Millisecond)
		for _, l := range leases {
			e.h.Release(l, success)
		}
		leases = leases[:0]
		e.h.Tick()
		e.h.Sync()
	}
	up := e.h.Snapshot().Upstreams[0]
	if up.DrainPerSecond <= 0 || up.QueueTargetMs <= 0 {
		t.Fatalf("no drain rate after the warm-up: %+v", up)
	}
	for {
		var l Lease
		if e.h.TryAcquire(Ticket{Tenant: id("w"), Cost: 1}, &l) != None {
			break
		}
		leases = append(leases, &l)
	}
	return e, up, leases
}

// TestStandingQueueSheds: once the drain rate is known and the upstream
// is overloaded (arrivals outrun grants), a lane's burst may queue up to
// two targets' worth of wait (burstWaitTargets). A lane that has not
// emptied for the burst interval (four targets) is a standing queue: it
// keeps waiting while it holds its length (a closed loop of callers), and
// sheds what would
// wait past the queueing target once it grows, while another tenant's
// lane, empty until now, still queues.
func TestStandingQueueSheds(t *testing.T) {
	e, up, leases := warmFull(t)
	target := time.Duration(up.QueueTargetMs * float64(time.Millisecond))
	// Queue x's burst past the target (but within a burst's allowance).
	burst := int(target.Seconds()*up.DrainPerSecond) + 2
	if float64(burst+1)/up.DrainPerSecond >= (burstWaitTargets * target).Seconds() {
		t.Fatalf("test setup: a burst of %d does not fit a burst's allowance (%+v)", burst, up)
	}
	var xs []*pending
	queue := func(tn string) *pending {
		t.Helper()
		n := e.h.Snapshot().QueuedCount
		p := e.acquireAsync(tn, admission.Interactive, 1, nil)
		e.until(tn+" queued", func(s *Snapshot) bool { return s.QueuedCount == n+1 })
		return p
	}
	for i := 0; i < burst; i++ {
		xs = append(xs, queue("x"))
	}
	queueOrShed := func(tn string) (*pending, bool) { t.Helper(); return e.offer(t, tn) }
	// x's queue has not emptied for the interval: it stands, and its
	// arrivals outrun its grants (none): once the upstream's presence
	// has grown past a tenth of a window's answers and two (wherever its
	// flow window rolled), what comes is shed.
	e.clk.Advance(burstIntervals*target + time.Millisecond) // the snapshot rounds the target
	e.h.Tick()
	e.h.Sync() // the controller sees the flow: arrivals, no grants
	cfg := e.h.Config()
	window := cfg.Window()
	shed := false
	for i := 0; i < int(outrunShare*up.DrainPerSecond*window.Seconds())+4 && !shed; i++ {
		e.h.Tick()
		e.h.Sync()
		var p *pending
		if p, shed = queueOrShed("x"); !shed {
			xs = append(xs, p)
		}
	}
	if !shed {
		t.Fatalf("a standing queue outrunning its grants (none) was not shed (%d queued)", len(xs))
	}
	// A closed loop: each answer brings one new request, and a caller
	// that is shed sends again at once (a load test, a connection pool
	// without backoff), a few times. After a whole window in which what
	// joined the queue kept pace with its grants, the standing queue
	// waits although its wait exceeds the target: the re-sent requests
	// are the same demand, not more of it.
	step := window / 10
	var lastShed time.Duration
	for elapsed := time.Duration(0); elapsed < 3*window; elapsed += step {
		e.clk.Advance(step)
		e.h.Release(leases[0], success)
		leases = leases[1:]
		if r := xs[0].wait(t); r != None {
			t.Fatalf("queued request: %q", r.Code())
		}
		leases = append(leases, &xs[0].lease) // it holds the freed place
		xs = xs[1:]
		n := int64(len(xs))
		e.until("the grant counted", func(s *Snapshot) bool { return s.QueuedCount == n })
		for try := 0; try < 5; try++ {
			p, shed := queueOrShed("x")
			if !shed {
				xs = append(xs, p)
				break
			}
			lastShed = elapsed
		}
	}
	if lastShed >= 2*window {
		t.Fatalf("a closed loop was still shed %v into it (windows of %v)", lastShed, window)
	}
	// y's lane was empty: its request queues behind x's.
	y := queue("y")
	for _, l := range leases {
		e.h.Release(l, success)
	}
	for _, p := range append(xs, y) {
		if r := p.wait(t); r != None {
			t.Fatalf("queued request: %q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
}

// TestAddUpstreamsAtRunTime: an upstream added after start admits up to
// its own cap, queues and grants like the others, shows in the snapshot,
// and hides from it when retired while its held lease still releases.
func TestAddUpstreamsAtRunTime(t *testing.T) {
	e := start(t, nil)
	if r := e.h.Acquire(Ticket{Upstream: 1}, &Lease{}); r != Unavailable {
		t.Fatal("an upstream not yet added was admitted")
	}
	first, err := e.h.AddUpstreams([]UpstreamSpec{{Name: "u1", Cap: 1}})
	if err != nil || first != 1 || e.h.Upstreams() != 2 {
		t.Fatalf("AddUpstreams = %d, %v (%d upstreams)", first, err, e.h.Upstreams())
	}
	var l0, l1 Lease
	if r := e.h.TryAcquire(Ticket{Upstream: 1, Tenant: id("a"), Cost: 1}, &l0); r != None {
		t.Fatalf("the added upstream refused its first request: %q", r.Code())
	}
	if r := e.h.TryAcquire(Ticket{Upstream: 1, Tenant: id("a"), Cost: 1}, &l1); r != Busy {
		t.Fatalf("the added upstream's cap of 1 let a second request in: %q", r.Code())
	}
	queued := make(chan Reason, 1)
	var lq Lease
	go func() { queued <- e.h.Acquire(Ticket{Upstream: 1, Tenant: id("b"), Cost: 1}, &lq) }()
	s := e.until("a request queued on the added upstream", func(s *Snapshot) bool { return len(s.Upstreams) == 2 && s.Upstreams[1].QueuedCount == 1 })
	if s.Upstreams[1].Name != "u1" || s.Upstreams[1].Cap != 1 || s.Upstreams[1].ActiveCount != 1 {
		t.Fatalf("the added upstream in the snapshot: %+v", s.Upstreams[1])
	}
	e.h.Release(&l0, success)
	granted(t, queued, "releasing the lease")
	e.h.SetRetired(1, true)
	if s := e.h.Snapshot(); len(s.Upstreams) != 1 || s.Upstreams[0].Name != "u0" {
		t.Fatalf("a retired upstream is still in the snapshot: %+v", s.Upstreams)
	}
	e.h.Release(&lq, success)
	e.h.SetRetired(1, false)
	if s := e.until("the upstream idle again", func(s *Snapshot) bool { return len(s.Upstreams) == 2 && s.Upstreams[1].ActiveCount == 0 }); s.Upstreams[1].QueuedCount != 0 {
		t.Fatalf("after release: %+v", s.Upstreams[1])
	}
	e.h.Stop()
	if _, err := e.h.AddUpstreams([]UpstreamSpec{{Name: "u2"}}); err == nil {
		t.Fatal("AddUpstreams after Stop started an upstream")
	}
}

// TestSetCapAtRunTime: a raised cap grants a request queued at the old
// cap without any release; a lowered one holds new requests back.
func TestSetCapAtRunTime(t *testing.T) {
	e := start(t, nil, 1)
	var l0, lq Lease
	if r := e.h.Acquire(Ticket{Tenant: id("a"), Cost: 1}, &l0); r != None {
		t.Fatalf("first request: %q", r.Code())
	}
	queued := make(chan Reason, 1)
	go func() { queued <- e.h.Acquire(Ticket{Tenant: id("b"), Cost: 1}, &lq) }()
	e.until("the second request queued at the cap of 1", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	e.h.SetCap(0, 2)
	granted(t, queued, "raising the cap")
	if s := e.h.Snapshot(); s.Upstreams[0].Cap != 2 || s.Upstreams[0].ActiveCount != 2 {
		t.Fatalf("after raising the cap: %+v", s.Upstreams[0])
	}
	e.h.SetCap(0, 1)
	var l2 Lease
	if r := e.h.TryAcquire(Ticket{Tenant: id("c"), Cost: 1}, &l2); r != Busy {
		t.Fatalf("a request over the lowered cap: %q", r.Code())
	}
	e.h.Release(&l0, success)
	e.h.Release(&lq, success)
}

// granted waits for a queued Acquire to be admitted after what.
func granted(t *testing.T, queued <-chan Reason, what string) {
	t.Helper()
	if r := testutil.Recv(t, what+" granting the queued request", queued); r != None {
		t.Fatalf("after %s the queued request was refused: %q", what, r.Code())
	}
}

// measuring asks the upstream's controller whether its measuring tick
// runs.
func measuring(t *testing.T, h *Handle) bool {
	t.Helper()
	var on bool
	h.all(func(u *upstream) {
		r, err := h.root.RequestFuture(u.ctrl, measuringQuery{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		on = r.(bool)
	})
	return on
}

// TestQueueWakesTheMeasuringTick: after an idle spell the controller's
// tick sleeps. An overload's first requests then take every free place
// on the gate's fast path and the rest queue in a lane, with no release
// for a whole answer's time: the lane's queue alone must wake the tick,
// or the flow verdict that turns on shedding waits for that answer.
func TestQueueWakesTheMeasuringTick(t *testing.T) {
	cfg := admission.DefaultConfig()
	cfg.Mode = admission.ModeEnforce
	cfg.MinLimit, cfg.InitialLimit, cfg.MaxLimit = 4, 4, 4
	cfg.WindowMs = 50 // the tick sleeps after a window without work
	sys := testutil.NewActorSystem()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Config: cfg, Clock: clk, Upstreams: []UpstreamSpec{{Name: "u0"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(); sys.Shutdown() })
	e := &env{t: t, h: h, sys: sys}
	fill := func() []*Lease {
		var ls []*Lease
		for {
			var l Lease
			if h.TryAcquire(Ticket{Tenant: id("x"), Cost: 1}, &l) != None {
				return ls
			}
			ls = append(ls, &l)
		}
	}
	// x's lane exists (one request of x queued once): later requests go
	// to it directly, never through the controller.
	leases := fill()
	p := e.acquireAsync("x", admission.Interactive, 1, nil)
	e.until("x queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	for _, l := range leases {
		h.Release(l, success)
	}
	if r := p.wait(t); r != None {
		t.Fatalf("queued request: %q", r.Code())
	}
	h.Release(&p.lease, success)
	// Idle ticks, one per step of the clock, until a window without work
	// has passed: the tick stops (a bound of windows, not of wall time).
	for n := 0; measuring(t, h); n++ {
		if n > 3*int(cfg.Window()/tickEvery) {
			t.Fatalf("the measuring tick did not go to sleep after %d idle ticks", n)
		}
		clk.Advance(tickEvery)
	}
	if leases = fill(); len(leases) != 4 {
		t.Fatalf("%d places taken on the fast path, want the limit of 4", len(leases))
	}
	if s := h.Snapshot(); s.LaneCount != 1 {
		t.Fatalf("x's lane is gone (%d lanes): the test would go through the controller", s.LaneCount)
	}
	p = e.acquireAsync("x", admission.Interactive, 1, nil)
	e.until("x queued", func(s *Snapshot) bool { return s.QueuedCount == 1 })
	testutil.Until(t, "a queued lane waking the measuring tick", func() bool { return measuring(t, h) })
	h.Release(leases[0], success)
	if r := p.wait(t); r != None {
		t.Fatalf("queued request: %q", r.Code())
	}
	h.Release(&p.lease, success)
	for _, l := range leases[1:] {
		h.Release(l, success)
	}
}

// shedOpenLoop offers tenant x's requests on a full upstream with no
// grant (an open loop) until its standing queue is shed, and returns the
// requests queued before the first shed.
func shedOpenLoop(t *testing.T, e *env, target time.Duration) []*pending {
	t.Helper()
	var xs []*pending
	p, shed := e.offer(t, "x")
	if shed {
		t.Fatal("the first request of an empty lane was shed")
	}
	xs = append(xs, p)
	e.clk.Advance(burstIntervals*target + time.Millisecond) // past a burst's interval
	for i := 0; i < 200; i++ {
		e.h.Tick()
		e.h.Sync()
		p, shed := e.offer(t, "x")
		if shed {
			return xs
		}
		xs = append(xs, p)
	}
	t.Fatalf("an open loop with no grant was never shed (%d queued)", len(xs))
	return nil
}

// grantHead lets 1/80 s pass and releases the oldest lease: the head of
// the queue is granted and holds the place (returned with the queue).
func grantHead(t *testing.T, e *env, leases []*Lease, xs []*pending) ([]*Lease, []*pending) {
	t.Helper()
	e.clk.Advance(time.Second / 80)
	e.h.Release(leases[0], success)
	leases = leases[1:]
	if r := xs[0].wait(t); r != None {
		t.Fatalf("queued request: %q", r.Code())
	}
	leases, xs = append(leases, &xs[0].lease), xs[1:]
	n := int64(len(xs))
	e.until("the grant counted", func(s *Snapshot) bool { return s.QueuedCount == n })
	e.h.Tick()
	e.h.Sync()
	return leases, xs
}

// releaseAll ends a shedding test: the held places are released, then
// each queued request, granted in turn, is released too.
func releaseAll(t *testing.T, e *env, leases []*Lease, xs []*pending) {
	t.Helper()
	for _, l := range leases {
		e.h.Release(l, success)
	}
	for _, p := range xs {
		if r := p.wait(t); r != None {
			t.Fatalf("queued request: %q", r.Code())
		}
		e.h.Release(&p.lease, success)
	}
}

// TestShedQueueRefillingIsShedAgain: an open loop beyond the upstream's
// drain. Shedding holds a standing queue at the target; when grants drain
// it there shedding ends, and arrivals that again outrun the grants (none
// come) are shed after a few of them join, not once a whole window's
// counts show it (which let an overload refill the queue by hundreds,
// seconds of wait, between two sheds).
func TestShedQueueRefillingIsShedAgain(t *testing.T) {
	e, up, leases := warmFull(t)
	target := time.Duration(up.QueueTargetMs * float64(time.Millisecond))
	send := func() (*pending, bool) { t.Helper(); return e.offer(t, "x") }
	// An open loop: requests keep coming, no grant. The queue stands
	// past the burst interval and is shed.
	xs := shedOpenLoop(t, e, target)
	// Grants drain the queue while what arrives (one per grant) is shed,
	// until the queue is at the target: shedding ends there and the
	// arrival queues.
	for ended := false; !ended; {
		if len(xs) == 0 {
			t.Fatal("the queue drained empty while every arrival was shed")
		}
		leases, xs = grantHead(t, e, leases, xs)
		p, shed := send()
		if !shed {
			xs, ended = append(xs, p), true
		}
	}
	atTarget := len(xs)
	// The open loop goes on without grants: a few join, then it is shed.
	joined := 0
	for ; joined < 50; joined++ {
		e.h.Tick()
		e.h.Sync()
		p, shed := send()
		if shed {
			break
		}
		xs = append(xs, p)
	}
	if joined > 6 {
		t.Fatalf("after shedding ended at the target (%d queued), %d more joined before one was shed", atTarget, joined)
	}
	releaseAll(t, e, leases, xs)
}

// closedLoop is a closed loop of callers of tenant x on the fake clock:
// each holds its place for held once granted, then sends
// again at once, as a load test or an agent does. A refusal fails the
// test: the loops here are demand the upstream keeps pace with.
type closedLoop struct {
	t        *testing.T
	e        *env
	held     time.Duration
	cs       []*loopCaller
	answered int
	start    time.Time
}

type loopCaller struct {
	p     *pending  // waiting for admission, or holding p.lease
	since time.Time // when granted; zero while waiting
}

func newClosedLoop(t *testing.T, e *env, callers int, held time.Duration) *closedLoop {
	l := &closedLoop{t: t, e: e, held: held, start: e.clk.Now()}
	for i := 0; i < callers; i++ {
		c := &loopCaller{}
		l.send(c)
		l.cs = append(l.cs, c)
	}
	l.settle()
	t.Cleanup(l.stop)
	return l
}

func (l *closedLoop) send(c *loopCaller) {
	c.p, c.since = l.e.acquireAsync("x", admission.Interactive, 1, nil), time.Time{}
}

// settle waits until every caller is granted or counted in the queue,
// and hands the granted ones the clock. It does not tick the controller.
func (l *closedLoop) settle() {
	t, e := l.t, l.e
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		e.h.Sync() // the controller publishes the lanes' queues
		waiting := 0
		for _, c := range l.cs {
			if !c.since.IsZero() {
				continue
			}
			select {
			case r := <-c.p.done:
				if r != None {
					t.Fatalf("a closed loop was refused %q at %v (%d answered): %+v",
						r.Code(), e.clk.Now().Sub(l.start), l.answered, e.h.Snapshot().Upstreams[0])
				}
				c.since = e.clk.Now()
			default:
				waiting++
			}
		}
		if int64(waiting) == e.h.Snapshot().QueuedCount {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers neither granted nor queued: %+v", waiting, e.h.Snapshot().Upstreams[0])
		}
	}
}

// run advances the clock by d in steps of 5 ms; the callers whose answer
// came release their place and send again.
func (l *closedLoop) run(d time.Duration) {
	for end := l.e.clk.Now().Add(d); l.e.clk.Now().Before(end); {
		l.e.clk.Advance(5 * time.Millisecond)
		for _, c := range l.cs {
			if c.since.IsZero() || l.e.clk.Now().Sub(c.since) < l.held {
				continue
			}
			l.e.h.Release(&c.p.lease, success)
			l.answered++
			l.send(c)
		}
		// The controller measures once every caller that sent is
		// counted, as each is by then in a real loop: a tick between an
		// answer and the caller's next request would read a dip.
		l.settle()
		l.e.h.Tick()
		l.settle()
	}
}

func (l *closedLoop) stop() {
	for _, c := range l.cs {
		if !c.since.IsZero() {
			l.e.h.Release(&c.p.lease, success)
		}
	}
	for _, c := range l.cs {
		if c.since.IsZero() {
			if r := c.p.wait(l.t); r == None {
				l.e.h.Release(&c.p.lease, success)
			}
		}
	}
}

// TestColdClosedLoopIsNotShed: a closed loop of 64 callers starts at
// once on an upstream that has never answered (the defaults: the first
// phase measures at 4, the initial limit is 16), answers taking 100 ms
// with no queue at the provider whatever the load. Until the provider
// has shown a knee the limit is a lower bound of its capacity, so a wait
// estimated from it is no overload: the callers wait and the limit grows.
// Shedding them (their wait measured at the calibration's drain rate,
// their arrival at once read as the requests present growing) was a
// spiral: each refused caller sends again at once, and the saturated
// bench's 64 streams spent 2,885 of their 3,000 requests on refusals
// within a second.
func TestColdClosedLoopIsNotShed(t *testing.T) {
	d := admission.DefaultConfig()
	e := start(t, func(c *admission.Config) {
		c.MinLimit, c.InitialLimit, c.MaxLimit, c.VirtualLanes = d.MinLimit, d.InitialLimit, d.MaxLimit, true
	})
	// The controller has measured idle windows before the loop starts (a
	// gateway up for a while, the upstream unused).
	for i := 0; i < 3; i++ {
		e.clk.Advance(d.Window())
		e.h.Tick()
		e.h.Sync()
	}
	const callers = 64
	l := newClosedLoop(t, e, callers, 100*time.Millisecond)
	l.run(3 * time.Second)
	if s := e.h.Snapshot(); s.Upstreams[0].CurrentLimit < callers {
		t.Fatalf("limit %d after 3 s of 64 callers and no provider queue, want ≥ 64: %+v", s.Upstreams[0].CurrentLimit, s.Upstreams[0])
	}
}

// TestShedLaneThenClosedLoopIsNotShedForEver: an open loop beyond the
// upstream's drain is shed; then the same callers behave as a closed loop
// (each answered caller sends again, a refused one sends again a
// millisecond later). Their queue stands above the target and never
// drains, but their arrivals keep pace with the grants: once a window has
// passed they are no longer shed. Shedding as a latch refused them until
// the queue drained to the target, which a closed loop's queue never does
// (the saturated bench with other processes on the CPU: one tenant
// refused 30-70k times in four seconds while admission off served it).
func TestShedLaneThenClosedLoopIsNotShedForEver(t *testing.T) {
	e, up, leases := warmFull(t)
	target := time.Duration(up.QueueTargetMs * float64(time.Millisecond))
	cfg := admission.DefaultConfig()
	window := cfg.Window()
	send := func() (*pending, bool) { t.Helper(); return e.offer(t, "x") }
	xs := shedOpenLoop(t, e, target)
	standing := len(xs)
	// The closed loop: a grant every 1/80 s; the caller it answered sends
	// again, and a refused caller again a millisecond later.
	start, retries, lastRefusal := e.clk.Now(), 0, time.Duration(0)
	for e.clk.Now().Sub(start) < 4*window {
		leases, xs = grantHead(t, e, leases, xs)
		for {
			p, shed := send()
			if !shed {
				xs = append(xs, p)
				break
			}
			lastRefusal = e.clk.Now().Sub(start)
			if retries++; retries > 2*int(window/time.Millisecond) {
				t.Fatalf("a closed loop whose queue stands at %d was refused %d times in %v: shedding never ends", len(xs), retries, lastRefusal)
			}
			e.clk.Advance(time.Millisecond)
			e.h.Tick()
			e.h.Sync()
		}
	}
	if lastRefusal > 2*window {
		t.Fatalf("the closed loop was still refused %v after it began (window %v; %d refusals)", lastRefusal, window, retries)
	}
	if len(xs) < standing-2 {
		t.Fatalf("the queue fell from %d to %d: the test's loop is not closed", standing, len(xs))
	}
	releaseAll(t, e, leases, xs)
}
