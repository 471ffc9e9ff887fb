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
	gauge(metricChatAdmissionInflightBytes, func() float64 { return float64(h.InflightBytes()) })
	gauge(metricChatAdmissionMaxInflightBytes, func() float64 { return float64(h.Budget().Bytes) })
	gauge(fmt.Sprintf(metricChatAdmissionBudgetInfo+`{source=%q}`, h.Budget().Source), func() float64 { return 1 })
	gauge(metricChatAdmissionActiveHeavy, func() float64 { return float64(h.ActiveHeavy()) })
	gauge(metricChatAdmissionActiveHealthyHeadroom, func() float64 { return float64(h.ActiveHeadroom()) })
	gauge(metricChatAdmissionWaiting, func() float64 { return float64(h.Waiting()) })
	gauge(metricChatAdmissionQueuedBytes, func() float64 { return float64(h.QueuedBytes()) })
	gauge(metricChatAdmissionLanes, func() float64 { return float64(len(h.Lanes())) })
	gauge(metricChatAdmissionQueuedRequestsTotal, func() float64 { return float64(h.SlowPathRequests()) })
	countCap := 0.0
	if n, ok := g.opts.Env.Admission.CountCap(); ok {
		countCap = float64(n)
	}
	gauge(metricChatAdmissionCountCap, func() float64 { return countCap })
	gauge(metricChatAdmissionShedsTotal, func() float64 {
		var n uint64
		for _, r := range ingest.ShedReasons {
			n += h.Sheds(r)
		}
		return float64(n)
	})
	for _, r := range ingest.ShedReasons {
		gauge(fmt.Sprintf(metricChatAdmissionShedsTotal+`{reason=%q}`, r.String()), func() float64 { return float64(h.Sheds(r)) })
	}
	gauge(metricResourcePressureSeverity, func() float64 {
		if st := g.pressure.State(); st != nil {
			return float64(st.Severity)
		}
		return 0
	})
	for _, reason := range []string{pressure.ReasonNone, pressure.ReasonGoHeap, pressure.ReasonCgroup, pressure.ReasonCgroupHigh,
		pressure.ReasonPSISome, pressure.ReasonPSIFull, pressure.ReasonOOM} {
		gauge(fmt.Sprintf(metricResourcePressureReason+`{reason=%q}`, reason), func() float64 {
			if st := g.pressure.State(); st != nil && st.Reason == reason {
				return 1
			}
			return 0
		})
	}
}
