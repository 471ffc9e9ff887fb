package lanes

import (
	"math"
	"sort"
	"time"

	"github.com/omniroute/gateway/internal/admission"
)

// LaneTenant is one lane in the snapshot. TenantKey is the opaque tenant id
// ("key_" + 16 hex digits, or "anonymous"), never a key.
type LaneTenant struct {
	TenantKey   string `json:"tenantKey"`
	QueuedCount int64  `json:"queuedCount"`
	QueuedCost  int64  `json:"queuedCost"`
	lastUse     time.Time
}

// ClassFigures are one priority class's numbers.
type ClassFigures struct {
	// SharePercent is the class's protected floor, in percent of the limit.
	SharePercent  int64            `json:"sharePercent"`
	ActiveCost    int64            `json:"activeCost"`
	ActiveCount   int64            `json:"activeCount"`
	WaitingCount  int64            `json:"waitingCount"`
	AdmittedCount int64            `json:"admittedCount"`
	RejectedCount int64            `json:"rejectedCount"`
	Rejected      map[string]int64 `json:"rejectedByReason,omitempty"`
}

// Window is an upstream's last judged controller phase, as of the last
// reporting window (its JSON is the phase report's fields, flat, and the
// phase count; localDelayMs: see docs/admission.md).
type Window struct {
	admission.PhaseReport
	Phases uint64 `json:"phases"`
}

// Upstream is one upstream's admission figures.
type Upstream struct {
	Name string `json:"name"`
	// Index is the upstream's index (Ticket.Upstream); retired upstreams
	// are left out of the snapshot, so it may differ from the position.
	Index int `json:"index"`
	// CurrentLimit is the limit in effect (cost units); KneeEstimate the
	// controller's estimate of the provider's knee, Phase what it is
	// doing (startup, cruise, probe, grow, drain).
	CurrentLimit int64   `json:"currentLimit"`
	KneeEstimate float64 `json:"kneeEstimate"`
	Phase        string  `json:"phase"`
	Converged    bool    `json:"converged"`
	Cap          int64   `json:"maxConcurrent,omitempty"`
	ActiveCost   int64   `json:"activeCost"`
	ActiveCount  int64   `json:"activeCount"`
	QueuedCost   int64   `json:"queuedCost"`
	QueuedCount  int64   `json:"queuedCount"`
	LaneCount    int     `json:"laneCount"`
	// Latencies the controller judges by (ms): no-queue time to first
	// token of streams and latency of plain answers, and the mean time an
	// answer holds its place.
	BaselineStreamMs float64 `json:"baselineStreamMs"`
	BaselinePlainMs  float64 `json:"baselinePlainMs"`
	HeldMs           float64 `json:"heldMs"`
	DrainPerSecond   float64 `json:"drainPerSecond"`
	QueueTargetMs    float64 `json:"queueTargetMs"`
	Pressure         string  `json:"pressure"`
	// Utilization is the share of the limit the last reporting window
	// kept busy (0–1); ShortLatencyEwma and LongLatencyEwma (ms) are
	// exponential averages of the answers' latencies (weights 0.5 and 0.1
	// per answer), as the controller measures them.
	Utilization      float64      `json:"utilization"`
	ShortLatencyEwma float64      `json:"shortLatencyEwma"`
	LongLatencyEwma  float64      `json:"longLatencyEwma"`
	LaneTenants      []LaneTenant `json:"laneTenants,omitempty"`
	LastPhase        Window       `json:"lastPhase"`
	LastWindow       Window       `json:"lastWindow"`
	Shutdown         bool         `json:"shutdown,omitempty"`
}

