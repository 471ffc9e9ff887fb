package admit

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/transport/metric"
)

// snapCache caches one snapshot per scrape: every admission gauge reads
// the same figures and the snapshot is built once.
type snapCache struct {
	mu   sync.Mutex
	at   time.Time
	snap *lanes.Snapshot
	pos  []int // upstream index → position in snap.Upstreams (-1: retired)
}

// Snapshot is the lanes' snapshot, at most 100 ms old: what the health
// section's readiness, the dashboard and the metrics read.
func (s *Stage) Snapshot() *lanes.Snapshot {
	snap, _ := s.snapshotPos()
	return snap
}

func (s *Stage) snapshotPos() (*lanes.Snapshot, []int) {
	m := &s.snap
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); m.snap == nil || now.Sub(m.at) > 100*time.Millisecond {
		m.snap, m.at = s.lanes.Snapshot(), now
		m.pos = make([]int, s.lanes.Upstreams())
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

// Health is the adaptiveAdmission section of the health report: a fresh
// snapshot, down once admission stopped.
func (s *Stage) Health() (any, string) {
	snap := s.lanes.Snapshot()
	status := "ok"
	if snap.Shutdown {
		status = "down"
	}
	return snap, status
}

// Brief is the adaptiveAdmission section for callers the management
// routes refuse: the figures without the lanes' tenant ids.
func Brief(body any) any {
	if s, ok := body.(*lanes.Snapshot); ok {
		s.LaneTenants = nil
		for i := range s.Upstreams {
			s.Upstreams[i].LaneTenants = nil // a fresh snapshot per call: nothing shared is changed
		}
	}
	return body
}

// RegisterUpstream exposes upstream i's figures in set (start-up, and a
// reload adding its target); a retired upstream's read 0.
func (s *Stage) RegisterUpstream(set *metrics.Set, i int, name string) {
	gauge := func(name string, f func(u *lanes.Upstream) float64) {
		set.NewGauge(name, func() float64 {
			snap, pos := s.snapshotPos()
			if i >= len(pos) || pos[i] < 0 {
				return 0
			}
			return f(&snap.Upstreams[pos[i]])
		})
	}
	lbl := fmt.Sprintf(`{upstream=%q}`, name)
	gauge(metric.AdmissionUpstreamLimit+lbl, func(u *lanes.Upstream) float64 { return float64(u.CurrentLimit) })
	gauge(metric.AdmissionUpstreamKneeEstimate+lbl, func(u *lanes.Upstream) float64 { return u.KneeEstimate })
	gauge(metric.AdmissionUpstreamActiveCost+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCost) })
	gauge(metric.AdmissionUpstreamActiveRequests+lbl, func(u *lanes.Upstream) float64 { return float64(u.ActiveCount) })
	gauge(metric.AdmissionUpstreamQueuedRequests+lbl, func(u *lanes.Upstream) float64 { return float64(u.QueuedCount) })
	gauge(fmt.Sprintf(metric.AdmissionUpstreamBaselineSeconds+`{upstream=%q,kind="stream"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselineStreamMs / 1000 })
	gauge(fmt.Sprintf(metric.AdmissionUpstreamBaselineSeconds+`{upstream=%q,kind="plain"}`, name),
		func(u *lanes.Upstream) float64 { return u.BaselinePlainMs / 1000 })
	gauge(metric.AdmissionUpstreamDrainPerSecond+lbl, func(u *lanes.Upstream) float64 { return u.DrainPerSecond })
}

// Register exposes the adaptiveAdmission figures in set as
// omniroute_admission_* series (see docs/metrics.md): totals, and per
// upstream its limit, knee estimate, load, queue and latencies. Every
// series reads the cached snapshot when scraped; nothing is updated on
// the request path.
func (s *Stage) Register(set *metrics.Set) {
	gauge := func(name string, f func(s *lanes.Snapshot) float64) {
		set.NewGauge(name, func() float64 { return f(s.Snapshot()) })
	}
	gauge(metric.AdmissionLimit, func(s *lanes.Snapshot) float64 { return float64(s.CurrentLimit) })
	gauge(metric.AdmissionMinLimit, func(s *lanes.Snapshot) float64 { return float64(s.MinLimit) })
	gauge(metric.AdmissionMaxLimit, func(s *lanes.Snapshot) float64 { return float64(s.MaxLimit) })
	gauge(metric.AdmissionGlobalLimit, func(s *lanes.Snapshot) float64 { return float64(s.GlobalLimit) })
	gauge(metric.AdmissionGlobalActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.GlobalActiveCost) })
	gauge(metric.AdmissionActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCost) })
	gauge(metric.AdmissionActiveRequests, func(s *lanes.Snapshot) float64 { return float64(s.ActiveCount) })
	gauge(metric.AdmissionQueuedCost, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCost) })
	gauge(metric.AdmissionQueuedRequests, func(s *lanes.Snapshot) float64 { return float64(s.QueuedCount) })
	gauge(metric.AdmissionLanes, func(s *lanes.Snapshot) float64 { return float64(s.LaneCount) })
	gauge(metric.AdmissionVirtualLanesEnabled, func(s *lanes.Snapshot) float64 { return b2f(s.VirtualLanes) })
	gauge(metric.AdmissionVirtualActiveCost, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCost) })
	gauge(metric.AdmissionVirtualActiveRequests, func(s *lanes.Snapshot) float64 { return float64(s.VirtualActiveCount) })
	gauge(metric.AdmissionVirtualQueuedCost, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCost) })
	gauge(metric.AdmissionVirtualQueuedRequests, func(s *lanes.Snapshot) float64 { return float64(s.VirtualQueuedCount) })
	gauge(metric.AdmissionAdmittedTotal, func(s *lanes.Snapshot) float64 { return float64(s.AdmittedCount) })
	gauge(metric.AdmissionRejectedTotal, func(s *lanes.Snapshot) float64 { return float64(s.RejectedCount) })
	gauge(metric.AdmissionAbortedTotal, func(s *lanes.Snapshot) float64 { return float64(s.AbortedCount) })
	gauge(metric.AdmissionBusyTotal, func(s *lanes.Snapshot) float64 { return float64(s.BusyCount) })
	gauge(metric.AdmissionWouldAdmitTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldAdmitCount) })
	gauge(metric.AdmissionWouldQueueTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldQueueCount) })
	gauge(metric.AdmissionWouldRejectTotal, func(s *lanes.Snapshot) float64 { return float64(s.WouldRejectCount) })
	gauge(metric.AdmissionShutdown, func(s *lanes.Snapshot) float64 { return b2f(s.Shutdown) })
	for _, m := range []string{"off", "shadow", "enforce"} {
		gauge(metric.AdmissionMode+`{mode="`+m+`"}`, func(s *lanes.Snapshot) float64 { return b2f(s.Mode == m) })
	}
	for cl := admission.Class(0); cl < admission.NumClasses; cl++ {
		name := cl.String()
		lbl := `{class="` + name + `"}`
		gauge(metric.AdmissionClassActiveCost+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCost) })
		gauge(metric.AdmissionClassActiveRequests+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].ActiveCount) })
		gauge(metric.AdmissionClassWaitingRequests+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].WaitingCount) })
		gauge(metric.AdmissionClassAdmittedTotal+lbl, func(s *lanes.Snapshot) float64 { return float64(s.Classes[name].AdmittedCount) })
		for _, r := range lanes.Rejections() {
			code := r.Code()
			gauge(metric.AdmissionClassRejectedTotal+`{class="`+name+`",reason="`+code+`"}`, func(s *lanes.Snapshot) float64 {
				return float64(s.Classes[name].Rejected[code])
			})
		}
	}
	for i, spec := range s.lanes.Snapshot().Upstreams {
		s.RegisterUpstream(set, i, spec.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Upstreams are the admission upstreams of targets, one per target
// (upstream index = target id), with the cap the file sets (Caps).
func Upstreams(targets []*catalog.Target, f *config.File) []lanes.UpstreamSpec {
	caps := Caps(f)
	out := make([]lanes.UpstreamSpec, len(targets))
	for i, t := range targets {
		out[i] = lanes.UpstreamSpec{Name: t.Name, Cap: caps[t.Name]}
	}
	return out
}

// Caps is each target's concurrency cap: the smallest max_concurrent
// any model sets for it (0: none).
func Caps(f *config.File) map[string]int {
	out := map[string]int{}
	for _, mn := range slices.Sorted(maps.Keys(f.Models)) {
		for _, t := range f.Models[mn].Targets {
			pid, cid, err := f.ResolveConnection(t.Connection)
			if err != nil {
				continue
			}
			up := t.Model
			if up == "" {
				up = mn
			}
			name := pid + "/" + cid + "/" + up
			c, seen := out[name]
			if !seen || (t.MaxConcurrent > 0 && (c == 0 || t.MaxConcurrent < c)) {
				out[name] = t.MaxConcurrent
			}
		}
	}
	return out
}
