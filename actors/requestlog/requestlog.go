// Package requestlog writes the request log off the request path. A
// request hands its record over with Log, which never blocks: it appends
// a copy to the handle's pending list and drops (and counts) the record
// when QueueSize records are waiting. The writer takes the list on its
// tick, or sooner when a record fills it to a batch (that record sends the
// one message), so a busy gateway sends the writer a few messages a
// second, not one per request: waking an actor per record cost as much
// CPU as writing it. The actor writes one slog line per record
// (stdout mode) and batches records into the store (db mode), flushing
// when a batch is full or its oldest record has waited FlushInterval. It
// applies retention once an hour.
//
// A write error (a full disk, a locked file) never stops serving: the
// batch is counted as failed, logging to the store pauses with an
// exponential backoff (records arriving meanwhile are counted as failed
// too), and the health snapshot says so until a write succeeds again.
package requestlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/store"
)

// Defaults.
const (
	DefaultQueueSize     = 8192
	DefaultBatchSize     = 1024
	DefaultFlushInterval = time.Second
	DefaultTick          = 250 * time.Millisecond
	// MinUsageRetention keeps usage aggregates for at least two months,
	// whatever the log's retention, so monthly budgets and usage queries
	// see the current and the previous month.
	MinUsageRetention = 62 * 24 * time.Hour
	retentionEvery    = time.Hour
	maxBackoff        = time.Minute
	writeTimeout      = 30 * time.Second
)

// Options configure Spawn.
type Options struct {
	// Store receives batches (db mode); nil writes none.
	Store store.LogStore
	// Lines receives one line per record (stdout mode); nil writes none.
	Lines *slog.Logger
	Clock clock.Clock
	// QueueSize bounds the records waiting for the actor.
	QueueSize     int
	BatchSize     int
	FlushInterval time.Duration
	// Tick is how often the actor looks at the clock for flushes and
	// retention (default 250ms).
	Tick time.Duration
	// Retention deletes requests older than this (0 keeps them); usage
	// aggregates are kept at least MinUsageRetention.
	Retention time.Duration
}

// Health is the writer's state, for the health endpoint.
type Health struct {
	DB          bool       `json:"db"`
	Stdout      bool       `json:"stdout"`
	Queued      int64      `json:"queued"`
	Written     int64      `json:"written"`
	Dropped     int64      `json:"dropped"` // queue full: never reached the writer
	Failed      int64      `json:"failed"`  // lost to write errors or while paused after one
	Errors      int64      `json:"writeErrors"`
	Deleted     int64      `json:"deletedByRetention"`
	Failing     bool       `json:"failing"`
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	// RetryAt is when the next write is tried while failing.
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

// Handle is what the request path holds.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	o    Options
	off  bool

	queued, written, dropped, failed, errors, deleted atomic.Int64
	failing                                           atomic.Bool
	lastErr                                           atomic.Pointer[errState]

	// mu guards pending, the records Log handed over that the writer has
	// not taken.
	mu      sync.Mutex
	pending []store.Record
	// text holds the ids Log copied (keep), guarded by mu.
	text []byte
}

// drain tells the writer that pending holds a whole batch.
type drain struct{}

type errState struct {
	msg     string
	at      time.Time
	retryAt time.Time
}

type tick struct{}

type crash struct{}

// supervisor restarts the writer after a panic. The restarted object is
// fresh; the batch the old one held is counted as failed before it goes.
// Five failures within a minute stop it: Log then fills the queue and
// counts every record as dropped, and serving goes on.
var supervisor = actor.NewOneForOneStrategy(5, time.Minute, actor.DefaultDecider)

// Spawn starts the writer. With neither a store nor a line logger it
// starts nothing and Log is a no-op (mode off).
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	h := &Handle{root: system.Root, o: o, off: o.Store == nil && o.Lines == nil}
	if h.off {
		return h, nil
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &writer{h: h} }, actor.WithGuardian(supervisor))
	pid, err := system.Root.SpawnNamed(props, fmt.Sprintf("requestlog-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning the request log writer: %w", err)
	}
	h.pid = pid
	return h, nil
}

// Stop flushes what the writer holds and stops it.
func (h *Handle) Stop() {
	if h.pid != nil {
		_ = h.root.PoisonFuture(h.pid).Wait()
	}
}

