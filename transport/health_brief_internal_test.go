package transport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/omniroute/gateway/actors/lanes"
	icluster "github.com/omniroute/gateway/internal/cluster"
)

// TestBriefHealthHidesTenantsAndMembers: what health shows a caller the
// management routes refuse has no tenant id (the admission lanes are
// per tenant) and no cluster member's address or id.
func TestBriefHealthHidesTenantsAndMembers(t *testing.T) {
	s := &lanes.Snapshot{Mode: "enforce", Upstreams: []lanes.Upstream{{Name: "mock/a/m", QueuedCount: 2,
		LaneTenants: []lanes.LaneTenant{{TenantKey: "key_0123456789abcdef", QueuedCount: 2}}}}}
	b, _ := json.Marshal(briefLanes(s))
	if strings.Contains(string(b), "key_0123456789abcdef") || strings.Contains(string(b), "laneTenants") || !strings.Contains(string(b), `"queuedCount":2`) {
		t.Fatalf("brief lanes: %s", b)
	}
	full := map[string]any{"mode": "etcd", "name": "prod", "self": "node-7f3a", "address": "10.0.0.5:7946",
		"members": []icluster.Member{{ID: "node-7f3a", Address: "10.0.0.5:7946"}, {ID: "node-9b1c", Address: "10.0.0.6:7946"}}}
	b, _ = json.Marshal(briefCluster(full))
	if strings.Contains(string(b), "10.0.0.") || strings.Contains(string(b), "node-") || !strings.Contains(string(b), `"memberCount":2`) {
		t.Fatalf("brief cluster: %s", b)
	}
}
