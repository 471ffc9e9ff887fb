package lanes

import (
	"time"

	"github.com/omniroute/gateway/internal/admission"
)

// view is what the controller publishes after each change it cares to
// show; Snapshot adds the live counters.
type view struct {
	limit                           int64
	short, long, util               float64
	pressure                        admission.Pressure
	recentPeak                      int64
	baseline                        float64
	last                            admission.WindowReport
	sharedCount, sharedCost         int64
	laneCount                       int
	laneQueuedCount, laneQueuedCost int64
	laneTenants                     []LaneTenant
	virtQueuedCount, virtQueuedCost int64
	shutdown                        bool
}

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
	FloorCost     int64            `json:"floorCost"`
	ActiveCost    int64            `json:"activeCost"`
	ActiveCount   int64            `json:"activeCount"`
	WaitingCount  int64            `json:"waitingCount"`
	AdmittedCount int64            `json:"admittedCount"`
	RejectedCount int64            `json:"rejectedCount"`
	Rejected      map[string]int64 `json:"rejectedByReason,omitempty"`
}

// Window describes the last closed adaptation window.
type Window struct {
	Rule        string  `json:"rule"`
	LimitBefore int64   `json:"limitBefore"`
	LimitAfter  int64   `json:"limitAfter"`
	Utilization float64 `json:"utilization"`
	Gradient    float64 `json:"gradient"`
	Completed   int64   `json:"completed"`
	Samples     int64   `json:"latencySamples"`
	Drops       int64   `json:"drops"`
	Guarded     bool    `json:"driftGuarded"`
	Queueing    bool    `json:"standingQueue"`
	SlowStart   bool    `json:"slowStart"`
	Undone      bool    `json:"probeUndone"`
}

// Snapshot is the adaptiveAdmission section of GET /api/monitoring/health:
// every field of OmniRoute's controller snapshot (with the lane fields
// OmniRoute's health projection drops), the per-class figures, and the
// fan-out probe counter OmniRoute lacks.
type Snapshot struct {
	Mode               string           `json:"mode"`
	CurrentLimit       int64            `json:"currentLimit"`
	MinLimit           int64            `json:"minLimit"`
	MaxLimit           int64            `json:"maxLimit"`
	ActiveCost         int64            `json:"activeCost"`
	ActiveCount        int64            `json:"activeCount"`
	QueuedCost         int64            `json:"queuedCost"`
	QueuedCount        int64            `json:"queuedCount"`
	VirtualActiveCost  int64            `json:"virtualActiveCost"`
	VirtualActiveCount int64            `json:"virtualActiveCount"`
	VirtualQueuedCost  int64            `json:"virtualQueuedCost"`
	VirtualQueuedCount int64            `json:"virtualQueuedCount"`
	VirtualLanes       bool             `json:"virtualLanes"`
	LaneCount          int              `json:"laneCount"`
	LaneQueuedCost     int64            `json:"laneQueuedCost"`
	LaneQueuedCount    int64            `json:"laneQueuedCount"`
	LaneTenants        []LaneTenant     `json:"laneTenants"`
	AdmittedCount      int64            `json:"admittedCount"`
	RejectedCount      int64            `json:"rejectedCount"`
	RejectedByReason   map[string]int64 `json:"rejectedByReason"`
	AbortedCount       int64            `json:"abortedCount"`
	WouldAdmitCount    int64            `json:"wouldAdmitCount"`
	WouldQueueCount    int64            `json:"wouldQueueCount"`
	WouldRejectCount   int64            `json:"wouldRejectCount"`
	ShortLatencyEwma   float64          `json:"shortLatencyEwma"`
	LongLatencyEwma    float64          `json:"longLatencyEwma"`
	Utilization        float64          `json:"utilization"`
	Pressure           string           `json:"pressure"`
	ResourceSeverity   string           `json:"resourceSeverity"`
	ResourceReason     string           `json:"resourceReason"`
	ResourceObservedAt int64            `json:"resourceObservedAtMs"`
	Shutdown           bool             `json:"shutdown"`

	Classes            map[string]ClassFigures `json:"classes"`
	FanoutProbeSkipped int64                   `json:"fanoutProbeSkipped"`
	TargetBusySkipped  int64                   `json:"targetBusySkipped"`
	RecentPeakCost     int64                   `json:"recentPeakCost"`
	LatencyBaseline    float64                 `json:"latencyBaselineMs"`
	LastWindow         Window                  `json:"lastWindow"`
}

