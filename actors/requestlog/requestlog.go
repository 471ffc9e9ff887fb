// Package requestlog writes the request log off the request path. A
// request hands its record over with Log, which never blocks: it appends
// a copy to the handle's pending list and drops (and counts) the record
// when QueueSize records are waiting. The writer takes the list on its
// tick, or sooner when a record fills it to a batch (that record sends the
// one message), so a busy gateway sends the writer a few messages a
// second, not one per request: waking an actor per record cost as much
// CPU as writing it. The actor writes one slog line per record
// (stdout mode) and commits records to the store (db mode): a full batch
// at once, and on every tick everything handed over before it, so a
// record is durable within one Tick (the commit interval) of its hand-over
// plus the commit's own time; a process killed at any moment loses at
// most the records of the last interval. It applies retention once an
// hour.
//
// Requests refused before their tenant's limits took them are not logged
// one record each (Refused): they are counted per tenant and error code
// and added to the store's hourly refusal counts on each tick, so that a
// flood of them costs a bounded number of rows.
//
// A write error (a full disk, a locked file) never stops serving: the
// batch is counted as failed, logging to the store pauses with an
// exponential backoff (records arriving meanwhile are counted as failed
// too), the gateway's log says so at each failed attempt and again when
// writing works again, and the health snapshot says so until it does.
package requestlog

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/messages"
)

// Defaults.
const (
	DefaultQueueSize = 8192
	DefaultBatchSize = 1024
	// DefaultTick is the commit interval: a record is committed at the
	// latest on the first tick after its hand-over.
	DefaultTick = 100 * time.Millisecond
	// MinUsageRetention keeps usage aggregates for at least two months,
	// whatever the log's retention, so monthly budgets and usage queries
	// see the current and the previous month.
	MinUsageRetention = 62 * 24 * time.Hour
	retentionEvery    = time.Hour
	writeTimeout      = 30 * time.Second
)

// writeBackoff is the pause after each failed write in a row: 1 s,
// doubling to a minute, without jitter (one writer per gateway: no herd
// to spread).
var writeBackoff = backoff.Policy{Base: time.Second, Max: time.Minute, Factor: 2}

// Options configure Spawn.
type Options struct {
	// Store receives batches (db mode); nil writes none.
	Store store.LogStore
	// Lines receives one line per record (stdout mode); nil writes none.
	Lines *slog.Logger
	// Log receives the writer's own warnings (a write that failed, and
	// writing working again); nil discards them.
	Log *slog.Logger
	// Clock gives the time and the tick's timer (nil: the wall clock).
	Clock clock.Clock
	// QueueSize bounds the records waiting for the actor.
	QueueSize int
	// BatchSize is the most records one transaction commits; a drain
	// that brings a full batch commits it at once.
	BatchSize int
	// Tick is the commit interval: on every tick the writer commits every
	// record handed over before it, adds the refusal counts and looks at
	// retention (default DefaultTick).
	Tick time.Duration
	// Retention deletes requests older than this (0 keeps them); usage
	// aggregates are kept at least MinUsageRetention.
	Retention time.Duration
}

// Health is the writer's state, for the health endpoint.
type Health struct {
	DB      bool  `json:"db"`
	Stdout  bool  `json:"stdout"`
	Queued  int64 `json:"queued"`
	Written int64 `json:"written"`
	Dropped int64 `json:"dropped"` // queue full: never reached the writer
	Failed  int64 `json:"failed"`  // lost to write errors or while paused after one
	// Refused counts requests refused before their tenant's limits took
	// them, handed over as counts (Refused), not records.
	Refused int64 `json:"refused"`
	// CommitIntervalMs is Tick: a record handed over is committed within
	// it (plus the commit's own time) while writes succeed.
	CommitIntervalMs int64      `json:"commitIntervalMs"`
	Errors           int64      `json:"writeErrors"`
	Deleted          int64      `json:"deletedByRetention"`
	Failing          bool       `json:"failing"`
	LastError        string     `json:"lastError,omitempty"`
	LastErrorAt      *time.Time `json:"lastErrorAt,omitempty"`
	// RetryAt is when the next write is tried while failing.
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

// Handle is what the request path holds.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	o    Options
	off  bool

	queued, written, dropped, failed, errors, deleted, refusedN atomic.Int64
	failing                                                     atomic.Bool
	lastErr                                                     atomic.Pointer[errState]

	// mu guards pending, the records Log handed over that the writer has
	// not taken, and refused, the refusals counted since the last tick.
	mu      sync.Mutex
	pending []store.Record
	refused map[string]*tally // by tenant id
	// text holds the ids Log copied (keep), guarded by mu.
	text []byte
}

// tally is one tenant's refusals by code since the writer's last tick.
type tally struct {
	name  string
	codes map[string]int64
}

// drain tells the writer that pending holds a whole batch.
type drain struct{}

type errState struct {
	msg     string
	at      time.Time
	retryAt time.Time
}

type tick struct{}

// supervisor restarts the writer after a panic. The restarted object is
// fresh; the batch the old one held is counted as failed before it goes.
// Five failures within a minute stop it: Log then fills the queue and
// counts every record as dropped, and serving goes on.
var supervisor = actor.NewOneForOneStrategy(5, time.Minute, actor.DefaultDecider)

// Spawn starts the writer. With neither a store nor a line logger it
// starts nothing and Log is a no-op (mode off).
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	o.Clock = clock.Or(o.Clock)
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	h := &Handle{root: system.Root, o: o, off: o.Store == nil && o.Lines == nil}
	if h.off {
		return h, nil
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &writer{h: h, backoff: backoff.Backoff{Policy: writeBackoff}} },
		actor.WithGuardian(supervisor))
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