// Snapshot is the adaptiveAdmission section of GET /api/monitoring/health:
// totals over every upstream, the per-class figures, and one entry per
// upstream with its own limit.
type Snapshot struct {
	Mode         string `json:"mode"`
	VirtualLanes bool   `json:"virtualLanes"`
	// CurrentLimit is the sum of the upstreams' limits; MinLimit and
	// MaxLimit bound each one.
	CurrentLimit     int64 `json:"currentLimit"`
	MinLimit         int64 `json:"minLimit"`
	MaxLimit         int64 `json:"maxLimit"`
	GlobalLimit      int64 `json:"globalLimit"`
	GlobalActiveCost int64 `json:"globalActiveCost"`
	ActiveCost       int64 `json:"activeCost"`
	ActiveCount      int64 `json:"activeCount"`
	QueuedCost       int64 `json:"queuedCost"`
	QueuedCount      int64 `json:"queuedCount"`
	VirtualFigures
	LaneCount int `json:"laneCount"`
	// LaneQueuedCount and LaneQueuedCost are the requests waiting in
	// tenant lanes (with lanes off, in the shared lanes) over all
	// upstreams; LaneTenants the lanes with the most queued, summed over
	// upstreams by tenant (opaque ids), at most 100 (absent while no lane
	// exists, and from the brief health outsiders see).
	LaneQueuedCount int64        `json:"laneQueuedCount"`
	LaneQueuedCost  int64        `json:"laneQueuedCost"`
	LaneTenants     []LaneTenant `json:"laneTenants,omitempty"`
	// Utilization is the share of the upstreams' limits the last
	// reporting window kept busy, over all of them (limit-weighted);
	// ShortLatencyEwma and LongLatencyEwma (ms) the upstreams' latency
	// averages, weighted by their answers of the last window.
	Utilization      float64 `json:"utilization"`
	ShortLatencyEwma float64 `json:"shortLatencyEwma"`
	LongLatencyEwma  float64 `json:"longLatencyEwma"`
	Decisions
	ResourceFigures
	Shutdown bool `json:"shutdown"`

	Classes   map[string]ClassFigures `json:"classes"`
	Upstreams []Upstream              `json:"upstreams"`
}

// The groups below are embedded in Snapshot: their fields are at the top
// level of the JSON payload (the names operators' dashboards use), grouped
// here by what they tell.

// VirtualFigures are the fan-out probes' own in-flight and queued work
// (virtual lanes), over all upstreams.
type VirtualFigures struct {
	VirtualActiveCost  int64 `json:"virtualActiveCost"`
	VirtualActiveCount int64 `json:"virtualActiveCount"`
	VirtualQueuedCost  int64 `json:"virtualQueuedCost"`
	VirtualQueuedCount int64 `json:"virtualQueuedCount"`
}

// Decisions count what admission decided since start; the Would counts
// are shadow mode's (what enforce would have done).
type Decisions struct {
	// VirtualFanoutSkipped counts fan-out targets (a combo's, fusion
	// members) passed over because their upstream had no room.
	VirtualFanoutSkipped int64            `json:"virtualFanoutSkipped"`
	AdmittedCount        int64            `json:"admittedCount"`
	RejectedCount        int64            `json:"rejectedCount"`
	RejectedByReason     map[string]int64 `json:"rejectedByReason"`
	AbortedCount         int64            `json:"abortedCount"`
	BusyCount            int64            `json:"busyCount"`
	WouldAdmitCount      int64            `json:"wouldAdmitCount"`
	WouldQueueCount      int64            `json:"wouldQueueCount"`
	WouldRejectCount     int64            `json:"wouldRejectCount"`
}

