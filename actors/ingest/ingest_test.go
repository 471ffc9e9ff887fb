package ingest

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

type fakePressure struct {
	st atomic.Pointer[pressure.State]
}

func (f *fakePressure) State() *pressure.State { return f.st.Load() }

func (f *fakePressure) set(sev pressure.Severity, goUsed, goLimit int64) {
	f.st.Store(&pressure.State{Severity: sev, Reason: "test", Sample: pressure.Sample{GoUsed: goUsed, GoLimit: goLimit}})
}

func spawn(t *testing.T, mut func(*Config)) (*Handle, *fakePressure) {
	t.Helper()
	sys := testutil.NewActorSystem()
	fp := &fakePressure{}
	fp.set(pressure.Normal, -1, -1)
	cfg := Config{
		Budget:    budget.Budget{Bytes: 8 * mib, CeilingBytes: 256 * mib, Source: budget.SourceOverride},
		LargeBody: 256 * kib, HardMax: 50 * mib, QueueWait: 2 * time.Second, MaxQueuedBytes: 64 * mib,
		HeapShedRatio: 0.75, Pressure: fp,
	}
	if mut != nil {
		mut(&cfg)
	}
	h, err := Spawn(sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Stop()
		sys.Shutdown()
	})
	return h, fp
}

// acquireAsync runs Acquire in a goroutine.
func acquireAsync(h *Handle, k string, n int64, count bool, gone <-chan struct{}) chan result {
	ch := make(chan result, 1)
	go func() {
		l, o := h.Acquire(key(k), n, count, gone)
		ch <- result{l, o}
	}()
	return ch
}

type result struct {
	l *Lease
	o messages.IngestOutcome
}

func waitResult(t *testing.T, ch chan result) result {
	t.Helper()
	return testutil.Recv(t, "Acquire returned", ch)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Until(t, what, cond)
}

func TestFastPathSendsNoMessage(t *testing.T) {
	h, _ := spawn(t, nil)
	l, o := h.Acquire(key("a"), 4*mib, true, nil)
	if o != messages.IngestAdmitted || l == nil || h.InflightBytes() != 4*mib || h.ActiveHeavy() != 1 {
		t.Fatalf("outcome %v inflight %d heavy %d", o, h.InflightBytes(), h.ActiveHeavy())
	}
	if n := h.slowPath.Load(); n != 0 {
		t.Fatalf("a grant that fits with nobody waiting sent %d messages", n)
	}
	l.ReleaseBytes()
	if h.InflightBytes() != 0 || h.ActiveHeavy() != 1 {
		t.Fatalf("ReleaseBytes keeps the heavy slot: inflight %d heavy %d", h.InflightBytes(), h.ActiveHeavy())
	}
	l.Release()
	l.Release()
	if h.ActiveHeavy() != 0 || h.InflightBytes() != 0 {
		t.Fatalf("double release: inflight %d heavy %d", h.InflightBytes(), h.ActiveHeavy())
	}
}

func TestQueueGrantsOnRelease(t *testing.T) {
	h, _ := spawn(t, nil)
	l1, _ := h.Acquire(key("a"), 6*mib, true, nil)
	ch := acquireAsync(h, "b", 4*mib, true, nil)
	// The actor counts the waiter before it publishes the queue's bytes
	// and lanes: wait for the whole snapshot.
	waitUntil(t, "a waiter in the snapshot", func() bool {
		s := h.Snapshot()
		return s.Waiting == 1 && s.QueuedBytes == 4*mib && len(s.Lanes) == 1
	})
	if s := h.Snapshot(); s.QueuedBytes != 4*mib || len(s.Lanes) != 1 || s.Lanes[0].Key() != "b" || s.Lanes[0].Waiting != 1 {
		t.Fatalf("snapshot while queued %+v", s)
	}
	// While someone waits the fast path is closed, even for what would fit.
	ch2 := acquireAsync(h, "c", 1*mib, true, nil)
	waitUntil(t, "a second waiter", func() bool { return h.Waiting() == 2 })
	l1.Release()
	r, r2 := waitResult(t, ch), waitResult(t, ch2)
	if r.o != messages.IngestAdmitted || r2.o != messages.IngestAdmitted || h.InflightBytes() != 5*mib {
		t.Fatalf("after release: %v %v inflight %d", r.o, r2.o, h.InflightBytes())
	}
	r.l.Release()
	r2.l.Release()
	// The waiter count is the actor's bookkeeping, updated after it
	// replies to the granted waiters: wait for it rather than race it.
	waitUntil(t, "the ledger back to zero", func() bool { return h.InflightBytes() == 0 && h.ActiveHeavy() == 0 && h.Waiting() == 0 })
}