// Refused counts a request refused before its tenant's limits took it
// (a bad key, an unknown model, a malformed body, the limits' own
// refusal), under its tenant and error code, without blocking: the
// writer adds the counts to the store's hourly refusal counts on its
// next tick (and writes one line per tenant and code in stdout mode). A
// refusal is never a record of its own, so a flood of them costs memory
// and rows bounded by tenants × codes: tenantID must come from a bounded
// set (configured and issued keys, and the caller's fixed buckets), code
// from the gateway's own codes.
func (h *Handle) Refused(tenantID []byte, tenantName, code string) {
	if h.off {
		return
	}
	h.refusedN.Add(1)
	h.mu.Lock()
	if h.refused == nil {
		h.refused = map[string]*tally{}
	}
	t := h.refused[string(tenantID)]
	if t == nil {
		t = &tally{name: tenantName, codes: map[string]int64{}}
		h.refused[string(tenantID)] = t
	}
	t.codes[code]++
	h.mu.Unlock()
}

// takeRefused takes the refusals counted since the last call.
func (h *Handle) takeRefused() map[string]*tally {
	h.mu.Lock()
	got := h.refused
	h.refused = nil
	h.mu.Unlock()
	return got
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
		Failed: h.failed.Load(), Refused: h.refusedN.Load(), Errors: h.errors.Load(), Deleted: h.deleted.Load(), Failing: h.failing.Load(),
		CommitIntervalMs: h.o.Tick.Milliseconds()}
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
	backoff     backoff.Backoff // writeBackoff
	// lostSince counts the records lost while writes fail, for the log
	// line that says writing works again.
	lostSince int64
	retryAt   time.Time
	nextTrim  time.Time
	ticks     repeat.Ticker
}

func (w *writer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		w.ticks.Start(ctx, w.h.o.Clock, w.h.o.Tick, tick{})
	case drain:
		w.drain()
	case tick:
		w.commit()
		w.retain(w.h.o.Clock.Now())
	case *actor.Restarting:
		// The fresh object will not have this batch, nor the records of
		// the drain that failed.
		w.h.queued.Add(-int64(w.held))
		w.h.failed.Add(int64(len(w.batch) + w.loose))
		w.batch, w.inbox = nil, nil
		w.ticks.Stop()
	case *actor.Stopping:
		w.ticks.Stop()
		w.commit()
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
		if w.paused(now) {
			w.h.failed.Add(int64(n))
			w.lostSince += int64(n)
		} else {
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

// paused reports whether store writes wait out the backoff after an
// error (records meanwhile are counted as failed).
func (w *writer) paused(now time.Time) bool { return w.h.failing.Load() && now.Before(w.retryAt) }

// commit is the tick's work: everything handed over is committed, and the
// refusal counts added.
func (w *writer) commit() {
	w.drain()
	now := w.h.o.Clock.Now()
	if len(w.batch) > 0 {
		w.flush(now, false)
	}
	w.refusals(now)
}

// refusals writes the refusal counts taken since the last tick: a line
// per tenant and code (stdout mode), one transaction of hourly counts
// (db mode).
func (w *writer) refusals(now time.Time) {
	got := w.h.takeRefused()
	if len(got) == 0 {
		return
	}
	rs := make([]store.Refusal, 0, len(got))
	for id, t := range got {
		for code, n := range t.codes {
			rs = append(rs, store.Refusal{Start: now, TenantID: id, TenantName: t.name, Code: code, Count: n})
		}
	}
	if l := w.h.o.Lines; l != nil {
		for i := range rs {
			l.LogAttrs(context.Background(), slog.LevelInfo, "refused", slog.String("tenant", rs[i].TenantName), slog.String("tenant_id", rs[i].TenantID),
				slog.String("error_code", rs[i].Code), slog.Int64("count", rs[i].Count))
		}
	}
	if w.h.o.Store == nil || w.paused(now) {
		return // counts lost while paused: the health's failing says so
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err := w.h.o.Store.AddRefusals(ctx, rs)
	cancel()
	if err != nil {
		w.fail(now, err, 0)
		return
	}
	w.recovered()
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
			lost := int64(len(w.batch))
			w.h.failed.Add(lost)
			w.batch = w.batch[:0]
			w.fail(now, err, lost)
			return
		}
		w.batch = w.batch[:copy(w.batch, w.batch[n:])]
		w.h.written.Add(int64(n))
		w.recovered()
	}
}

// fail pauses store writes for the next delay of the backoff: 1s after
// the first error, doubling to a minute. Each failed attempt is logged (at most one line per backoff:
// a few in the first minute, then one a minute), with the error (its
// full text: the operator's log may name the file) and what was lost.
//
// The error is logged and published before it is counted, so a reader
// that sees the count also sees this error.
func (w *writer) fail(now time.Time, err error, lost int64) {
	pause := w.backoff.Failed()
	w.retryAt = now.Add(pause)
	w.lostSince += lost
	w.h.o.Log.Warn("the request log cannot be written; serving goes on, records are counted as failed until a write succeeds",
		"err", sanitize.Secrets(err.Error()), "lostRecords", lost, "retryInMs", pause.Milliseconds())
	w.h.lastErr.Store(&errState{msg: store.PublicMessage(err, "write failed"), at: now, retryAt: w.retryAt})
	w.h.failing.Store(true)
	w.h.errors.Add(1)
}

// recovered ends a failing episode after a successful write: the backoff
// resets and the log says how many records the episode lost.
func (w *writer) recovered() {
	w.backoff.Succeeded()
	if w.h.failing.Swap(false) {
		w.h.o.Log.Info("the request log is written again", "lostRecords", w.lostSince)
	}
	w.lostSince = 0
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
		w.fail(now, err, 0)
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
