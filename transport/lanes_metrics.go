package transport

import (
	"fmt"
	"sync"
	"time"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
)

// admissionMetrics caches one snapshot per scrape: every admission gauge
// reads the same figures and the snapshot is built once.
type admissionMetrics struct {
	mu   sync.Mutex
	at   time.Time
	snap *lanes.Snapshot
	pos  []int // upstream index → position in snap.Upstreams (-1: retired)
}

func (g *Gateway) lanesSnapshot() *lanes.Snapshot {
	s, _ := g.lanesSnapshotPos()
	return s
}

func (g *Gateway) lanesSnapshotPos() (*lanes.Snapshot, []int) {
	m := &g.adm.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); m.snap == nil || now.Sub(m.at) > 100*time.Millisecond {
		m.snap, m.at = g.adm.lanes.Snapshot(), now
		m.pos = make([]int, g.adm.lanes.Upstreams())
		for i := range m.pos {
			m.pos[i] = -1
		}
		for p, u := range m.snap.Upstreams {
			if u.Index < len(m.pos) {
				m.pos[u.Index] = p
			}
		}
	}
	return m.snap, m.pos
}

// upstreamMetrics exposes upstream i's figures (start-up, and a reload
// adding its target); a retired upstream's read 0.
func (g *Gateway) upstreamMetrics(i int, name string) {
	set := g.metrics.set
	gauge := func(name string, f func(u *lanes.Upstream) float64) {
		set.NewGauge(name, func() float64 {
			s, pos := g.lanesSnapshotPos()
			if i >= len(pos) || pos[i] < 0 {
				return 0
			}
			return f(&s.Upstreams[pos[i]])
		})
	}
	lbl := fmt.Sprintf(`{upstream=%q}`, name)
	gauge(metricAdmissionUpstreamLimit+lbl, func(u *lanes.Upstream) float64 { return float64(u.CurrentLimit) })
	gauge(metricAdmissionUpstreamKneeEstimate+lbl, func(u *lanes.Upstream) float64 { return u.KneeEstimate })
	gauge(metricAdmissionUpstreamActiveCost+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCost) })
	gauge(metricAdmissionUpstreamActiveRequests+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCount) })
	gauge(metricAdmissionUpstreamQueuedRequests+lbl, func(u *lanes.Upstream) float64 { return float64(u.QueuedCount) })
	gauge(fmt.Sprintf(metricAdmissionUpstreamBaselineSeconds+`{upstream=%q,kind="stream"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselineStreamMs / 1000 })
	gauge(fmt.Sprintf(metricAdmissionUpstreamBaselineSeconds+`{upstream=%q,kind="plain"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselinePlainMs / 1000 })
	gauge(metricAdmissionUpstreamDrainPerSecond+lbl, func(u *lanes.Upstream) float64 { return u.DrainPerSecond })
}

// registerLanesMetrics exposes the adaptiveAdmission figures as
// omniroute_admission_* series (see docs/metrics.md): totals, and per
// upstream its limit, knee estimate, load, queue and latencies.
func (g *Gateway) registerLanesMetrics() {
	set := g.metrics.set
	gauge := func(name string, f func(s *lanes.Snapshot) float64) {
		set.NewGauge(name, func() float64 { return f(g.lanesSnapshot()) })
	}
	gauge(metricAdmissionLimit, func(s *lanes.Snapshot) float64 { return float64(s.CurrentLimit) })
	gauge(metricAdmissionMinLimit, func(s *lanes.Snapshot) float64 { return float64(s.MinLimit) })
	gauge(metricAdmissionMaxLimit, func(s *lanes.Snapshot) float64 { return float64(s.MaxLimit) })
	gauge(metricAdmissionGlobalLimit, func(s *lanes.Snapshot) float64 { return float64(s.GlobalLimit) })
	gauge(metricAdmissionGlobalActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.GlobalActiveCost) })
	gauge(metricAdmissionActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCost) })
	gauge(metricAdmissionActiveRequests, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCount) })
	gauge(metricAdmissionQueuedCost, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCost) })
	gauge(metricAdmissionQueuedRequests, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCount) })
	gauge(metricAdmissionLanes, func(s *lanes.Snapshot) float64 { return float64(s.LaneCount) })
	gauge(metricAdmissionVirtualLanesEnabled, func(s *lanes.Snapshot) float64 { return b2f(s.VirtualLanes) })
	gauge(metricAdmissionVirtualActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCost) })
	gauge(metricAdmissionVirtualActiveRequests, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCount) })
	gauge(metricAdmissionVirtualQueuedCost, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCost) })
	gauge(metricAdmissionVirtualQueuedRequests, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCount) })
	gauge(metricAdmissionAdmittedTotal, func(s *lanes.Snapshot) float64 { return float64(s.AdmittedCount) })
	gauge(metricAdmissionRejectedTotal, func(s *lanes.Snapshot) float64 { return float64(s.RejectedCount) })
	gauge(metricAdmissionAbortedTotal, func(s *lanes.Snapshot) float64 { return float64(s.AbortedCount) })
	gauge(metricAdmissionBusyTotal, func(s *lanes.Snapshot) float64 { return float64(s.BusyCount) })
	gauge(metricAdmissionWouldAdmitTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldAdmitCount) })
	gauge(metricAdmissionWouldQueueTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldQueueCount) })
	gauge(metricAdmissionWouldRejectTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldRejectCount) })
	gauge(metricAdmissionShutdown, func(s *lanes.Snapshot) float64 { return b2f(s.Shutdown) })
	for _, m := range []string{"off", "shadow", "enforce"} {
		gauge(metricAdmissionMode+`{mode="`+m+`"}`, func(s *lanes.Snapshot) float64 { return b2f(s.Mode == m) })
	}
	for cl := admission.Class(0); cl < admission.NumClasses; cl++ {
		name := cl.String()
		lbl := `{class="` + name + `"}`
		gauge(metricAdmissionClassActiveCost+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCost) })
		gauge(metricAdmissionClassActiveRequests+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCount) })
		gauge(metricAdmissionClassWaitingRequests+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].WaitingCount) })
		gauge(metricAdmissionClassAdmittedTotal+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].AdmittedCount) })
		for _, r := range lanes.Rejections() {
			code := r.Code()
			gauge(metricAdmissionClassRejectedTotal+`{class="`+name+`",reason="`+code+`"}`, func(s *lanes.Snapshot) float64 {
				return float64(s.Classes[name].Rejected[code])
			})
		}
	}
	for i, spec := range g.adm.lanes.Snapshot().Upstreams {
		g.upstreamMetrics(i, spec.Name)
	}
}