func TestShedReasons(t *testing.T) {
	t.Run("bytes wait capped and shed as inflight_bytes_budget", func(t *testing.T) {
		h, _ := spawn(t, func(c *Config) { c.BudgetWaitCap = 30 * time.Millisecond })
		l, _ := h.Acquire(key("a"), 8*mib, true, nil)
		defer l.Release()
		start := time.Now()
		_, o := h.Acquire(key("b"), 1*mib, true, nil)
		if o != messages.ShedInflightBytesBudget || time.Since(start) > 2*time.Second {
			t.Fatalf("outcome %v after %v", o, time.Since(start))
		}
		if h.Sheds(messages.ShedInflightBytesBudget) != 1 {
			t.Fatal("shed not counted")
		}
	})
	t.Run("count cap wait is the queue wait and sheds queue_timeout", func(t *testing.T) {
		h, _ := spawn(t, func(c *Config) { c.CountCap, c.QueueWait = 1, 40*time.Millisecond })
		l, _ := h.Acquire(key("a"), 1*mib, true, nil)
		defer l.Release()
		_, o := h.Acquire(key("b"), 1*mib, true, nil)
		if o != messages.ShedQueueTimeout || h.Sheds(messages.ShedQueueTimeout) != 1 {
			t.Fatalf("outcome %v", o)
		}
	})
	t.Run("queue wait 0 rejects at once", func(t *testing.T) {
		h, _ := spawn(t, func(c *Config) { c.QueueWait = 0 })
		l, _ := h.Acquire(key("a"), 8*mib, true, nil)
		defer l.Release()
		if _, o := h.Acquire(key("b"), 1*mib, true, nil); o != messages.ShedInflightBytesBudget {
			t.Fatalf("outcome %v", o)
		}
	})
	t.Run("queued bytes over the bound never park", func(t *testing.T) {
		h, _ := spawn(t, func(c *Config) { c.MaxQueuedBytes = 4 * mib })
		l, _ := h.Acquire(key("a"), 8*mib, true, nil)
		ch := acquireAsync(h, "b", 3*mib, true, nil)
		waitUntil(t, "a waiter", func() bool { return h.Waiting() == 1 })
		if _, o := h.Acquire(key("c"), 2*mib, true, nil); o != messages.ShedQueuedBytesBudget {
			t.Fatalf("outcome %v", o)
		}
		l.Release()
		if r := waitResult(t, ch); r.o != messages.IngestAdmitted {
			t.Fatalf("waiter %v", r.o)
		} else {
			r.l.Release()
		}
	})
	t.Run("larger than the budget", func(t *testing.T) {
		h, _ := spawn(t, nil)
		if _, o := h.Acquire(key("a"), 9*mib, true, nil); o != messages.ShedBodyExceedsBudget || h.Sheds(messages.ShedBodyExceedsBudget) != 1 {
			t.Fatalf("outcome %v", o)
		}
	})
}

func TestCancelWhileQueuedIsNotAShed(t *testing.T) {
	h, _ := spawn(t, nil)
	l, _ := h.Acquire(key("a"), 8*mib, true, nil)
	defer l.Release()
	gone := make(chan struct{})
	ch := acquireAsync(h, "b", 1*mib, true, gone)
	waitUntil(t, "a waiter", func() bool { return h.Waiting() == 1 })
	close(gone)
	r := waitResult(t, ch)
	if r.o != messages.IngestCanceled || r.l != nil {
		t.Fatalf("outcome %v", r.o)
	}
	waitUntil(t, "the queue to empty", func() bool { return h.Waiting() == 0 && h.QueuedBytes() == 0 })
	if s := h.Snapshot(); s.ShedTotal != 0 {
		t.Fatalf("a client that left was counted as a shed: %+v", s.ShedsByReason)
	}
}

func TestHealthyHeadroom(t *testing.T) {
	h, fp := spawn(t, func(c *Config) { c.CountCap, c.Headroom, c.QueueWait = 1, 1, 0 })
	l1, o1 := h.Acquire(key("a"), 1*mib, true, nil)
	l2, o2 := h.Acquire(key("a"), 1*mib, true, nil)
	if o1 != messages.IngestAdmitted || o2 != messages.IngestAdmitted || h.ActiveHeavy() != 1 || h.ActiveHeadroom() != 1 {
		t.Fatalf("%v %v heavy %d headroom %d", o1, o2, h.ActiveHeavy(), h.ActiveHeadroom())
	}
	if _, o := h.Acquire(key("a"), 1*mib, true, nil); o != messages.ShedQueueTimeout {
		t.Fatalf("third: %v", o)
	}
	l2.Release()
	// With the heap over the shed ratio the headroom is closed.
	fp.set(pressure.Normal, 80, 100)
	if _, o := h.Acquire(key("a"), 1*mib, true, nil); o != messages.ShedQueueTimeout {
		t.Fatalf("headroom under heap pressure: %v", o)
	}
	l1.Release()
	if h.ActiveHeavy() != 0 || h.ActiveHeadroom() != 0 || h.InflightBytes() != 0 {
		t.Fatalf("not back to zero: %+v", h.Snapshot())
	}
}

