package intake

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/transport/metric"
)

// Register exposes the chatAdmission figures in set. Every series reads
// the ingest handle's atomics or the published pressure state when
// scraped; nothing is updated on the request path. Fairness keys are not
// labels (a caller could mint unbounded series with new keys); their
// count is.
func (s *Stage) Register(set *metrics.Set) {
	h := s.ingest
	gauge := func(name string, f func() float64) { set.NewGauge(name, f) }
	gauge(metric.ChatAdmissionInflightBytes, func() float64 { return float64(h.InflightBytes()) })
	gauge(metric.ChatAdmissionMaxInflightBytes, func() float64 { return float64(h.Budget().Bytes) })
	gauge(fmt.Sprintf(metric.ChatAdmissionBudgetInfo+`{source=%q}`, h.Budget().Source), func() float64 { return 1 })
	gauge(metric.ChatAdmissionActiveHeavy, func() float64 { return float64(h.ActiveHeavy()) })
	gauge(metric.ChatAdmissionActiveHealthyHeadroom, func() float64 { return float64(h.ActiveHeadroom()) })
	gauge(metric.ChatAdmissionWaiting, func() float64 { return float64(h.Waiting()) })
	gauge(metric.ChatAdmissionQueuedBytes, func() float64 { return float64(h.QueuedBytes()) })
	gauge(metric.ChatAdmissionLanes, func() float64 { return float64(len(h.Lanes())) })
	gauge(metric.ChatAdmissionQueuedRequestsTotal, func() float64 { return float64(h.SlowPathRequests()) })
	countCap := float64(s.cfg.CountCap)
	gauge(metric.ChatAdmissionCountCap, func() float64 { return countCap })
	gauge(metric.ChatAdmissionShedsTotal, func() float64 {
		var n uint64
		for _, r := range ingest.ShedReasons {
			n += h.Sheds(r)
		}
		return float64(n)
	})
	for _, r := range ingest.ShedReasons {
		gauge(fmt.Sprintf(metric.ChatAdmissionShedsTotal+`{reason=%q}`, r.String()), func() float64 { return float64(h.Sheds(r)) })
	}
	gauge(metric.ResourcePressureSeverity, func() float64 {
		if st := s.pressure.State(); st != nil {
			return float64(st.Severity)
		}
		return 0
	})
	for _, reason := range []string{pressure.ReasonNone, pressure.ReasonGoHeap, pressure.ReasonCgroup, pressure.ReasonCgroupHigh,
		pressure.ReasonPSISome, pressure.ReasonPSIFull, pressure.ReasonOOM} {
		gauge(fmt.Sprintf(metric.ResourcePressureReason+`{reason=%q}`, reason), func() float64 {
			if st := s.pressure.State(); st != nil && st.Reason == reason {
				return 1
			}
			return 0
		})
	}
}