// ResourceFigures are the last resource-pressure reading (memory, CPU,
// descriptors) the lanes acted on.
type ResourceFigures struct {
	ResourceSeverity   string `json:"resourceSeverity"`
	ResourceReason     string `json:"resourceReason"`
	ResourceObservedAt int64  `json:"resourceObservedAtMs"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Snapshot returns the current figures: each controller's last published
// view plus the gates' live counters. It never waits on an actor.
func (h *Handle) Snapshot() *Snapshot {
	s := &Snapshot{Mode: h.cfg.Mode.String(), VirtualLanes: h.cfg.VirtualLanes, MinLimit: h.cfg.MinLimit, MaxLimit: h.cfg.MaxLimit,
		GlobalLimit: h.global.Max(), GlobalActiveCost: h.global.Active(),
		Classes: map[string]ClassFigures{}, Shutdown: h.stopped.Load(),
		Decisions: Decisions{RejectedByReason: map[string]int64{},
			WouldAdmitCount: h.wouldAdmit.Load(), WouldQueueCount: h.wouldQueue.Load(), WouldRejectCount: h.wouldReject.Load(),
			BusyCount: h.busy.Load(), VirtualFanoutSkipped: h.skipped.Load()}}
	var classActive, classCount, classWaiting [admission.NumClasses]int64
	var busyCost, limitSum, ewmaWeight, shortSum, longSum float64
	tenants := map[string]*LaneTenant{}
	for i, n := 0, h.ups.Len(); i < n; i++ {
		u := *h.ups.At(i)
		if u.retired.Load() {
			continue
		}
		v := u.view.Load()
		st := u.gate.Stats()
		up := Upstream{Name: u.name, Index: u.idx, CurrentLimit: st.Limit, KneeEstimate: round1(v.knee), Phase: v.phase, Converged: v.converged,
			Cap: st.Cap, ActiveCost: st.ActiveCost(), ActiveCount: st.ActiveCount(),
			QueuedCost: v.sharedCost + v.laneQueuedCost, QueuedCount: v.sharedCount + v.laneQueuedCount, LaneCount: v.laneCount,
			BaselineStreamMs: ms(v.baseline[0]), BaselinePlainMs: ms(v.baseline[1]), HeldMs: ms(v.held),
			DrainPerSecond: round1(v.drainRate), QueueTargetMs: ms(v.target), Pressure: v.pressure.String(),
			Utilization: round3(v.utilization), ShortLatencyEwma: ms(v.shortEWMA), LongLatencyEwma: ms(v.longEWMA),
			LaneTenants: v.laneTenants, LastPhase: windowOf(v.last), LastWindow: v.window, Shutdown: v.shutdown}
		s.LaneQueuedCount += v.sharedCount + v.laneQueuedCount
		s.LaneQueuedCost += v.sharedCost + v.laneQueuedCost
		for _, lt := range v.laneTenants {
			if t := tenants[lt.TenantKey]; t != nil {
				t.QueuedCount += lt.QueuedCount
				t.QueuedCost += lt.QueuedCost
			} else {
				c := lt
				tenants[lt.TenantKey] = &c
			}
		}
		busyCost += v.utilization * float64(st.Limit)
		limitSum += float64(st.Limit)
		if v.longEWMA > 0 {
			w := float64(max(v.answered, 1))
			ewmaWeight += w
			shortSum += w * ms(v.shortEWMA)
			longSum += w * ms(v.longEWMA)
		}
		s.Upstreams = append(s.Upstreams, up)
		s.CurrentLimit += st.Limit
		s.ActiveCost += up.ActiveCost
		s.ActiveCount += up.ActiveCount
		s.QueuedCost += up.QueuedCost
		s.QueuedCount += up.QueuedCount
		if u.virt != nil {
			vs := u.virt.Stats()
			s.VirtualActiveCost += vs.ActiveCost()
			s.VirtualActiveCount += vs.ActiveCount()
		}
		s.VirtualQueuedCost += v.virtQueuedCost
		s.VirtualQueuedCount += v.virtQueuedCount
		s.LaneCount += v.laneCount
		for c := range classActive {
			classActive[c] += st.Active[c]
			classCount[c] += st.Count[c]
			classWaiting[c] += st.Waiting[c]
		}
	}
	if limitSum > 0 {
		s.Utilization = round3(busyCost / limitSum)
	}
	if ewmaWeight > 0 {
		s.ShortLatencyEwma, s.LongLatencyEwma = round3(shortSum/ewmaWeight), round3(longSum/ewmaWeight)
	}
	s.LaneTenants = mergedTenants(tenants)
	for c := admission.Class(0); c < admission.NumClasses; c++ {
		f := ClassFigures{SharePercent: h.cfg.ClassShares[c], ActiveCost: classActive[c], ActiveCount: classCount[c],
			WaitingCount: classWaiting[c], AdmittedCount: h.admitted[c].Load()}
		for r := Reason(0); r < NumReasons; r++ {
			n := h.rejected[c][r].Load()
			if n == 0 {
				continue
			}
			if r == Aborted {
				s.AbortedCount += n
				continue
			}
			if f.Rejected == nil {
				f.Rejected = map[string]int64{}
			}
			f.Rejected[r.Code()] += n
			f.RejectedCount += n
			s.RejectedByReason[r.Code()] += n
		}
		s.AdmittedCount += f.AdmittedCount
		s.RejectedCount += f.RejectedCount
		s.Classes[c.String()] = f
	}
	if p := h.pressure.Load(); p != nil {
		s.ResourceSeverity, s.ResourceReason, s.ResourceObservedAt = p.severity.String(), p.reason, p.at.UnixMilli()
	} else {
		s.ResourceSeverity = admission.PressureNormal.String()
	}
	return s
}

func windowOf(r admission.PhaseReport) Window { return Window{PhaseReport: r} }

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// mergedTenants lists the merged lanes, most queued first, at most
// maxLaneTenants (never nil: the field is always present).
func mergedTenants(m map[string]*LaneTenant) []LaneTenant {
	out := make([]LaneTenant, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.QueuedCost != b.QueuedCost {
			return a.QueuedCost > b.QueuedCost
		}
		return a.TenantKey < b.TenantKey
	})
	return out[:min(len(out), maxLaneTenants)]
}
