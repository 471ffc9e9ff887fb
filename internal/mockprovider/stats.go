package mockprovider

import (
	"sync"
	"sync/atomic"
	"time"
)

// Counters is the ground truth about requests, as reported by /_mock/stats.
// Every request counted in Requests ends in exactly one of Completed, Failed
// (the mock answered with an injected or real error, or ended the request at
// shutdown) or Cancelled (the client went away before the mock finished).
// Inflight counts requests being served (holding a slot, if Slots is set);
// Queued counts requests waiting for a slot.
type Counters struct {
	Requests    int64 `json:"requests"`
	Inflight    int64 `json:"inflight"`
	MaxInflight int64 `json:"max_inflight"`
	Queued      int64 `json:"queued"`
	Completed   int64 `json:"completed"`
	Failed      int64 `json:"failed"`
	Cancelled   int64 `json:"cancelled"`
	BytesIn     int64 `json:"bytes_in"`
	// InflightNS and QueuedNS are the time integrals of Inflight and Queued
	// (request-nanoseconds) since start or the last reset, up to the moment
	// the counters were read: the mean in flight between two reads is the
	// difference of InflightNS over the time between them (Stats.At), exact
	// however short the requests are, where sampling Inflight would alias.
	InflightNS int64 `json:"inflight_ns"`
	QueuedNS   int64 `json:"queued_ns"`
	// ToolCalls counts requests a tool script answered with its call;
	// ToolResults those it answered with its reply because they carried
	// that call's result: together, proof that a client's tool loop made
	// the round trip.
	ToolCalls   int64 `json:"tool_calls"`
	ToolResults int64 `json:"tool_results"`
}

// Stats is the body of GET /_mock/stats.
type Stats struct {
	// At is when the counters were read (for the integrals).
	At     time.Time           `json:"at"`
	Totals Counters            `json:"totals"`
	Models map[string]Counters `json:"models"`
	// Bodies are the most recent requests (up to 1000), oldest first.
	Bodies []BodyRecord `json:"bodies"`
}

// BodyRecord identifies one received request body exactly.
type BodyRecord struct {
	Seq    uint64 `json:"seq"`
	Path   string `json:"path"`
	Model  string `json:"model"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"` // hex digest of the exact body bytes received
	// Headers are the request headers with lower-case names; repeated
	// headers are joined with ", ".
	Headers map[string]string `json:"headers"`
}

// monoEpoch anchors the integrals' monotonic clock.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

type counters struct {
	requests, inflight, maxInflight, queued atomic.Int64
	completed, failed, cancelled, bytesIn   atomic.Int64
	toolCalls, toolResults                  atomic.Int64

	// The integrals advance under mu whenever a gauge changes, so the area
	// always belongs to the value that held; the gauges stay atomics for
	// lock-free reads.
	mu                   sync.Mutex
	last                 int64 // monoNow of the last gauge change
	inflightNS, queuedNS int64
}

// advanceLocked adds the gauges' area since the last change.
func (c *counters) advanceLocked(now int64) {
	if c.last != 0 {
		dt := now - c.last
		c.inflightNS += c.inflight.Load() * dt
		c.queuedNS += c.queued.Load() * dt
	}
	c.last = now
}

func (c *counters) snapshot() Counters {
	c.mu.Lock()
	c.advanceLocked(monoNow())
	inNS, qNS := c.inflightNS, c.queuedNS
	c.mu.Unlock()
	return Counters{
		Requests: c.requests.Load(), Inflight: c.inflight.Load(), MaxInflight: c.maxInflight.Load(),
		Queued: c.queued.Load(), Completed: c.completed.Load(), Failed: c.failed.Load(),
		Cancelled: c.cancelled.Load(), BytesIn: c.bytesIn.Load(), InflightNS: inNS, QueuedNS: qNS,
		ToolCalls: c.toolCalls.Load(), ToolResults: c.toolResults.Load(),
	}
}

// reset zeroes the history but keeps the live gauges (inflight, queued), so
// requests that straddle a reset still balance.
func (c *counters) reset() {
	c.requests.Store(0)
	c.completed.Store(0)
	c.failed.Store(0)
	c.cancelled.Store(0)
	c.bytesIn.Store(0)
	c.toolCalls.Store(0)
	c.toolResults.Store(0)
	c.maxInflight.Store(c.inflight.Load())
	c.mu.Lock()
	c.advanceLocked(monoNow())
	c.inflightNS, c.queuedNS = 0, 0
	c.mu.Unlock()
}

func (c *counters) enter() {
	c.mu.Lock()
	c.advanceLocked(monoNow())
	n := c.inflight.Add(1)
	c.mu.Unlock()
	for {
		m := c.maxInflight.Load()
		if n <= m || c.maxInflight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *counters) leave() {
	c.mu.Lock()
	c.advanceLocked(monoNow())
	c.inflight.Add(-1)
	c.mu.Unlock()
}

// queue moves the queued gauge by d.
func (c *counters) queue(d int64) {
	c.mu.Lock()
	c.advanceLocked(monoNow())
	c.queued.Add(d)
	c.mu.Unlock()
}

// modelEntry is the per-model state: counters, the concurrency slots and the
// rate-limit window. Entries live as long as the server, so requests keep
// plain pointers to them.
type modelEntry struct {
	name string
	c    counters

	mu   sync.Mutex
	rate rateWindow

	// pool is the concurrency cap (slotpool.go), resized in place when the
	// configured Slots change.
	pool slotPool
}

// slots returns the model's slot pool sized for n concurrent requests.
func (m *modelEntry) slots(n int) *slotPool {
	m.pool.resize(n)
	return &m.pool
}

// entry returns the model's state, creating it on first use. The read path
// takes only a read lock and does not allocate.
func (s *Server) entry(model []byte) *modelEntry {
	s.modelsMu.RLock()
	m := s.models[string(model)]
	s.modelsMu.RUnlock()
	if m != nil {
		return m
	}
	s.modelsMu.Lock()
	defer s.modelsMu.Unlock()
	if m = s.models[string(model)]; m == nil {
		m = &modelEntry{name: string(model)}
		s.models[m.name] = m
	}
	return m
}

func (s *Server) stats() Stats {
	st := Stats{At: time.Now(), Totals: s.totals.snapshot(), Models: map[string]Counters{}}
	s.modelsMu.RLock()
	for name, m := range s.models {
		c := m.c.snapshot()
		if c == (Counters{}) {
			continue // reset and idle
		}
		st.Models[name] = c
	}
	s.modelsMu.RUnlock()
	st.Bodies = s.bodies.records()
	return st
}

func (s *Server) resetStats() {
	s.totals.reset()
	s.modelsMu.RLock()
	for _, m := range s.models {
		m.c.reset()
		m.mu.Lock()
		m.rate = rateWindow{}
		m.mu.Unlock()
	}
	s.modelsMu.RUnlock()
	s.bodies.reset()
}
