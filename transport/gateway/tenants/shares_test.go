package tenants

import (
	"sync/atomic"
	"testing"

	"github.com/omniroute/gateway/actors/keys"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store/sqlite/sqlitetest"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// TestSharesFollowTheKeys: what the keys actor's change hook published
// before it became a subscription, the shares follower publishes: the
// weights and policies of the keys in force at start, and after every key
// operation, in force when the operation returns (the Sync barrier); a
// panic in the follower restarts it, and it keeps following.
func TestSharesFollowTheKeys(t *testing.T) {
	sys := testutil.ActorSystem(t)
	db := sqlitetest.Open(t)
	res, err := tenant.NewResolver([]byte("0123456789abcdef0123"), tenant.ModeKeys, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgKey := []byte("config-tenant-key")
	kh, err := keys.Spawn(sys, keys.Options{Store: db, Resolver: res,
		Config: []keys.ConfigTenant{{Name: "cfg", KeySHA256: ikeys.Digest(cfgKey), Policy: tenantpolicy.Policy{Weight: 3, RequestsPerMinute: 9}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer kh.Stop()
	var out atomic.Pointer[ikeys.Shares]
	pid, stop, err := followShares(sys, kh, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	cfgID := res.IDForKey(cfgKey)
	if w := out.Load().Weight(cfgID); w != 3 {
		t.Fatalf("the config tenant's weight at start %d, want 3", w)
	}
	if p, ok := out.Load().Policy(cfgID.String()); !ok || p.RequestsPerMinute != 9 {
		t.Fatalf("the config tenant's policy at start %+v %v", p, ok)
	}
	info, secret, err := kh.Create("heavy", tenantpolicy.Policy{Weight: 5})
	if err != nil {
		t.Fatal(err)
	}
	id := res.IDForKey([]byte(secret))
	if id.String() != info.TenantID {
		t.Fatalf("tenant id %s, the key's %s", id, info.TenantID)
	}
	if w := out.Load().Weight(id); w != 5 {
		t.Fatalf("weight once Create returned %d, want 5", w)
	}
	if _, err := kh.UpdatePolicy("heavy", tenantpolicy.Policy{Weight: 2, TokensPerDay: 100}); err != nil {
		t.Fatal(err)
	}
	if w := out.Load().Weight(id); w != 2 {
		t.Fatalf("weight once UpdatePolicy returned %d, want 2", w)
	}
	if p, ok := out.Load().Policy(id.String()); !ok || p.TokensPerDay != 100 {
		t.Fatalf("policy once UpdatePolicy returned %+v %v", p, ok)
	}

	// A panic restarts the follower from a fresh object on the same holder.
	sys.Root.Send(pid, messages.Crash{Reason: "test"})
	if _, err := kh.Revoke("heavy"); err != nil {
		t.Fatal(err)
	}
	if w := out.Load().Weight(id); w != tenantpolicy.DefaultWeight {
		t.Fatalf("a revoked key's weight %d after the follower's restart, want the default", w)
	}
	if _, ok := out.Load().Policy(id.String()); ok {
		t.Fatal("a revoked key keeps its policy")
	}
}
