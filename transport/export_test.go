package transport

import "time"

// SetLogsHeartbeat shortens the logs stream heartbeat for a test; call the
// returned func (after the gateway stopped) to restore it.
func SetLogsHeartbeat(d time.Duration) (restore func()) {
	old := logsHeartbeat
	logsHeartbeat = d
	return func() { logsHeartbeat = old }
}

// SetPanicProbe makes requests ("handler") and streams ("stream") run f
// first, so a test can make them panic; call the returned func after the
// gateway stopped.
func SetPanicProbe(f func(where string)) (restore func()) {
	panicProbe.Store(&f)
	return func() { panicProbe.Store(nil) }
}

// Panics is how many requests' handling panicked, on every route.
func (g *Gateway) Panics() uint64 {
	var n uint64
	for r := range g.metrics.routes {
		n += g.metrics.routes[r].panics.Get()
	}
	return n
}

// MetricKinds maps every family of the metric table to its type.
func MetricKinds() map[string]string {
	m := make(map[string]string, len(metricTable))
	for _, d := range metricTable {
		m[d.name] = d.kind.String()
	}
	return m
}

// MarkDraining sets the flag Shutdown sets first, without closing the
// listeners, so a test can read what a draining gateway answers.
func (g *Gateway) MarkDraining() { g.draining.Store(true) }
