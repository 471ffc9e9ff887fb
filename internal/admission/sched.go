package admission

import (
	"container/heap"
	"math"
)

// LaneID identifies a lane to the scheduler.
type LaneID uint32

// Decision is what the caller of Scheduler.Next does with a candidate.
type Decision uint8

// Decisions.
const (
	// Take: the candidate was admitted (its capacity is now held).
	Take Decision = iota
	// Skip: no room for it now.
	Skip
	// Drop: it can never be admitted (too big for the limit); reject it.
	Drop
)

// ReservePasses is how many times a head may be passed over by smaller
// work before it is reserved: then nothing else of its class is dispatched
// until it fits, so large requests cannot starve.
const ReservePasses = 2

// maxBypass bounds how many heads one Next call examines behind a head
// that does not fit, keeping a dispatch pass cheap with many lanes.
const maxBypass = 32

// Scheduler shares freed capacity among lanes by start-time fair queuing
// on cost: each lane's head gets a virtual start tag max(V, lane finish
// tag), the smallest tag is served first, and serving advances the lane's
// finish tag by cost/weight. A lane that was served more than others is
// therefore behind them until they catch up, so fairness has memory (round
// robin without memory is not fair: CockroachDB issue 91533). The memory
// decays: a lane's lead over V halves every HistoryHalfLife without
// service, so a tenant that was heavy a minute ago is not punished now.
//
// Work-conserving with aging: when the best head does not fit the free
// capacity, smaller heads behind it may go first, but each time that
// happens the bypassed heads age, and a head bypassed ReservePasses times
// holds its class until it fits.
//
// The scheduler holds heads only (one per lane and class); the lane owns
// the rest of its queue and reports its next head after each change.
type Scheduler struct {
	halfLife float64 // nanoseconds; 0 = no decay
	lanes    map[LaneID]*schedLane
	q        [NumClasses]headHeap
	v        [NumClasses]float64
	aged     [NumClasses]int
	order    uint64
	scratch  []*schedHead
}

type schedLane struct {
	weight float64
	finish [NumClasses]float64
	lastAt [NumClasses]int64
	head   [NumClasses]*schedHead
}

type schedHead struct {
	lane   LaneID
	seq    uint64
	cost   int64
	start  float64
	order  uint64
	passes int
	idx    int
}

// NewScheduler returns an empty scheduler whose per-lane history halves
// every halfLifeNs nanoseconds (0 = never decays).
func NewScheduler(halfLifeNs int64) *Scheduler {
	return &Scheduler{halfLife: float64(halfLifeNs), lanes: map[LaneID]*schedLane{}}
}

// AddLane registers a lane with a weight (> 0; 1 is the default share).
func (s *Scheduler) AddLane(id LaneID, weight float64) {
	if weight <= 0 {
		weight = 1
	}
	if _, ok := s.lanes[id]; !ok {
		s.lanes[id] = &schedLane{weight: weight}
	}
}

// RemoveLane forgets a lane and its heads.
func (s *Scheduler) RemoveLane(id LaneID) {
	l := s.lanes[id]
	if l == nil {
		return
	}
	for c := range l.head {
		s.clearHead(l, Class(c))
	}
	delete(s.lanes, id)
}

// Lanes returns the number of registered lanes.
func (s *Scheduler) Lanes() int { return len(s.lanes) }

// Heads returns the number of lanes with a head in class c.
func (s *Scheduler) Heads(c Class) int { return s.q[c].Len() }

func (s *Scheduler) clearHead(l *schedLane, c Class) {
	h := l.head[c]
	if h == nil {
		return
	}
	if h.passes >= ReservePasses {
		s.aged[c]--
	}
	heap.Remove(&s.q[c], h.idx)
	l.head[c] = nil
}

// SetHead sets the lane's next waiting entry in class c (seq 0 = none) at
// time now (nanoseconds).
func (s *Scheduler) SetHead(id LaneID, c Class, seq uint64, cost int64, now int64) {
	l := s.lanes[id]
	if l == nil {
		return
	}
	if h := l.head[c]; h != nil {
		if h.seq == seq && seq != 0 {
			return
		}
		s.clearHead(l, c)
	}
	if seq == 0 {
		return
	}
	lead := l.finish[c] - s.v[c]
	if lead > 0 && s.halfLife > 0 && now > l.lastAt[c] {
		lead *= math.Exp2(-float64(now-l.lastAt[c]) / s.halfLife)
	}
	start := s.v[c]
	if lead > 0 {
		start += lead
	}
	s.order++
	h := &schedHead{lane: id, seq: seq, cost: cost, start: start, order: s.order}
	l.head[c] = h
	heap.Push(&s.q[c], h)
}

// Next offers heads of class c to decide, best first, and returns the one
// taken or dropped. ok is false when nothing was taken or dropped. A taken
// head's lane loses its head until SetHead is called again.
func (s *Scheduler) Next(c Class, now int64, decide func(cost int64) Decision) (id LaneID, seq uint64, cost int64, d Decision, ok bool) {
	q := &s.q[c]
	if q.Len() == 0 {
		return 0, 0, 0, Skip, false
	}
	if s.aged[c] > 0 {
		var r *schedHead
		for _, h := range q.items {
			if h.passes >= ReservePasses && (r == nil || h.order < r.order) {
				r = h
			}
		}
		d := decide(r.cost)
		if d == Skip {
			return 0, 0, 0, Skip, false
		}
		s.finish(c, r, d, now)
		return r.lane, r.seq, r.cost, d, true
	}
	s.scratch = s.scratch[:0]
	var got *schedHead
	for q.Len() > 0 && len(s.scratch) <= maxBypass {
		h := heap.Pop(q).(*schedHead)
		d = decide(h.cost)
		if d == Skip {
			s.scratch = append(s.scratch, h)
			continue
		}
		got = h
		break
	}
	for _, b := range s.scratch {
		if got != nil && d == Take {
			b.passes++
			if b.passes == ReservePasses {
				s.aged[c]++
			}
		}
		heap.Push(q, b)
	}
	if got == nil {
		return 0, 0, 0, Skip, false
	}
	heap.Push(q, got) // finish removes it properly
	s.finish(c, got, d, now)
	return got.lane, got.seq, got.cost, d, true
}

func (s *Scheduler) finish(c Class, h *schedHead, d Decision, now int64) {
	l := s.lanes[h.lane]
	s.clearHead(l, c)
	if d != Take {
		return
	}
	if h.start > s.v[c] {
		s.v[c] = h.start
	}
	l.finish[c] = h.start + float64(h.cost)/l.weight
	l.lastAt[c] = now
}

type headHeap struct{ items []*schedHead }

func (h *headHeap) Len() int { return len(h.items) }
func (h *headHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.start != b.start {
		return a.start < b.start
	}
	return a.order < b.order
}
func (h *headHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}
func (h *headHeap) Push(x any) {
	e := x.(*schedHead)
	e.idx = len(h.items)
	h.items = append(h.items, e)
}
func (h *headHeap) Pop() any {
	n := len(h.items)
	e := h.items[n-1]
	h.items[n-1] = nil
	h.items = h.items[:n-1]
	return e
}