// Snapshot returns the current figures: the controller's last published
// view plus live counters. It never waits on an actor.
func (h *Handle) Snapshot() *Snapshot {
	v := h.view.Load()
	st := h.gate.Stats()
	s := &Snapshot{
		Mode: h.cfg.Mode.String(), CurrentLimit: st.Limit, MinLimit: h.cfg.MinLimit, MaxLimit: h.cfg.MaxLimit,
		ActiveCost: st.ActiveCost(), ActiveCount: st.ActiveCount(),
		QueuedCount: v.sharedCount, QueuedCost: v.sharedCost,
		VirtualQueuedCount: v.virtQueuedCount, VirtualQueuedCost: v.virtQueuedCost,
		VirtualLanes: h.cfg.VirtualLanes, LaneCount: v.laneCount, LaneQueuedCount: v.laneQueuedCount, LaneQueuedCost: v.laneQueuedCost,
		LaneTenants: v.laneTenants, WouldAdmitCount: h.wouldAdmit.Load(), WouldQueueCount: h.wouldQueue.Load(),
		WouldRejectCount: h.wouldReject.Load(), ShortLatencyEwma: v.short, LongLatencyEwma: v.long, Utilization: v.util,
		Pressure: v.pressure.String(), ResourceSeverity: admission.PressureNormal.String(), Shutdown: v.shutdown || st.Closed,
		RejectedByReason: map[string]int64{}, Classes: map[string]ClassFigures{},
		FanoutProbeSkipped: h.probeSkipped.Load(), TargetBusySkipped: h.targetSkipped.Load(), RecentPeakCost: v.recentPeak,
		LastWindow: Window{Rule: v.last.Rule.String(), LimitBefore: v.last.Before, LimitAfter: v.last.After, Utilization: v.last.Utilization,
			Gradient: v.last.Gradient, Completed: v.last.Completed, Samples: v.last.Samples, Drops: v.last.Drops, Guarded: v.last.Guarded, Queueing: v.last.Queueing,
			SlowStart: v.last.SlowStart, Undone: v.last.Undone},
		LatencyBaseline: v.baseline,
	}
	if s.LaneTenants == nil {
		s.LaneTenants = []LaneTenant{}
	}
	if h.virt != nil {
		vs := h.virt.Stats()
		s.VirtualActiveCost, s.VirtualActiveCount = vs.ActiveCost(), vs.ActiveCount()
	}
	if p := h.pressure.Load(); p != nil {
		s.ResourceSeverity, s.ResourceReason, s.ResourceObservedAt = p.severity.String(), p.reason, p.at.UnixMilli()
	}
	for cl := admission.Class(0); cl < admission.NumClasses; cl++ {
		f := ClassFigures{SharePercent: h.cfg.ClassShares[cl], FloorCost: st.Floor[cl], ActiveCost: st.Active[cl],
			ActiveCount: st.Count[cl], WaitingCount: st.Waiting[cl], AdmittedCount: h.admitted[cl].Load()}
		for r := QueueFull; r < NumReasons; r++ {
			n := h.rejected[cl][r].Load()
			if n == 0 {
				continue
			}
			if r == Aborted { // the caller left: not a shed
				s.AbortedCount += n
				continue
			}
			if f.Rejected == nil {
				f.Rejected = map[string]int64{}
			}
			f.Rejected[r.Code()] = n
			s.RejectedByReason[r.Code()] += n
			f.RejectedCount += n
		}
		s.AdmittedCount += f.AdmittedCount
		s.RejectedCount += f.RejectedCount
		s.Classes[cl.String()] = f
	}
	return s
}
