package requestlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

func system(t *testing.T) *actor.ActorSystem { return testutil.ActorSystem(t) }

func db(t *testing.T, o sqlite.Options) *sqlite.DB {
	d, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func rec(i int) *store.Record {
	return &store.Record{Time: t0, RequestID: fmt.Sprintf("req_%d", i), TenantID: "key_a", TenantName: "a", Model: "m", Target: "p/c/m",
		CallerDialect: "openai", UpstreamDialect: "openai", Status: 200, Attempts: 1, Latency: time.Second, TokensIn: 10, TokensOut: 5,
		CostNano: 2500, ClientIP: store.IPLoopback}
}

func until(t *testing.T, what string, cond func() bool) { t.Helper(); testutil.Until(t, what, cond) }

func count(t *testing.T, d store.LogStore) int {
	p, err := d.Requests(context.Background(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Records)
}

// TestEveryTickCommitsWhatWasHandedOver: a full batch is committed at
// once; what is left is committed by the next tick, however few records
// it holds, so a record is durable within one commit interval of its
// hand-over (the fake clock's hour is the interval: the test decides when
// it ends).
func TestEveryTickCommitsWhatWasHandedOver(t *testing.T) {
	d := db(t, sqlite.Options{})
	clk := clock.NewFake(t0)
	h, err := Spawn(system(t), Options{Store: d, Clock: clk, BatchSize: 5, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	until(t, "the tick armed", func() bool { return clk.Pending() == 1 })
	for i := 0; i < 5; i++ {
		if !h.Log(rec(i), nil, nil) {
			t.Fatal("dropped with an empty queue")
		}
	}
	until(t, "a full batch written without a tick", func() bool { return h.Health().Written == 5 })
	for i := 5; i < 12; i++ {
		h.Log(rec(i), nil, nil)
	}
	clk.Advance(time.Hour)
	until(t, "the rest committed by the tick", func() bool { return h.Health().Written == 12 })
	h.Log(rec(12), nil, nil) // one record alone
	clk.Advance(time.Hour)
	until(t, "a single record committed by the next tick", func() bool { return h.Health().Written == 13 })
	if n := count(t, d); n != 13 || h.Health().Queued != 0 {
		t.Fatalf("%d rows, health %+v", n, h.Health())
	}
	if u, _ := d.Usage(context.Background(), store.UsageQuery{}); len(u) != 1 || u[0].Requests != 13 || u[0].CostNano != 13*2500 {
		t.Fatalf("usage %+v", u)
	}
	if hl := h.Health(); hl.CommitIntervalMs != time.Hour.Milliseconds() {
		t.Fatalf("health %+v", hl)
	}
}

// TestRefusalsAreCountsNotRecords: refusals handed over are added to the
// hourly counts per tenant and code on the next tick; none becomes a
// record, however many arrive.
func TestRefusalsAreCountsNotRecords(t *testing.T) {
	d := db(t, sqlite.Options{})
	h, err := Spawn(system(t), Options{Store: d, Clock: clock.NewFake(t0), Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	for i := 0; i < 5000; i++ {
		h.Refused([]byte("key_a"), "a", "model_not_found")
	}
	h.Refused([]byte("key_a"), "a", "rate_limit_exceeded")
	h.Refused([]byte("unidentified"), "unidentified", "invalid_api_key")
	h.root.Send(h.pid, tick{})
	until(t, "the counts committed", func() bool {
		rs, err := d.Refusals(context.Background(), store.UsageQuery{})
		return err == nil && len(rs) == 3
	})
	rs, _ := d.Refusals(context.Background(), store.UsageQuery{})
	if rs[0].TenantID != "key_a" || rs[0].Code != "model_not_found" || rs[0].Count != 5000 || !rs[0].Start.Equal(t0) {
		t.Fatalf("refusals %+v", rs)
	}
	if n := count(t, d); n != 0 || h.Health().Refused != 5002 {
		t.Fatalf("%d records for refusals, health %+v", n, h.Health())
	}
	// The next hour's refusals add to their own hour.
	h.Refused([]byte("key_a"), "a", "model_not_found")
	h.root.Send(h.pid, tick{})
	until(t, "added to the same tenant and code", func() bool {
		rs, _ := d.Refusals(context.Background(), store.UsageQuery{})
		return len(rs) == 3 && rs[0].Count == 5001
	})
}

// blockingStore holds every insert until released.
type blockingStore struct {
	store.LogStore
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (b *blockingStore) InsertRequests(_ context.Context, recs []store.Record) error {
	<-b.release
	b.mu.Lock()
	b.got += len(recs)
	b.mu.Unlock()
	return nil
}

func TestFullQueueDropsAndNeverBlocks(t *testing.T) {
	bs := &blockingStore{release: make(chan struct{})}
	h, err := Spawn(system(t), Options{Store: bs, Clock: clock.NewFake(t0), BatchSize: 1, QueueSize: 4, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	accepted, dropped := 0, 0
	// The writer is stuck in its first insert; Log must keep returning.
	for i := 0; i < 100; i++ {
		if h.Log(rec(i), nil, nil) {
			accepted++
		} else {
			dropped++
		}
	}
	if dropped == 0 || accepted > 4+1 || h.Health().Dropped != int64(dropped) {
		t.Fatalf("accepted %d, dropped %d, health %+v", accepted, dropped, h.Health())
	}
	close(bs.release)
	until(t, "accepted records written", func() bool { return h.Health().Written == int64(accepted) })
	h.Stop()
	if bs.got != accepted {
		t.Fatalf("store got %d of %d", bs.got, accepted)
	}
}

func TestFullDiskStopsLoggingNotServing(t *testing.T) {
	d := db(t, sqlite.Options{MaxPages: 16})
	clk := clock.NewFake(t0)
	var logged testutil.SyncBuffer
	h, err := Spawn(system(t), Options{Store: d, Clock: clk, BatchSize: 2000, Tick: time.Hour, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	for i := 0; i < 2000; i++ {
		if !h.Log(rec(i), nil, nil) {
			t.Fatal("Log refused while the disk is full")
		}
	}
	until(t, "the write error reported", func() bool { return h.Health().Errors == 1 })
	hl := h.Health()
	if !hl.Failing || hl.Failed != 2000 || hl.Written != 0 || !strings.Contains(hl.LastError, "full") || hl.RetryAt == nil || !hl.RetryAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("health %+v", hl)
	}
	// The gateway's log says so (the health alone is not watched).
	if l := logged.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "the request log cannot be written") || !strings.Contains(l, "lostRecords=2000") {
		t.Fatalf("log: %s", l)
	}
	// Paused: records are counted, not written, and Log still returns.
	for i := 0; i < 10; i++ {
		if !h.Log(rec(1000+i), nil, nil) {
			t.Fatal("Log refused while paused")
		}
	}
	h.root.Send(h.pid, tick{})
	until(t, "paused records counted", func() bool { return h.Health().Failed == 2010 })
	// After the backoff the next batch is tried again, and fails again
	// with a doubled backoff.
	clk.Advance(time.Second)
	for i := 0; i < 2000; i++ {
		h.Log(rec(5000+i), nil, nil)
	}
	until(t, "the second attempt failed", func() bool { return h.Health().Errors == 2 })
	if hl := h.Health(); !hl.RetryAt.Equal(t0.Add(3*time.Second)) || hl.Written != 0 {
		t.Fatalf("health %+v", hl)
	}
	if n := strings.Count(logged.String(), "the request log cannot be written"); n != 2 {
		t.Fatalf("%d warnings for two failed writes: %s", n, logged.String())
	}
}

func TestStdoutLines(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	h, err := Spawn(system(t), Options{Lines: slog.New(slog.NewJSONHandler(w, nil)), Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		h.Log(rec(i), nil, nil)
	}
	h.Stop()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &v); err != nil || v["msg"] != "request" || v["request_id"] != "req_2" || v["cost_usd"] != 2.5e-6 || v["status"] != 200.0 || v["client_ip"] != "loopback" {
		t.Fatalf("%v %v", v, err)
	}
	if hl := h.Health(); hl.DB || !hl.Stdout {
		t.Fatalf("%+v", hl)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRestartLosesNothingHandedOver: records wait in the handle, not in
// the writer, between ticks: a writer that fails and restarts commits
// them on its first tick.
func TestRestartLosesNothingHandedOver(t *testing.T) {
	d := db(t, sqlite.Options{})
	h, err := Spawn(system(t), Options{Store: d, Clock: clock.NewFake(t0), BatchSize: 100, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	for i := 0; i < 3; i++ {
		h.Log(rec(i), nil, nil)
	}
	h.root.Send(h.pid, messages.Crash{Reason: "test"})
	h.Log(rec(10), nil, nil)
	h.root.Send(h.pid, tick{})
	until(t, "written after the restart", func() bool { return h.Health().Written == 4 })
	if hl := h.Health(); hl.Failed != 0 || hl.Queued != 0 {
		t.Fatalf("health %+v", hl)
	}
}

func TestStopFlushesAndRetentionDeletes(t *testing.T) {
	d := db(t, sqlite.Options{})
	old := rec(1)
	old.Time = t0.Add(-48 * time.Hour)
	if err := d.InsertRequests(context.Background(), []store.Record{*old}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	h, err := Spawn(system(t), Options{Store: d, Clock: clk, BatchSize: 100, Tick: 2 * time.Millisecond, Retention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "the tick armed", func() bool { return clk.Pending() == 1 })
	clk.Advance(2 * time.Millisecond)
	until(t, "retention applied", func() bool { return h.Health().Deleted == 1 })
	h.Log(rec(2), nil, nil)
	h.Stop()
	if n := count(t, d); n != 1 || h.Health().Written != 1 {
		t.Fatalf("%d rows after stop, health %+v", n, h.Health())
	}
}

func TestOffLogsNothing(t *testing.T) {
	h, err := Spawn(system(t), Options{})
	if err != nil || !h.Log(rec(1), nil, nil) {
		t.Fatal(err)
	}
	h.Stop()
	if hl := h.Health(); hl.Queued != 0 || hl.DB || hl.Stdout {
		t.Fatalf("%+v", hl)
	}
}

// sizesStore records the size of every insert; the first one waits for
// release.
type sizesStore struct {
	store.LogStore
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (s *sizesStore) InsertRequests(_ context.Context, recs []store.Record) error {
	s.mu.Lock()
	first := len(s.sizes) == 0
	s.sizes = append(s.sizes, len(recs))
	s.mu.Unlock()
	if first {
		<-s.release
	}
	return nil
}

// TestDrainWritesWholeBatches: records that pile up while the store is
// slow are taken in one drain and still written BatchSize at a time,
// the rest waiting for the tick.
func TestDrainWritesWholeBatches(t *testing.T) {
	ss := &sizesStore{release: make(chan struct{})}
	clk := clock.NewFake(t0)
	h, err := Spawn(system(t), Options{Store: ss, Clock: clk, BatchSize: 5, QueueSize: 100, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	for i := 0; i < 5; i++ {
		h.Log(rec(i), nil, nil)
	}
	until(t, "the first batch in the store", func() bool { ss.mu.Lock(); defer ss.mu.Unlock(); return len(ss.sizes) == 1 })
	for i := 5; i < 17; i++ { // 12 more pile up behind the stuck insert
		h.Log(rec(i), nil, nil)
	}
	close(ss.release)
	until(t, "three batches written", func() bool { return h.Health().Written == 15 })
	ss.mu.Lock()
	sizes := append([]int(nil), ss.sizes...)
	ss.mu.Unlock()
	for _, n := range sizes {
		if n != 5 {
			t.Fatalf("insert sizes %v: want batches of 5", sizes)
		}
	}
	if q := h.Health().Queued; q != 0 {
		t.Fatalf("%d still queued after the drain", q)
	}
}

// capturingStore keeps copies of every record inserted.
type capturingStore struct {
	store.LogStore
	mu   sync.Mutex
	recs []store.Record
}

func (c *capturingStore) InsertRequests(_ context.Context, recs []store.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, recs...)
	c.mu.Unlock()
	return nil
}

// The ids Log takes as bytes are copied: the caller reuses its buffer at
// once (as the request path does), and records written later, across
// several of the writer's text buffers, still hold their own ids.
func TestRequestIDsAreCopied(t *testing.T) {
	cs := &capturingStore{}
	h, err := Spawn(system(t), Options{Store: cs, BatchSize: 64, QueueSize: 4096, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500 // about 70 KB of ids: more than four text buffers
	rid, tid := make([]byte, 0, 64), make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		rid = fmt.Appendf(rid[:0], "req_%026d", i)
		tid = fmt.Appendf(tid[:0], "key_%016d", i)
		if !h.Log(rec(i), rid, tid) {
			t.Fatal("dropped with room in the queue")
		}
		copy(rid, "XXXXXXXX") // the caller's buffer changes at once
		copy(tid, "YYYYYYYY")
	}
	until(t, "every record written", func() bool { return h.Health().Written == n })
	h.Stop()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.recs) != n {
		t.Fatalf("%d records written, want %d", len(cs.recs), n)
	}
	for i, r := range cs.recs {
		if want := fmt.Sprintf("req_%026d", i); r.RequestID != want {
			t.Fatalf("record %d: request id %q, want %q", i, r.RequestID, want)
		}
		if want := fmt.Sprintf("key_%016d", i); r.TenantID != want {
			t.Fatalf("record %d: tenant id %q, want %q", i, r.TenantID, want)
		}
		if r.TenantName != "a" || r.Status != 200 {
			t.Fatalf("record %d lost its other fields: %+v", i, r)
		}
	}
}
