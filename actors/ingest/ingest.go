// Package ingest owns the process-wide ingest byte budget: how many request
// body bytes the gateway holds at once, who waits for them, and in which
// order waiters are served.
//
// Goals: a body is admitted before it is read, so memory is bounded by the
// budget rather than by what clients send; capacity is one process-wide
// figure (a burst of new or forged keys cannot raise it, keys only order
// waiters); waiters are served fairly by bytes; and the decision for a
// small body costs a couple of atomic loads.
//
// Fast path (no message): bodies under the heavy threshold never reserve;
// a heavy reservation that fits while nobody waits is claimed with a CAS
// on the published Handle. Slow path: the caller sends one AcquireBytes
// with a pooled reply channel, and the actor queues it in per-key FIFO
// queues served by byte-weighted deficit round robin with anti-starvation
// (see fairQueue), bounded in wait time and in queued bytes. While anyone
// waits, the fast path is closed, so newcomers queue behind the waiters.
//
// Non-goals: deciding what is heavy (the transport does: declared size,
// running total of a chunked upload, structural weight) and reading
// bodies. Memory pressure comes from the resource-pressure actor's
// published state; under critical pressure the actor aborts the largest
// uploads still being read first.
package ingest

import (
	"cmp"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/budget"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/messages"
)

// Defaults of the Config fields that have no environment variable.
const (
	// DefaultBudgetWaitCap caps the wait for bytes (as opposed to a count
	// slot): leases last as long as uploads and upstream answers, so a long
	// wait for bytes mostly delays the 503.
	DefaultBudgetWaitCap = 250 * time.Millisecond
	// DefaultStarveAfter is how long a head may be passed over by smaller
	// waiters before capacity is reserved for it.
	DefaultStarveAfter = 100 * time.Millisecond
	// DefaultMaxWaiters bounds the queue length whatever the byte sizes.
	DefaultMaxWaiters = 4096
	// highPressureWaitDivisor shortens every wait under high pressure.
	highPressureWaitDivisor = 4
)

// PressureSource is where the ingest handle reads memory pressure: the
// resource-pressure actor's handle.
type PressureSource interface {
	State() *pressure.State
}

// Config configures the ingest actor. Zero values take the defaults noted.
type Config struct {
	Budget budget.Budget
	// LargeBody is the heavy threshold: smaller bodies do not reserve.
	LargeBody int64
	// HardMax is the largest body accepted at all.
	HardMax int64
	// CountCap > 0 caps heavy requests in flight; Headroom adds slots
	// usable on the fast path while the heap is below HeapShedRatio.
	CountCap      int
	Headroom      int
	HeapShedRatio float64
	// QueueWait bounds any wait; 0 rejects at once.
	QueueWait time.Duration
	// MaxQueuedBytes bounds the bytes of all waiting requests.
	MaxQueuedBytes int64
	// BudgetWaitCap (DefaultBudgetWaitCap), StarveAfter
	// (DefaultStarveAfter), MaxWaiters (DefaultMaxWaiters), Quantum (the
	// deficit round robin quantum; LargeBody).
	BudgetWaitCap time.Duration
	StarveAfter   time.Duration
	MaxWaiters    int
	Quantum       int64
	// Weight gives a key's share (default 1 for every key).
	Weight   func(key [20]byte) int64
	Clock    clock.Clock
	Pressure PressureSource
	Log      *slog.Logger
}

// Slots a lease may hold besides bytes.
const (
	slotNone uint8 = iota
	slotHeavy
	slotHeadroom
)

// Handle is what the transport holds. Its fields above the actor's are
// immutable after Spawn; the atomics are the shared ledger that the fast
// path and the actor both update.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	cfg  Config
	max  int64
	clk  clock.Clock
	done chan struct{}

	inflight    atomic.Int64 // bytes reserved
	heavy       atomic.Int64 // heavy requests in flight (count slots)
	headroom    atomic.Int64 // healthy-headroom slots in use
	waiting     atomic.Int64 // queued requests (published by the actor)
	queuedBytes atomic.Int64 // their bytes (published by the actor)
	wakePending atomic.Bool
	sheds       [messages.NumIngestOutcomes]atomic.Uint64
	lanes       atomic.Pointer[[]LaneView]

	leases   registry
	reqPool  sync.Pool
	stopped  atomic.Bool
	slowPath atomic.Uint64 // AcquireBytes messages sent
}

