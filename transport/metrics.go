package transport

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/metric"
)

// gwMetrics holds the gateway's metric handles. Every handle a request
// touches is created up front or cached after its first use, so the hot
// path never builds a metric name.
type gwMetrics struct {
	set      *metrics.Set
	routes   [edge.NumRoutes]routeSeries
	inflight atomic.Int64
	// waiting counts the requests parked waiting for a target to recover
	// (waitForRecovery): the operator's sign that a model's targets are
	// all out and callers are being held rather than refused.
	waiting atomic.Int64
	targets *growable.List[targetSeries] // by target id; addTarget grows it
	dash    dashCounters
}

// targetSeries are one target's handles.
type targetSeries struct {
	name     string
	attempts [messages.NumFailureClasses]*metrics.Counter         // by class
	statuses atomic.Pointer[[600]atomic.Pointer[metrics.Counter]] // lazily per status
	ttfb     *metrics.PrometheusHistogram
}

// target returns target id's handles.
func (m *gwMetrics) target(id int) *targetSeries { return m.targets.At(id) }

// addTarget creates the series of the next target id (start-up or a
// reload that adds it).
func (m *gwMetrics) addTarget(name string) {
	ts := m.targets.At(m.targets.Grow(1))
	ts.name = name
	for c := messages.FailureClass(0); c < messages.NumFailureClasses; c++ {
		ts.attempts[c] = m.set.GetOrCreateCounter(fmt.Sprintf(metric.UpstreamAttemptsTotal+`{target=%q,outcome=%q}`, name, c.String()))
	}
	ts.ttfb = m.set.GetOrCreatePrometheusHistogramExt(fmt.Sprintf(metric.UpstreamTtfbSeconds+`{target=%q}`, name), metric.DurationBuckets)
}

// dashCounters are the inference figures the dashboard's history samples
// each second: requests, errors (status 400 and above) and the duration
// buckets of the inference routes together, as plain atomics so the
// sampler needs no lock and the request path pays a few atomic adds.
type dashCounters struct {
	requests atomic.Uint64
	errors   atomic.Uint64
	buckets  [len(metric.DurationBounds) + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
}

func (d *dashCounters) observe(status int, seconds float64) {
	d.requests.Add(1)
	if status >= 400 {
		d.errors.Add(1)
	}
	i := 0
	for i < len(metric.DurationBuckets) && seconds > metric.DurationBuckets[i] {
		i++
	}
	d.buckets[i].Add(1)
}

// routeSeries are one route's handles. Every route of the table gets all
// of them (newMetrics), so no code path can find a nil handle for the
// route it runs on.
type routeSeries struct {
	requests [600]atomic.Pointer[metrics.Counter] // by status, created on first use
	duration *metrics.PrometheusHistogram
	events   *metrics.Counter // SSE events relayed
	cut      *metrics.Counter // streams ended by an in-band error
	fallback *metrics.Counter // failed attempts before the answer
	waited   *metrics.Counter // waited for a target to recover, then routed
	refused  *metrics.Counter // every target out beyond the wait budget
	retries  *metrics.Counter // a lone target retried once after a transient failure
	panics   *metrics.Counter // requests whose handling panicked
}

func newMetrics(cat *catalog.Catalog) *gwMetrics {
	// Every family gets # HELP and # TYPE lines; metric.WriteExposition fills in
	// the help text from metric.Table. The switch is process-wide and this
	// package is the only writer of metrics.
	metrics.ExposeMetadata(true)
	m := &gwMetrics{set: metrics.NewSet()}
	for r := edge.Route(0); r < edge.NumRoutes; r++ {
		n := r.String()
		rm := &m.routes[r]
		rm.duration = m.set.NewPrometheusHistogramExt(fmt.Sprintf(metric.RequestDurationSeconds+`{route=%q}`, n), metric.DurationBuckets)
		rm.events = m.set.NewCounter(fmt.Sprintf(metric.StreamEventsTotal+`{route=%q}`, n))
		rm.cut = m.set.NewCounter(fmt.Sprintf(metric.StreamInterruptedTotal+`{route=%q}`, n))
		rm.fallback = m.set.NewCounter(fmt.Sprintf(metric.FallbacksTotal+`{route=%q}`, n))
		rm.waited = m.set.NewCounter(fmt.Sprintf(metric.RoutingWaitsTotal+`{route=%q,outcome="recovered"}`, n))
		rm.refused = m.set.NewCounter(fmt.Sprintf(metric.RoutingWaitsTotal+`{route=%q,outcome="refused"}`, n))
		rm.retries = m.set.NewCounter(fmt.Sprintf(metric.RoutingRetriesTotal+`{route=%q}`, n))
		rm.panics = m.set.NewCounter(fmt.Sprintf(metric.RequestPanicsTotal+`{route=%q}`, n))
	}
	m.targets = &growable.List[targetSeries]{} // recordPlan adds them
	m.set.NewGauge(metric.RequestsInflight, func() float64 { return float64(m.inflight.Load()) })
	m.set.NewGauge(metric.RoutingWaiting, func() float64 { return float64(m.waiting.Load()) })
	metrics.RegisterSet(m.set)
	return m
}

// finish counts a finished request and its duration.
func (m *gwMetrics) finish(r edge.Route, status int, took time.Duration) {
	m.request(r, status)
	d := took.Seconds()
	m.routes[r].duration.Update(d)
	if r.Spec().Surface != 0 {
		m.dash.observe(status, d)
	}
}

func (m *gwMetrics) unregister() { metrics.UnregisterSet(m.set, true) }

// request counts a finished request.
func (m *gwMetrics) request(r edge.Route, status int) {
	if status < 100 || status >= 600 {
		status = 599
	}
	slot := &m.routes[r].requests[status]
	c := slot.Load()
	if c == nil {
		c = m.set.GetOrCreateCounter(metric.RequestsTotal + `{route="` + r.String() + `",status="` + strconv.Itoa(status) + `"}`)
		slot.Store(c)
	}
	c.Inc()
}

// upstreamStatus counts an HTTP status a target answered with.
func (m *gwMetrics) upstreamStatus(target, status int) {
	if status < 100 || status >= 600 {
		return
	}
	ts := m.targets.At(target)
	arr := ts.statuses.Load()
	if arr == nil {
		ts.statuses.CompareAndSwap(nil, new([600]atomic.Pointer[metrics.Counter]))
		arr = ts.statuses.Load()
	}
	c := arr[status].Load()
	if c == nil {
		c = m.set.GetOrCreateCounter(metric.UpstreamResponsesTotal + `{target="` + ts.name + `",status="` + strconv.Itoa(status) + `"}`)
		arr[status].Store(c)
	}
	c.Inc()
}

// write renders this gateway's metrics and the process metrics in the
// Prometheus text format, every family with its help and type.
func (m *gwMetrics) write(w io.Writer) {
	var b bytes.Buffer
	m.set.WritePrometheus(&b)
	metrics.WriteProcessMetrics(&b)
	metric.WriteExposition(w, b.Bytes())
}
