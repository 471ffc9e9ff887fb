package transport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/omniroute/gateway/actors/lanes"
)

// TestBriefHealthHidesTenants: what health shows a caller the
// management routes refuse has no tenant id (the admission lanes are
// per tenant); the cluster section's brief, without a member's address
// or id, is tested in transport/gateway/clusterlayer, the tenants'
// (without windows) in transport/gateway/tenants, and a section that
// cannot be encoded in transport/gateway/opslayer.
func TestBriefHealthHidesTenants(t *testing.T) {
	s := &lanes.Snapshot{Mode: "enforce", Upstreams: []lanes.Upstream{{Name: "mock/a/m", QueuedCount: 2,
		LaneTenants: []lanes.LaneTenant{{TenantKey: "key_0123456789abcdef", QueuedCount: 2}}}}}
	b, _ := json.Marshal(briefLanes(s))
	if strings.Contains(string(b), "key_0123456789abcdef") || strings.Contains(string(b), "laneTenants") || !strings.Contains(string(b), `"queuedCount":2`) {
		t.Fatalf("brief lanes: %s", b)
	}
}
