package transport

import (
	"reflect"
	"testing"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/ops"
)

// TestRoutesAgreeWithPipeline: the edge's route table (edge.Endpoints,
// checked whole by edge's TestRouteTableComplete) agrees with what the
// pipeline does with a route: an inference surface speaks its own
// dialect, every surface has a route, the dispatch reaches the operator
// APIs' paths, and every per-route metric handle exists for every route
// (the relay route once had no routing-wait counters, and a request that
// waited on it dereferenced nil inside the handler).
func TestRoutesAgreeWithPipeline(t *testing.T) {
	for r := edge.Route(0); r < edge.NumRoutes; r++ {
		spec := r.Spec()
		if spec.Surface != 0 {
			if want := formatFor(spec.Surface); r.Format() != want {
				t.Errorf("route %s speaks %v but its surface %s renders %v", r, r.Format(), spec.Surface, want)
			}
			if spec.Dialect == edge.DialectManagement {
				t.Errorf("inference route %s renders management errors", r)
			}
		}
	}
	for _, s := range catalog.Surfaces {
		if r := edge.SurfaceRoute(s); r.Spec().Surface != s {
			t.Errorf("surface %s has no route", s)
		} else if s.Route() != edge.Endpoints[edge.Find([]byte(s.Route()))].Path {
			t.Errorf("surface %s's path %s is not its route's", s, s.Route())
		}
	}
	for p, want := range map[string]edge.Handler{ops.ServicesPath: edge.HandleServices, ops.ServicesPath + "/x/start": edge.HandleServices,
		ops.EnginesPath: edge.HandleServices, ops.KeysPath: edge.HandleKeys, ops.KeysPath + "/agents/rotate": edge.HandleKeys,
		ops.RequestsPath: edge.HandleRequests, ops.UsagePath: edge.HandleUsage, ops.QuotaPath: edge.HandleQuota,
		ops.PreviewPath: edge.HandlePreview, ops.ReloadPath: edge.HandleReload, ops.DashboardPath: edge.HandleDashboard,
		ops.DashboardSnapshotPath: edge.HandleDashboard} {
		if edge.Of([]byte(p)) != edge.Management || !edge.Is([]byte(p), want) {
			t.Errorf("%s is not served by the operator API's handler %d", p, want)
		}
	}

	m := newMetrics(&catalog.Catalog{})
	defer m.unregister()
	for r := edge.Route(0); r < edge.NumRoutes; r++ {
		v := reflect.ValueOf(&m.routes[r]).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Kind() == reflect.Pointer && f.IsNil() {
				t.Errorf("route %s has no %s metric", r, v.Type().Field(i).Name)
			}
		}
	}
}