// textChunk is the size of the buffers Log copies ids into.
const textChunk = 16 << 10

// Log hands a copy of r to the writer without blocking; false means the
// queue was full and the record was dropped (and counted). r stays the
// caller's (it can live on the caller's stack).
//
// requestID and tenantID, when not empty, replace r's RequestID and
// TenantID: Log copies them, so the request path passes the bytes it
// already holds and makes no string per request.
func (h *Handle) Log(r *store.Record, requestID, tenantID []byte) bool {
	if h.off {
		return true
	}
	if h.queued.Add(1) > int64(h.o.QueueSize) {
		h.queued.Add(-1)
		h.dropped.Add(1)
		return false
	}
	h.mu.Lock()
	h.pending = append(h.pending, *r)
	p := &h.pending[len(h.pending)-1]
	if len(requestID) > 0 {
		p.RequestID = h.keep(requestID)
	}
	if len(tenantID) > 0 {
		p.TenantID = h.keep(tenantID)
	}
	full := len(h.pending) == h.o.BatchSize
	h.mu.Unlock()
	if full {
		h.root.Send(h.pid, drain{})
	}
	return true
}

// keep copies b into the shared text buffer and returns it as a string;
// h.mu is held. The buffer is only ever appended to within its capacity
// and a full one is replaced, never reused, so the bytes behind a string
// it returned never change: records keep them alive until written.
func (h *Handle) keep(b []byte) string {
	if len(b) > cap(h.text)-len(h.text) {
		h.text = make([]byte, 0, max(textChunk, len(b)))
	}
	off := len(h.text)
	h.text = append(h.text, b...)
	return unsafe.String(&h.text[off], len(b))
}

// take swaps the pending records for spare (emptied).
func (h *Handle) take(spare []store.Record) []store.Record {
	h.mu.Lock()
	got := h.pending
	h.pending = spare[:0]
	h.mu.Unlock()
	return got
}

// Health reads the writer's counters; it sends no message.
func (h *Handle) Health() Health {
	v := Health{DB: h.o.Store != nil, Stdout: h.o.Lines != nil, Queued: h.queued.Load(), Written: h.written.Load(), Dropped: h.dropped.Load(),
		Failed: h.failed.Load(), Errors: h.errors.Load(), Deleted: h.deleted.Load(), Failing: h.failing.Load()}
	if e := h.lastErr.Load(); e != nil {
		at := e.at
		v.LastError, v.LastErrorAt = e.msg, &at
		if v.Failing {
			r := e.retryAt
			v.RetryAt = &r
		}
	}
	return v
}

type writer struct {
	h *Handle
	// inbox holds the records of the last drain. held of them are still
	// counted as queued, loose of them are neither in the batch nor
	// counted as failed (a restart settles both).
	inbox       []store.Record
	held, loose int
	batch       []store.Record
	oldest      time.Time
	backoff     time.Duration
	retryAt     time.Time
	nextTrim    time.Time
	stop        func()
}

func (w *writer) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		w.stop = repeat.Send(ctx.ActorSystem().Root, w.h.o.Tick, w.h.o.Tick, ctx.Self(), tick{})
	case drain:
		w.drain()
	case tick:
		w.drain()
		now := w.h.o.Clock.Now()
		if len(w.batch) > 0 && now.Sub(w.oldest) >= w.h.o.FlushInterval {
			w.flush(now, false)
		}
		w.retain(now)
	case *actor.Restarting:
		// The fresh object will not have this batch, nor the records of
		// the drain that failed.
		w.h.queued.Add(-int64(w.held))
		w.h.failed.Add(int64(len(w.batch) + w.loose))
		w.batch, w.inbox = nil, nil
		w.cancel()
	case *actor.Stopping:
		w.cancel()
		w.drain()
		if len(w.batch) > 0 {
			w.flush(w.h.o.Clock.Now(), false)
		}
	case crash:
		panic("requestlog: crash requested by a test")
	}
}

