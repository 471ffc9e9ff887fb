package transport

import (
	"fmt"

	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/internal/pressure"
)

// registerAdmissionMetrics exposes the chatAdmission figures in /metrics.
// Every series reads the ingest handle's atomics or the published pressure
// state when scraped; nothing is updated on the request path. Fairness keys
// are not labels (a caller could mint unbounded series with new keys);
// their count is.
func (g *Gateway) registerAdmissionMetrics() {
	set, h := g.metrics.set, g.ingest
	gauge := func(name string, f func() float64) { set.NewGauge(name, f) }
	gauge(`omniroute_chat_admission_inflight_bytes`, func() float64 { return float64(h.InflightBytes()) })
	gauge(`omniroute_chat_admission_max_inflight_bytes`, func() float64 { return float64(h.Budget().Bytes) })
	gauge(fmt.Sprintf(`omniroute_chat_admission_budget_info{source=%q}`, h.Budget().Source), func() float64 { return 1 })
	gauge(`omniroute_chat_admission_active_heavy`, func() float64 { return float64(h.ActiveHeavy()) })
	gauge(`omniroute_chat_admission_active_healthy_headroom`, func() float64 { return float64(h.ActiveHeadroom()) })
	gauge(`omniroute_chat_admission_waiting`, func() float64 { return float64(h.Waiting()) })
	gauge(`omniroute_chat_admission_queued_bytes`, func() float64 { return float64(h.QueuedBytes()) })
	gauge(`omniroute_chat_admission_lanes`, func() float64 { return float64(len(h.Lanes())) })
	gauge(`omniroute_chat_admission_queued_requests_total`, func() float64 { return float64(h.SlowPathRequests()) })
	countCap := 0.0
	if n, ok := g.opts.Env.Admission.CountCap(); ok {
		countCap = float64(n)
	}
	gauge(`omniroute_chat_admission_count_cap`, func() float64 { return countCap })
	gauge(`omniroute_chat_admission_sheds_total`, func() float64 {
		var n uint64
		for _, r := range ingest.ShedReasons {
			n += h.Sheds(r)
		}
		return float64(n)
	})
	for _, r := range ingest.ShedReasons {
		gauge(fmt.Sprintf(`omniroute_chat_admission_sheds_total{reason=%q}`, r.String()), func() float64 { return float64(h.Sheds(r)) })
	}
	gauge(`omniroute_resource_pressure_severity`, func() float64 {
		if st := g.pressure.State(); st != nil {
			return float64(st.Severity)
		}
		return 0
	})
	for _, reason := range []string{pressure.ReasonNone, pressure.ReasonGoHeap, pressure.ReasonCgroup, pressure.ReasonCgroupHigh,
		pressure.ReasonPSISome, pressure.ReasonPSIFull, pressure.ReasonOOM} {
		gauge(fmt.Sprintf(`omniroute_resource_pressure_reason{reason=%q}`, reason), func() float64 {
			if st := g.pressure.State(); st != nil && st.Reason == reason {
				return 1
			}
			return 0
		})
	}
}
