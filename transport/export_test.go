package transport

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/omniroute/gateway/actors/lanes"
	tenantlimitactor "github.com/omniroute/gateway/actors/tenantlimit"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/gateway/opslayer"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/upstream"
)

// SetLogsHeartbeat shortens the logs stream heartbeat for a test; call the
// returned func (after the gateway stopped) to restore it.
func SetLogsHeartbeat(d time.Duration) (restore func()) {
	old := opslayer.LogsHeartbeat
	opslayer.LogsHeartbeat = d
	return func() { opslayer.LogsHeartbeat = old }
}

// SetPanicProbe makes requests ("handler") and streams ("stream") run f
// first, so a test can make them panic; call the returned func after the
// gateway stopped.
func SetPanicProbe(f func(where string)) (restore func()) { return edge.SetPanicProbe(f) }

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
	m := make(map[string]string, len(metric.Table))
	for _, d := range metric.Table {
		m[d.Name] = d.Kind.String()
	}
	return m
}

// MarkDraining sets the flag Shutdown sets first, without closing the
// listeners, so a test can read what a draining gateway answers.
func (g *Gateway) MarkDraining() { g.edge.MarkDraining() }

// FillLanes gives n tenants a waiting request each, spread over the
// gateway's upstreams (whose capacity it takes first, so the requests
// queue in the tenants' lanes), for the dashboard's scale tests. It
// returns once the lanes exist and every request waits in its lane; release ends the waits and frees the
// capacity.
func (g *Gateway) FillLanes(n int) (release func()) {
	h := g.adm.Lanes()
	ups := h.Upstreams()
	var held []*lanes.Lease
	for u := 0; u < ups; u++ {
		for {
			l := new(lanes.Lease)
			if h.TryAcquire(lanes.Ticket{Upstream: u, Tenant: tenant.ID{0xff}, Class: g.adm.DefaultClass(), Cost: 1}, l) != lanes.None {
				break
			}
			held = append(held, l)
		}
	}
	// Each waiter's abort is an upstream.Cancel, as a request's is.
	abs := make([]*upstream.Cancel, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		ab := &upstream.Cancel{}
		abs[i] = ab
		var id tenant.ID
		binary.BigEndian.PutUint32(id[:], uint32(i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l lanes.Lease
			if h.Acquire(lanes.Ticket{Upstream: i % ups, Tenant: id, Class: g.adm.DefaultClass(), Cost: 1, Abort: ab}, &l) == lanes.None {
				h.Release(&l, lanes.Completion{Outcome: lanes.LocalReject})
			}
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	queuedLanes := func(s *lanes.Snapshot) int {
		q := 0
		for _, u := range s.Upstreams {
			for _, lt := range u.LaneTenants {
				if lt.QueuedCount > 0 {
					q++
				}
			}
		}
		return q
	}
	for s := h.Snapshot(); (s.LaneCount < n || queuedLanes(s) < n) && time.Now().Before(deadline); s = h.Snapshot() {
		time.Sleep(10 * time.Millisecond)
	}
	return func() {
		for _, ab := range abs {
			ab.Cancel()
		}
		wg.Wait()
		for _, l := range held {
			h.Release(l, lanes.Completion{Outcome: lanes.LocalReject})
		}
	}
}

// DashboardSnapshot is the body GET /api/dashboard/snapshot answers.
func (g *Gateway) DashboardSnapshot() map[string]any {
	return g.op.(interface{ DashboardSnapshot() map[string]any }).DashboardSnapshot()
}

// TenantLimits returns the tenant limiter's handle.
func (g *Gateway) TenantLimits() *tenantlimitactor.Handle {
	return g.ten.(interface {
		Limiter() *tenantlimitactor.Handle
	}).Limiter()
}
