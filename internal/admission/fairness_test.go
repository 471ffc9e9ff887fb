package admission

import (
	"container/heap"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"
)

// maxMinFair is the exact weighted max-min fair (water-filling) allocation
// of capacity among demands: every tenant gets min(demand, level × weight)
// with one level chosen so the capacity is used up (or every demand met).
func maxMinFair(capacity float64, demand, weight []float64) []float64 {
	n := len(demand)
	alloc := make([]float64, n)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return demand[idx[a]]/weight[idx[a]] < demand[idx[b]]/weight[idx[b]] })
	left, wsum := capacity, 0.0
	for _, i := range idx {
		wsum += weight[i]
	}
	for k, i := range idx {
		share := left * weight[i] / wsum
		if demand[i] <= share {
			alloc[i] = demand[i]
		} else {
			// Everyone from here on is limited by the level.
			for _, j := range idx[k:] {
				alloc[j] = left * weight[j] / wsum
			}
			return alloc
		}
		left -= alloc[i]
		wsum -= weight[i]
	}
	return alloc
}

func TestMaxMinOracle(t *testing.T) {
	got := maxMinFair(10, []float64{1, 8, 8}, []float64{1, 1, 1})
	want := []float64{1, 4.5, 4.5}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("oracle %v, want %v", got, want)
		}
	}
	got = maxMinFair(14, []float64{100, 100, 100}, []float64{1, 2, 4})
	want = []float64{2, 4, 8}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("weighted oracle %v, want %v", got, want)
		}
	}
}

// sim is a discrete-event simulation of the gate and the scheduler with
// per-tenant FIFO lanes: tenants offer open-loop Poisson arrivals of fixed
// cost and service time; queued work is dispatched by the scheduler as
// leases end. It measures each tenant's time-integrated in-flight cost.
type sim struct {
	g      *Gate
	s      *Scheduler
	now    int64
	events evHeap
	lanes  []simLane
	rng    *rand.Rand
	from   int64 // measurement start
	held   []float64
	seq    uint64
}

type simLane struct {
	cost    int64
	service int64
	rate    float64 // arrivals per second
	q       []simEntry
}

type simEntry struct {
	seq  uint64
	cost int64
}

type ev struct {
	at     int64
	tenant int
	arrive bool
	cost   int64
}

type evHeap []ev

func (h evHeap) Len() int           { return len(h) }
func (h evHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h evHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)        { *h = append(*h, x.(ev)) }
func (h *evHeap) Pop() any          { o := *h; e := o[len(o)-1]; *h = o[:len(o)-1]; return e }

func newSim(limit int64, lanes []simLane, weights []float64, seed int64) *sim {
	s := &sim{g: NewGate(limit, [NumClasses]int64{100, 0}, time.Second, 0, nil, time.Unix(0, 0)), s: NewScheduler(int64(time.Second)),
		lanes: lanes, rng: rand.New(rand.NewSource(seed)), held: make([]float64, len(lanes))}
	for i := range lanes {
		s.s.AddLane(LaneID(i), weights[i])
		heap.Push(&s.events, ev{at: s.gap(i), tenant: i, arrive: true})
	}
	return s
}

func (s *sim) gap(i int) int64 {
	return int64(s.rng.ExpFloat64() / s.lanes[i].rate * float64(time.Second))
}

func (s *sim) start(i int, cost int64) {
	l := &s.lanes[i]
	end := s.now + l.service
	if end > s.from {
		s.held[i] += float64(cost) * float64(end-max(s.now, s.from))
	}
	heap.Push(&s.events, ev{at: end, tenant: i, cost: cost})
}

func (s *sim) dispatch() {
	for {
		id, _, cost, d, ok := s.s.Next(Interactive, s.now, func(cost int64) Decision {
			if s.g.Grant(Interactive, cost, s.now, 0) == Granted {
				return Take
			}
			return Skip
		})
		if !ok {
			return
		}
		l := &s.lanes[id]
		l.q = l.q[1:]
		s.g.Unwait(Interactive)
		if d == Take {
			s.start(int(id), cost)
		}
		if len(l.q) > 0 {
			s.s.SetHead(id, Interactive, l.q[0].seq, l.q[0].cost, s.now)
		}
	}
}

