package cluster

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestShareInstallSecret: against a real etcd, members starting at once
// with different secrets all come away with one of them, the one etcd
// stored; a member starting later gets it too; another cluster keeps its
// own; and a stored value too short to be a secret is an error that says
// what to do.
func TestShareInstallSecret(t *testing.T) {
	srv := etcdtest.Start(t)
	const members = 8
	got := make([]string, members)
	created := make([]bool, members)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := DialEtcd([]string{srv.Addr()}, TLSFiles{})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			s, cr, err := ShareInstallSecret(c, "prod", []byte(fmt.Sprintf("secret-of-member-%02d-0123456789", i)))
			if err != nil {
				t.Error(err)
				return
			}
			got[i], created[i] = string(s), cr
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	winners := 0
	for i := range members {
		if got[i] != got[0] {
			t.Fatalf("member %d got %q, member 0 got %q: one cluster, two install secrets", i, got[i], got[0])
		}
		if created[i] {
			winners++
			if got[i] != fmt.Sprintf("secret-of-member-%02d-0123456789", i) {
				t.Fatalf("member %d was told it stored its own secret, but got %q", i, got[i])
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d members stored their secret; exactly one should", winners)
	}

	c, err := DialEtcd([]string{srv.Addr()}, TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s, cr, err := ShareInstallSecret(c, "prod", []byte("a-later-member-secret-0123456789")); err != nil || cr || string(s) != got[0] {
		t.Fatalf("a later member: %q created=%v %v, want the cluster's %q", s, cr, err, got[0])
	}
	if s, cr, err := ShareInstallSecret(c, "staging", []byte("staging-secret-0123456789")); err != nil || !cr || string(s) != "staging-secret-0123456789" {
		t.Fatalf("another cluster: %q created=%v %v, want its own", s, cr, err)
	}
	if _, err := c.Put(t.Context(), InstallSecretKey("broken"), "short"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ShareInstallSecret(c, "broken", []byte("an-offer-0123456789")); err == nil || !strings.Contains(err.Error(), "delete the key") {
		t.Fatalf("a stored value too short to be a secret: %v", err)
	}
}