func TestGrow(t *testing.T) {
	h, _ := spawn(t, nil)
	l, _ := h.Acquire(key("a"), 256*kib, true, nil)
	if o := l.Grow(key("a"), 2*mib, nil); o != messages.IngestAdmitted || l.Bytes() != 2*mib || h.InflightBytes() != 2*mib {
		t.Fatalf("grow: %v bytes %d inflight %d", o, l.Bytes(), h.InflightBytes())
	}
	if o := l.Grow(key("a"), 9*mib, nil); o != messages.ShedBodyExceedsBudget {
		t.Fatalf("grow past the budget: %v", o)
	}
	l.Release()
	if h.InflightBytes() != 0 {
		t.Fatalf("inflight %d", h.InflightBytes())
	}
}

func TestStopAnswersWaiters(t *testing.T) {
	sys := testutil.ActorSystem(t)
	h, err := Spawn(sys, Config{Budget: budget.Budget{Bytes: 8 * mib}, LargeBody: 256 * kib, QueueWait: time.Minute, BudgetWaitCap: time.Minute, MaxQueuedBytes: 64 * mib})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := h.Acquire(key("a"), 8*mib, true, nil)
	ch := acquireAsync(h, "b", 1*mib, true, nil)
	waitUntil(t, "a waiter", func() bool { return h.Waiting() == 1 })
	h.Stop()
	if r := waitResult(t, ch); r.o != messages.IngestStopped {
		t.Fatalf("outcome %v", r.o)
	}
	if _, o := h.Acquire(key("c"), 1*mib, true, nil); o != messages.IngestStopped {
		t.Fatalf("after stop: %v", o)
	}
	l.Release()
}

type fakeUpload struct{ aborted atomic.Bool }

func (f *fakeUpload) AbortRead() { f.aborted.Store(true) }

func TestCriticalPressureAbortsLargestUploadsFirst(t *testing.T) {
	h, _ := spawn(t, func(c *Config) { c.Budget.Bytes = 64 * mib })
	sizes := []int64{1 * mib, 20 * mib, 4 * mib, 12 * mib}
	ups := make([]*fakeUpload, len(sizes))
	leases := make([]*Lease, len(sizes))
	for i, n := range sizes {
		l, o := h.Acquire(key("k"), n, true, nil)
		if o != messages.IngestAdmitted {
			t.Fatal(o)
		}
		ups[i], leases[i] = &fakeUpload{}, l
		l.StartReading(ups[i])
	}
	// One upload is already read completely: it is no longer abortable.
	done, _ := h.Acquire(key("k"), 25*mib, true, nil)
	done.StartReading(&fakeUpload{})
	done.DoneReading()
	// One was granted, but its reader has not registered yet: the abort is
	// kept for it.
	late, _ := h.Acquire(key("k"), 2*mib, true, nil)
	samplePressure(h, pressure.High)
	testutil.Drain(t, h.root, h.pid) // an abort it sent would be done
	for _, u := range ups {
		if u.aborted.Load() {
			t.Fatal("high pressure must not abort uploads")
		}
	}
	samplePressure(h, pressure.Critical)
	// 39 MiB being read: the 20 MiB upload is half of it or more.
	waitUntil(t, "an abort", func() bool { return leases[1].Aborted() })
	testutil.Drain(t, h.root, h.pid) // the sample's whole abort run is done
	if ups[0].aborted.Load() || ups[2].aborted.Load() || ups[3].aborted.Load() || !ups[1].aborted.Load() || late.Aborted() {
		t.Fatalf("aborted %v %v %v %v; want only the 20 MiB upload", ups[0].aborted.Load(), ups[1].aborted.Load(), ups[2].aborted.Load(), ups[3].aborted.Load())
	}
	// The next critical sample takes the next largest.
	samplePressure(h, pressure.Critical)
	waitUntil(t, "the second abort", func() bool { return leases[3].Aborted() })
	// Critical samples go on until the late lease is aborted too; its
	// reader is stopped the moment it registers.
	for !late.Aborted() {
		samplePressure(h, pressure.Critical)
		time.Sleep(time.Millisecond)
	}
	lateUp := &fakeUpload{}
	late.StartReading(lateUp)
	if !lateUp.aborted.Load() {
		t.Fatal("a reader registering after the abort must be stopped at once")
	}
	for _, l := range append(leases, done, late) {
		l.Release()
	}
	if h.InflightBytes() != 0 {
		t.Fatalf("inflight %d", h.InflightBytes())
	}
}