func (s *sim) run(until int64) {
	for s.events.Len() > 0 {
		e := heap.Pop(&s.events).(ev)
		if e.at > until {
			return
		}
		s.now = e.at
		l := &s.lanes[e.tenant]
		if !e.arrive {
			s.g.Release(Interactive, e.cost, s.now, true, 0)
			s.dispatch()
			continue
		}
		heap.Push(&s.events, ev{at: s.now + s.gap(e.tenant), tenant: e.tenant, arrive: true})
		switch s.g.Acquire(Interactive, l.cost, s.now, len(l.q) < 128) {
		case Admitted:
			s.start(e.tenant, l.cost)
		case Queue:
			s.seq++
			l.q = append(l.q, simEntry{seq: s.seq, cost: l.cost})
			if len(l.q) == 1 {
				s.s.SetHead(LaneID(e.tenant), Interactive, s.seq, l.cost, s.now)
			}
			s.dispatch()
		}
	}
}

// shares returns each tenant's measured share of the capacity and the
// max-min fair shares for the offered demands.
func (s *sim) shares(limit int64, until int64, weights []float64) (got, fair []float64) {
	span := float64(until - s.from)
	demand := make([]float64, len(s.lanes))
	for i, l := range s.lanes {
		demand[i] = l.rate * float64(l.cost) * float64(l.service) / float64(time.Second)
		got = append(got, s.held[i]/span)
	}
	return got, maxMinFair(float64(limit), demand, weights)
}

func jain(x []float64) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += v
		sq += v * v
	}
	return sum * sum / (float64(len(x)) * sq)
}

func runFairness(t *testing.T, costs []int64, weights []float64, demandFactor []float64) (got, fair []float64) {
	t.Helper()
	const limit = 64
	service := int64(100 * time.Millisecond)
	wsum := 0.0
	for _, w := range weights {
		wsum += w
	}
	lanes := make([]simLane, len(costs))
	for i, c := range costs {
		share := limit * weights[i] / wsum // cost units of concurrency
		lanes[i] = simLane{cost: c, service: service, rate: demandFactor[i] * share / float64(c) / 0.1}
	}
	s := newSim(limit, lanes, weights, 42)
	s.from = int64(5 * time.Second)
	until := int64(65 * time.Second)
	s.run(until)
	return s.shares(limit, until, weights)
}

func TestFairnessEqualCostsJainIndex(t *testing.T) {
	n := 8
	costs, weights, demand := make([]int64, n), make([]float64, n), make([]float64, n)
	for i := range costs {
		costs[i], weights[i], demand[i] = 4, 1, 2
	}
	got, fair := runFairness(t, costs, weights, demand)
	x := make([]float64, n)
	for i := range x {
		x[i] = got[i] / fair[i]
	}
	if j := jain(x); j < 0.99 {
		t.Fatalf("Jain's index %.4f < 0.99; allocation/fair = %v", j, x)
	} else {
		t.Logf("Jain's index %.5f; allocation/fair = %.3f", j, x)
	}
}

func TestFairnessMixedCostsWithinTenPercent(t *testing.T) {
	costs := []int64{1, 2, 3, 4, 6, 8, 12, 16}
	n := len(costs)
	weights, demand := make([]float64, n), make([]float64, n)
	for i := range weights {
		weights[i], demand[i] = 1, 2
	}
	got, fair := runFairness(t, costs, weights, demand)
	for i := range got {
		if dev := math.Abs(got[i]-fair[i]) / fair[i]; dev > 0.10 {
			t.Errorf("tenant %d (cost %d): share %.2f, fair %.2f, deviation %.1f%% > 10%%", i, costs[i], got[i], fair[i], dev*100)
		}
	}
	t.Logf("shares %.2f, fair %.2f", got, fair)
}

func TestFairnessWeightedAndUnderDemand(t *testing.T) {
	costs := []int64{4, 4, 4, 4}
	weights := []float64{1, 2, 4, 1}
	demand := []float64{2, 2, 2, 0.5} // the last tenant asks for less than its share
	got, fair := runFairness(t, costs, weights, demand)
	for i := range got {
		if dev := math.Abs(got[i]-fair[i]) / fair[i]; dev > 0.10 {
			t.Errorf("tenant %d: share %.2f, fair %.2f (deviation %.1f%%)", i, got[i], fair[i], dev*100)
		}
	}
	t.Logf("shares %.2f, fair %.2f", got, fair)
}
