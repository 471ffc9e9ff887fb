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
	gauge(`omniroute_admission_upstream_limit`+lbl, func(u *lanes.Upstream) float64 { return float64(u.CurrentLimit) })
	gauge(`omniroute_admission_upstream_knee_estimate`+lbl, func(u *lanes.Upstream) float64 { return u.KneeEstimate })
	gauge(`omniroute_admission_upstream_active_cost`+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCost) })
	gauge(`omniroute_admission_upstream_active_requests`+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCount) })
	gauge(`omniroute_admission_upstream_queued_requests`+lbl, func(u *lanes.Upstream) float64 { return float64(u.QueuedCount) })
	gauge(fmt.Sprintf(`omniroute_admission_upstream_baseline_seconds{upstream=%q,kind="stream"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselineStreamMs / 1000 })
	gauge(fmt.Sprintf(`omniroute_admission_upstream_baseline_seconds{upstream=%q,kind="plain"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselinePlainMs / 1000 })
	gauge(`omniroute_admission_upstream_drain_per_second`+lbl, func(u *lanes.Upstream) float64 { return u.DrainPerSecond })
}

// registerLanesMetrics exposes the adaptiveAdmission figures as
// omniroute_admission_* series (see docs/metrics.md): totals, and per
// upstream its limit, knee estimate, load, queue and latencies.
func (g *Gateway) registerLanesMetrics() {
	set := g.metrics.set
	gauge := func(name string, f func(s *lanes.Snapshot) float64) {
		set.NewGauge(name, func() float64 { return f(g.lanesSnapshot()) })
	}
	gauge(`omniroute_admission_limit`, func(s *lanes.Snapshot) float64 { return float64(s.CurrentLimit) })
	gauge(`omniroute_admission_min_limit`, func(s *lanes.Snapshot) float64 { return float64(s.MinLimit) })
	gauge(`omniroute_admission_max_limit`, func(s *lanes.Snapshot) float64 { return float64(s.MaxLimit) })
	gauge(`omniroute_admission_global_limit`, func(s *lanes.Snapshot) float64 { return float64(s.GlobalLimit) })
	gauge(`omniroute_admission_global_active_cost`, func(s *lanes.Snapshot) float64 { return float64(s.GlobalActiveCost) })
	gauge(`omniroute_admission_active_cost`, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCost) })
	gauge(`omniroute_admission_active_requests`, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCount) })
	gauge(`omniroute_admission_queued_cost`, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCost) })
	gauge(`omniroute_admission_queued_requests`, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCount) })
	gauge(`omniroute_admission_lanes`, func(s *lanes.Snapshot) float64 { return float64(s.LaneCount) })
	gauge(`omniroute_admission_virtual_lanes_enabled`, func(s *lanes.Snapshot) float64 { return b2f(s.VirtualLanes) })
	gauge(`omniroute_admission_virtual_active_cost`, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCost) })
	gauge(`omniroute_admission_virtual_active_requests`, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCount) })
	gauge(`omniroute_admission_virtual_queued_cost`, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCost) })
	gauge(`omniroute_admission_virtual_queued_requests`, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCount) })
	gauge(`omniroute_admission_admitted_total`, func(s *lanes.Snapshot) float64 { return float64(s.AdmittedCount) })
	gauge(`omniroute_admission_rejected_total`, func(s *lanes.Snapshot) float64 { return float64(s.RejectedCount) })
	gauge(`omniroute_admission_aborted_total`, func(s *lanes.Snapshot) float64 { return float64(s.AbortedCount) })
	gauge(`omniroute_admission_busy_total`, func(s *lanes.Snapshot) float64 { return float64(s.BusyCount) })
	gauge(`omniroute_admission_would_admit_total`, func(s *lanes.Snapshot) float64 { return float64(s.WouldAdmitCount) })
	gauge(`omniroute_admission_would_queue_total`, func(s *lanes.Snapshot) float64 { return float64(s.WouldQueueCount) })
	gauge(`omniroute_admission_would_reject_total`, func(s *lanes.Snapshot) float64 { return float64(s.WouldRejectCount) })
	gauge(`omniroute_admission_shutdown`, func(s *lanes.Snapshot) float64 { return b2f(s.Shutdown) })
	for _, m := range []string{"off", "shadow", "enforce"} {
		gauge(`omniroute_admission_mode{mode="`+m+`"}`, func(s *lanes.Snapshot) float64 { return b2f(s.Mode == m) })
	}
	for cl := admission.Class(0); cl < admission.NumClasses; cl++ {
		name := cl.String()
		lbl := `{class="` + name + `"}`
		gauge(`omniroute_admission_class_active_cost`+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCost) })
		gauge(`omniroute_admission_class_active_requests`+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCount) })
		gauge(`omniroute_admission_class_waiting_requests`+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].WaitingCount) })
		gauge(`omniroute_admission_class_admitted_total`+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].AdmittedCount) })
		for _, r := range lanes.Rejections() {
			code := r.Code()
			gauge(`omniroute_admission_class_rejected_total{class="`+name+`",reason="`+code+`"}`, func(s *lanes.Snapshot) float64 {
				return float64(s.Classes[name].Rejected[code])
			})
		}
	}
	for i, spec := range g.adm.lanes.Snapshot().Upstreams {
		g.upstreamMetrics(i, spec.Name)
	}
}