func TestRetryAfterFollowsOccupancy(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	h, _ := spawn(t, func(c *Config) { c.Clock, c.QueueWait = clk, 2*time.Second })
	if got := h.RetryAfter(1); got != 2 {
		t.Fatalf("idle: %d, want the queue wait (2 s)", got)
	}
	old, _ := h.Acquire(key("a"), 1*mib, true, nil)
	clk.Advance(40 * time.Second)
	young, _ := h.Acquire(key("a"), 1*mib, true, nil)
	clk.Advance(9500 * time.Millisecond)
	if got := h.RetryAfter(2); got != 10 {
		t.Fatalf("youngest lease 9.5 s old: %d, want 10", got)
	}
	young.Release()
	if got := h.RetryAfter(2); got != 50 {
		t.Fatalf("youngest lease 49.5 s old: %d, want 50", got)
	}
	clk.Advance(time.Hour)
	if got := h.RetryAfter(2); got != 60 {
		t.Fatalf("clamped: %d", got)
	}
	old.Release()
	h2, _ := spawn(t, func(c *Config) { c.QueueWait = 0 })
	if got := h2.RetryAfter(2); got != 2 {
		t.Fatalf("floor: %d", got)
	}
	if got := h2.RetryAfter(0); got != 1 {
		t.Fatalf("minimum 1: %d", got)
	}
}

func TestSnapshotJSON(t *testing.T) {
	h, fp := spawn(t, func(c *Config) { c.CountCap = 3 })
	fp.set(pressure.High, -1, -1)
	h.Shed(messages.ShedResourcePressure)
	b, err := json.Marshal(h.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"activeHeavy":0`, `"activeHealthyHeadroom":0`, `"waiting":0`, `"queuedBytes":0`, `"shedTotal":1`,
		`"queue_timeout":0`, `"queued_bytes_budget":0`, `"body_exceeds_budget":0`, `"inflight_bytes_budget":0`, `"resource_pressure":1`,
		`"lanes":[]`, `"inflightBytes":0`, `"maxInflightBytes":8388608`, `"budgetSource":"override"`, `"pressureSeverity":"high"`,
		`"pressureReason":"test"`, `"countCapEnabled":true`} {
		if !strings.Contains(string(b), f) {
			t.Fatalf("snapshot %s lacks %s", b, f)
		}
	}
}

// TestLedgerUnderConcurrency hammers the fast and slow paths: reserved
// bytes never exceed the budget and return to zero.
func TestLedgerUnderConcurrency(t *testing.T) {
	h, _ := spawn(t, func(c *Config) {
		c.Budget.Bytes, c.MaxQueuedBytes, c.BudgetWaitCap = 4*mib, 1<<40, time.Second
	})
	var wg sync.WaitGroup
	var over atomic.Bool
	var admitted, shed atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			k := key(string(rune('a' + g%4)))
			for i := 0; i < 200; i++ {
				n := int64(256*kib) * int64(1+(g+i)%6)
				l, o := h.Acquire(k, n, true, nil)
				if h.InflightBytes() > 4*mib {
					over.Store(true)
				}
				if o != messages.IngestAdmitted {
					shed.Add(1)
					continue
				}
				admitted.Add(1)
				if i%2 == 0 {
					l.ReleaseBytes()
				}
				l.Release()
			}
		}(g)
	}
	wg.Wait()
	if over.Load() {
		t.Fatal("reserved bytes exceeded the budget")
	}
	if h.InflightBytes() != 0 || h.ActiveHeavy() != 0 || h.Waiting() != 0 {
		t.Fatalf("ledger not back to zero: %+v", h.Snapshot())
	}
	if admitted.Load() == 0 {
		t.Fatal("nothing admitted")
	}
	t.Logf("admitted %d, shed %d, slow path %d", admitted.Load(), shed.Load(), h.slowPath.Load())
}

// samplePressure sends the ingest actor a sampled pressure state, as the
// resource-pressure actor sends its subscribers.
func samplePressure(h *Handle, sev pressure.Severity) {
	h.root.Send(h.PID(), &messages.Published[*pressure.State]{Snapshot: &pressure.State{Severity: sev}})
}