// strategy restarts the ingest actor after a panic: every heavy upload's
// admission goes through it, so it must come back. What must survive
// (bytes and slots reserved, shed counts) lives in the Handle; the fresh
// actor starts with an empty queue, the failed one having answered its
// waiters (see Restarting).
var strategy = supervise.Restart("ingest")

var wakeMsg = &wake{}

type wake struct{}

// Spawn starts the ingest actor.
func Spawn(system *actor.ActorSystem, cfg Config) (*Handle, error) {
	cfg.Clock = clock.Or(cfg.Clock)
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	if cfg.BudgetWaitCap <= 0 {
		cfg.BudgetWaitCap = DefaultBudgetWaitCap
	}
	if cfg.StarveAfter <= 0 {
		cfg.StarveAfter = DefaultStarveAfter
	}
	if cfg.MaxWaiters <= 0 {
		cfg.MaxWaiters = DefaultMaxWaiters
	}
	if cfg.Quantum <= 0 {
		cfg.Quantum = max(cfg.LargeBody, 1)
	}
	if cfg.Budget.Bytes <= 0 {
		return nil, fmt.Errorf("ingest: budget of %d bytes; derive it with budget.Resolve", cfg.Budget.Bytes)
	}
	h := &Handle{root: system.Root, cfg: cfg, max: cfg.Budget.Bytes, clk: cfg.Clock, done: make(chan struct{})}
	h.reqPool.New = func() any { return &acquireBytes{Reply: make(chan messages.IngestOutcome, 1)} }
	empty := []LaneView{}
	h.lanes.Store(&empty)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newIngestActor(h) }, actor.WithGuardian(strategy)),
		fmt.Sprintf("ingest-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning ingest actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

// Stop stops the actor; queued requests are answered IngestStopped and
// later slow-path requests fail the same way at once.
func (h *Handle) Stop() {
	if h.stopped.CompareAndSwap(false, true) {
		_ = h.root.PoisonFuture(h.pid).Wait()
		close(h.done)
	}
}

// Budget returns the byte budget.
func (h *Handle) Budget() budget.Budget { return h.cfg.Budget }

// LargeBody returns the heavy threshold.
func (h *Handle) LargeBody() int64 { return h.cfg.LargeBody }

// HardMax returns the hard body cap.
func (h *Handle) HardMax() int64 { return h.cfg.HardMax }

// Severity returns the current memory-pressure severity (normal when no
// pressure source is configured). One atomic load.
func (h *Handle) Severity() pressure.Severity {
	if h.cfg.Pressure == nil {
		return pressure.Normal
	}
	if st := h.cfg.Pressure.State(); st != nil {
		return st.Severity
	}
	return pressure.Normal
}

// Critical reports critical memory pressure: no body may be read.
func (h *Handle) Critical() bool { return h.Severity() == pressure.Critical }

// heapPressured reports the Go heap at or above the shed ratio of its
// limit (the Go memory limit, else the budget's ceiling): the healthy
// headroom is then closed.
func (h *Handle) heapPressured() bool {
	if h.cfg.Pressure == nil {
		return false
	}
	st := h.cfg.Pressure.State()
	if st == nil || st.Sample.GoUsed < 0 {
		return false
	}
	limit := st.Sample.GoLimit
	if limit <= 0 {
		limit = h.cfg.Budget.CeilingBytes
	}
	if limit <= 0 {
		return false
	}
	return float64(st.Sample.GoUsed)/float64(limit) >= h.cfg.HeapShedRatio
}

// Shed counts a shed decided outside the actor (resource pressure, a body
// larger than the budget).
func (h *Handle) Shed(o messages.IngestOutcome) {
	if o.IsShed() {
		h.sheds[o].Add(1)
	}
}

// incUnder adds one to c if it stays at most limit.
func incUnder(c *atomic.Int64, limit int64) bool {
	for {
		n := c.Load()
		if n >= limit {
			return false
		}
		if c.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// addBytes reserves n bytes if they fit the budget.
func (h *Handle) addBytes(n int64) bool {
	for {
		cur := h.inflight.Load()
		if cur+n > h.max {
			return false
		}
		if h.inflight.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// take claims bytes and, when count is set, a heavy slot (or, on the fast
// path only, a healthy-headroom slot). It is the one place capacity is
// claimed, for the fast path and the actor alike.
func (h *Handle) take(bytes int64, count, headroomOK bool) (uint8, bool) {
	slot := slotNone
	if count {
		switch {
		case h.cfg.CountCap <= 0:
			h.heavy.Add(1)
			slot = slotHeavy
		case incUnder(&h.heavy, int64(h.cfg.CountCap)):
			slot = slotHeavy
		case headroomOK && h.cfg.Headroom > 0 && !h.heapPressured() && incUnder(&h.headroom, int64(h.cfg.Headroom)):
			slot = slotHeadroom
		default:
			return slotNone, false
		}
	}
	if bytes > 0 && !h.addBytes(bytes) {
		h.putSlot(slot)
		return slotNone, false
	}
	return slot, true
}

// putSlot returns a count slot; a heavy slot may unblock a waiter.
func (h *Handle) putSlot(slot uint8) {
	switch slot {
	case slotHeavy:
		h.heavy.Add(-1)
		h.poke()
	case slotHeadroom:
		h.headroom.Add(-1)
	}
}

// putBytes returns bytes to the budget.
func (h *Handle) putBytes(n int64) {
	if n > 0 {
		h.inflight.Add(-n)
		h.poke()
	}
}

// poke wakes the actor when someone waits. The release was published
// before waiting is read, and the actor stores waiting before it tries to
// grant, so a release either wakes the actor or is seen by its grant
// attempt. wakePending keeps it to one queued wake message.
func (h *Handle) poke() {
	if h.waiting.Load() > 0 && h.wakePending.CompareAndSwap(false, true) {
		h.root.Send(h.pid, wakeMsg)
	}
}

// Acquire reserves bytes (and, with count, a heavy-request slot) for the
// caller whose fairness key is key. It returns at once when the
// reservation fits and nobody waits; otherwise it queues through the actor
// until the reservation is granted, shed, or gone is closed or signalled
// (the caller left: IngestCanceled, not a shed).
func (h *Handle) Acquire(key [20]byte, bytes int64, count bool, gone <-chan struct{}) (*Lease, messages.IngestOutcome) {
	if bytes > h.max {
		h.Shed(messages.ShedBodyExceedsBudget)
		return nil, messages.ShedBodyExceedsBudget
	}
	// Fast path: no message.
	if h.waiting.Load() == 0 {
		if slot, ok := h.take(bytes, count, true); ok {
			return h.newLease(bytes, slot), messages.IngestAdmitted
		}
	}
	out := h.queue(key, bytes, count, gone)
	if out != messages.IngestAdmitted {
		return nil, out
	}
	slot := slotNone
	if count {
		slot = slotHeavy
	}
	return h.newLease(bytes, slot), out
}

// TryAcquire is the fast path alone: it reserves when the reservation fits
// and nobody waits, without a message, and reports false otherwise.
func (h *Handle) TryAcquire(bytes int64, count bool) (*Lease, bool) {
	if bytes > h.max || h.waiting.Load() != 0 {
		return nil, false
	}
	slot, ok := h.take(bytes, count, true)
	if !ok {
		return nil, false
	}
	return h.newLease(bytes, slot), true
}

// queue runs the slow path: one message, one answer on a pooled channel.
func (h *Handle) queue(key [20]byte, bytes int64, count bool, gone <-chan struct{}) messages.IngestOutcome {
	if h.stopped.Load() {
		return messages.IngestStopped
	}
	req := h.reqPool.Get().(*acquireBytes)
	req.Key, req.Bytes, req.Count = key, bytes, count
	h.slowPath.Add(1)
	h.root.Send(h.pid, req)
	var out messages.IngestOutcome
	select {
	case out = <-req.Reply:
	case <-h.done:
		return messages.IngestStopped // the request is not reused
	case <-gone:
		h.root.Send(h.pid, &cancelAcquire{Request: req})
		select {
		case out = <-req.Reply:
		case <-h.done:
			return messages.IngestStopped
		}
		if out == messages.IngestAdmitted {
			// Granted just before the cancel arrived: give it back.
			h.putBytes(bytes)
			if count {
				h.putSlot(slotHeavy)
			}
			out = messages.IngestCanceled
		}
	}
	h.reqPool.Put(req)
	return out
}

// RetryAfter is the Retry-After hint in seconds: the longer of the queue
// wait and the age of the youngest live heavy lease (how long admitted
// work has been running: SSE streams hold their slot for minutes, so a
// fixed short hint only brings retries back into a full gate), clamped to
// [1, 60] and raised to at least floor.
func (h *Handle) RetryAfter(floor int) int {
	occ := time.Duration(0)
	if youngest := h.leases.youngest(); youngest > 0 {
		occ = time.Duration(h.clk.Now().UnixNano() - youngest)
	}
	wait := max(h.cfg.QueueWait, occ, 0)
	secs := int((wait + time.Second - 1) / time.Second)
	secs = min(max(secs, 1, floor), 60)
	return secs
}

// LaneView is one fairness key with waiters.
type LaneView struct {
	key     [20]byte
	Waiting int `json:"waiting"`
}

// Key returns the opaque key text.
func (l LaneView) Key() string {
	n := len(l.key)
	for n > 0 && l.key[n-1] == 0 {
		n--
	}
	return string(l.key[:n])
}

// MarshalJSON renders {"key": ..., "waiting": n}.
func (l LaneView) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"key":%q,"waiting":%d}`, l.Key(), l.Waiting), nil
}

// Snapshot is the chatAdmission section of the health endpoint.
type Snapshot struct {
	ActiveHeavy           int64             `json:"activeHeavy"`
	ActiveHealthyHeadroom int64             `json:"activeHealthyHeadroom"`
	Waiting               int64             `json:"waiting"`
	QueuedBytes           int64             `json:"queuedBytes"`
	ShedTotal             uint64            `json:"shedTotal"`
	ShedsByReason         map[string]uint64 `json:"shedsByReason"`
	Lanes                 []LaneView        `json:"lanes"`
	InflightBytes         int64             `json:"inflightBytes"`
	MaxInflightBytes      int64             `json:"maxInflightBytes"`
	BudgetSource          string            `json:"budgetSource"`
	PressureSeverity      string            `json:"pressureSeverity"`
	PressureReason        string            `json:"pressureReason"`
	CountCapEnabled       bool              `json:"countCapEnabled"`
}

// ShedReasons lists the shed outcomes in report order.
var ShedReasons = messages.ShedOutcomes()

// SlowPathRequests returns how many reservations went through the actor
// (queued) rather than the lock-free fast path.
func (h *Handle) SlowPathRequests() uint64 { return h.slowPath.Load() }

// Sheds returns the shed count of one reason.
func (h *Handle) Sheds(o messages.IngestOutcome) uint64 { return h.sheds[o].Load() }

// InflightBytes returns the bytes reserved now.
func (h *Handle) InflightBytes() int64 { return h.inflight.Load() }

// ActiveHeavy returns the heavy requests in flight (count slots).
func (h *Handle) ActiveHeavy() int64 { return h.heavy.Load() }

// ActiveHeadroom returns the healthy-headroom slots in use.
func (h *Handle) ActiveHeadroom() int64 { return h.headroom.Load() }

// Waiting returns the number of queued requests.
func (h *Handle) Waiting() int64 { return h.waiting.Load() }

// QueuedBytes returns the bytes of the queued requests.
func (h *Handle) QueuedBytes() int64 { return h.queuedBytes.Load() }

// Lanes returns the keys with waiters (sorted by key).
func (h *Handle) Lanes() []LaneView { return *h.lanes.Load() }

// PressureState returns the pressure state the handle reads, or nil.
func (h *Handle) PressureState() *pressure.State {
	if h.cfg.Pressure == nil {
		return nil
	}
	return h.cfg.Pressure.State()
}

// Snapshot assembles the current figures.
func (h *Handle) Snapshot() Snapshot {
	s := Snapshot{
		ActiveHeavy: h.heavy.Load(), ActiveHealthyHeadroom: h.headroom.Load(),
		Waiting: h.waiting.Load(), QueuedBytes: h.queuedBytes.Load(),
		ShedsByReason: make(map[string]uint64, len(ShedReasons)),
		Lanes:         h.Lanes(), InflightBytes: h.inflight.Load(), MaxInflightBytes: h.max,
		BudgetSource: string(h.cfg.Budget.Source), PressureSeverity: pressure.Normal.String(), PressureReason: pressure.ReasonNone,
		CountCapEnabled: h.cfg.CountCap > 0,
	}
	for _, r := range ShedReasons {
		n := h.sheds[r].Load()
		s.ShedsByReason[r.String()] = n
		s.ShedTotal += n
	}
	if st := h.PressureState(); st != nil {
		s.PressureSeverity, s.PressureReason = st.Severity.String(), st.Reason
	}
	return s
}

// PID is the ingest actor, for the resource-pressure actor's Subscribe:
// each state it samples reaches the actor as a
// *messages.Published[*internal/pressure.State], and under critical
// pressure the actor aborts the largest uploads still being read.
func (h *Handle) PID() *actor.PID { return h.pid }

func sortLanes(v []LaneView) {
	sort.Slice(v, func(i, j int) bool { return string(v[i].key[:]) < string(v[j].key[:]) })
}