// drain records what Log handed over, all at once: a line each (stdout
// mode), then one append to the batch (db mode) under one clock read.
// Per record, the clock read and the queue counter cost the writer as
// much as encoding the record. The records stay counted as queued until
// a full batch is written, so a stuck store still bounds what waits to
// QueueSize.
func (w *writer) drain() {
	w.inbox = w.h.take(w.inbox)
	n := len(w.inbox)
	if n == 0 {
		return
	}
	w.held, w.loose = n, n
	if l := w.h.o.Lines; l != nil {
		for i := range w.inbox {
			line(l, &w.inbox[i])
		}
	}
	if w.h.o.Store != nil {
		now := w.h.o.Clock.Now()
		if w.h.failing.Load() && now.Before(w.retryAt) {
			w.h.failed.Add(int64(n)) // paused after a write error
		} else {
			if len(w.batch) == 0 {
				w.oldest = now
			}
			w.batch = append(w.batch, w.inbox...)
		}
	}
	w.loose = 0
	if len(w.batch) >= w.h.o.BatchSize {
		w.flush(w.h.o.Clock.Now(), true)
	}
	w.h.queued.Add(-int64(n))
	w.held = 0
}

func (w *writer) cancel() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
}

// flush writes the batch in transactions of at most BatchSize records
// (a drain can bring more at once): full, when the flush is for size, or
// all of it. A write error counts the rest of the batch as failed.
func (w *writer) flush(now time.Time, full bool) {
	size := w.h.o.BatchSize
	for len(w.batch) > 0 && (!full || len(w.batch) >= size) {
		n := min(len(w.batch), size)
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := w.h.o.Store.InsertRequests(ctx, w.batch[:n])
		cancel()
		if err != nil {
			w.h.failed.Add(int64(len(w.batch)))
			w.batch = w.batch[:0]
			w.fail(now, err)
			return
		}
		w.batch = w.batch[:copy(w.batch, w.batch[n:])]
		w.h.written.Add(int64(n))
		w.backoff = 0
		w.h.failing.Store(false)
	}
	if len(w.batch) > 0 {
		w.oldest = now // what a size flush left waits from now
	}
}

// fail pauses store writes: 1s after the first error, doubling to a
// minute.
//
// The error is published before it is counted, so a reader that sees the
// count also sees this error.
func (w *writer) fail(now time.Time, err error) {
	w.backoff = min(max(2*w.backoff, time.Second), maxBackoff)
	w.retryAt = now.Add(w.backoff)
	w.h.lastErr.Store(&errState{msg: sanitize.Message(err.Error(), "write failed"), at: now, retryAt: w.retryAt})
	w.h.failing.Store(true)
	w.h.errors.Add(1)
}

func (w *writer) retain(now time.Time) {
	if w.h.o.Store == nil || w.h.o.Retention <= 0 || now.Before(w.nextTrim) {
		return
	}
	w.nextTrim = now.Add(retentionEvery)
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	n, err := w.h.o.Store.DeleteBefore(ctx, now.Add(-w.h.o.Retention), now.Add(-max(w.h.o.Retention, MinUsageRetention)))
	w.h.deleted.Add(n)
	if err != nil {
		w.fail(now, err)
	}
}

// line writes r as one slog line. Every field is an id, a name, a class or
// a number: nothing secret.
func line(l *slog.Logger, r *store.Record) {
	l.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.Time("time", r.Time), slog.String("request_id", r.RequestID),
		slog.String("tenant", r.TenantName), slog.String("tenant_id", r.TenantID),
		slog.String("model", r.Model), slog.String("target", r.Target),
		slog.String("caller_dialect", r.CallerDialect), slog.String("upstream_dialect", r.UpstreamDialect),
		slog.Int("status", r.Status), slog.String("error_code", r.ErrorCode),
		slog.Int("attempts", r.Attempts), slog.Int("fallbacks", r.Fallbacks),
		slog.Int64("admission_wait_ms", r.AdmissionWait.Milliseconds()), slog.Int64("ttft_ms", r.TTFT.Milliseconds()),
		slog.Int64("latency_ms", r.Latency.Milliseconds()),
		slog.Int64("tokens_in", r.TokensIn), slog.Int64("tokens_out", r.TokensOut), slog.Int64("tokens_cached", r.TokensCached),
		slog.Float64("cost_usd", pricing.USD(r.CostNano)), slog.String("client_ip", string(r.ClientIP)),
		slog.String("changes", r.Changes))
}
