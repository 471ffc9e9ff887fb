package transport

import (
	"reflect"
	"testing"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/catalog"
)

// TestRouteTableComplete keeps the route table whole: every route has a
// unique label, its paths select it, an inference surface speaks its own
// dialect, and every per-route metric handle exists for every route (the
// relay route once had no routing-wait counters, and a request that waited
// on it dereferenced nil inside the handler).
func TestRouteTableComplete(t *testing.T) {
	seen := map[string]route{}
	for r := route(0); r < numRoutes; r++ {
		spec := routes[r]
		if spec.label == "" {
			t.Errorf("route %d has no label", r)
		}
		if o, dup := seen[spec.label]; dup {
			t.Errorf("routes %d and %d share the label %q", o, r, spec.label)
		}
		seen[spec.label] = r
		for _, p := range spec.paths {
			if got := routeOf([]byte(p)); got != r {
				t.Errorf("path %s selects route %s, want %s", p, got, r)
			}
		}
		if spec.surface != 0 {
			if want := formatFor(spec.surface); r.format() != want {
				t.Errorf("route %s speaks %v but its surface %s renders %v", r, r.format(), spec.surface, want)
			}
			if spec.dialect == dialectManagement {
				t.Errorf("inference route %s renders management errors", r)
			}
		}
	}
	for _, s := range catalog.Surfaces {
		if r := surfaceRoute(s); routes[r].surface != s {
			t.Errorf("surface %s has no route", s)
		}
	}
	for _, p := range []string{"/api/services", "/api/services/x/start", "/api/engines", "/api/keys", "/api/keys/agents/rotate", "/api/requests", "/api/usage"} {
		if routeOf([]byte(p)) != routeManagement {
			t.Errorf("%s is not a management route", p)
		}
	}
	if routeOf([]byte("/nope")) != routeOther {
		t.Error("an unknown path must be routeOther")
	}

	m := newMetrics(&catalog.Catalog{})
	defer m.unregister()
	for r := route(0); r < numRoutes; r++ {
		v := reflect.ValueOf(&m.routes[r]).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Kind() == reflect.Pointer && f.IsNil() {
				t.Errorf("route %s has no %s metric", r, v.Type().Field(i).Name)
			}
		}
	}
}

// TestLaneErrorsComplete: every admission reason maps to an error with a
// status and (for a refusal) a code and a message; a reason without one
// was a nil lookup inside a fasthttp handler.
func TestLaneErrorsComplete(t *testing.T) {
	for r := lanes.Reason(0); r < lanes.NumReasons; r++ {
		e := laneErrors[r]
		if e == nil || e.Status == 0 {
			t.Fatalf("reason %d has no answer", r)
		}
		if r != lanes.None && (e.Code == "" || e.Message == "" || e.Status < 400) {
			t.Errorf("reason %d answer incomplete: %+v", r, e)
		}
	}
}

// TestHostAllowed: IP literals (v4 octets, bracketed v6), localhost and
// the configured names pass; any other name, or a malformed literal, does
// not (the DNS-rebinding check of browser.go).
func TestHostAllowed(t *testing.T) {
	p := browserPolicy{hosts: []string{"gw.internal"}}
	for host, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.0.0.1:20128": true, "10.1.2.3": true, "[::1]:80": true, "[::1]": true,
		"localhost": true, "LOCALHOST:1": true, "gw.internal": true, "GW.Internal:8443": true,
		"256.1.1.1": false, "1.2.3": false, "1.2.3.4.5": false, "1..2.3": false, "1.2.3.4444": false, "[::1": false, "[zz]": false,
		"evil.example": false, "gw.internal.evil.example": false, "localhost.evil.example": false, "127.0.0.1.nip.io": false,
	} {
		if got := p.hostAllowed([]byte(host)); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}
