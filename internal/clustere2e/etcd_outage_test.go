package clustere2e

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

// etcdAt runs a one-member etcd on fixed ports and data dir, so that the
// test can stop it and start it again as the same member.
func etcdAt(t *testing.T, dir string, clientPort, peerPort int) *embed.Etcd {
	t.Helper()
	return runEtcd(t, etcdConfig(dir, url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}, peerPort))
}

// TestEtcdOutage: etcd stops for 10 s under load on two nodes. Requests
// with no shared limit never fail; a tenant's concurrency cap, whose slot
// leases live in a grain on a node (not in etcd), keeps being served;
// and once etcd is back a node that joins and the two all see each other.
func TestEtcdOutage(t *testing.T) {
	dir, cport, pport := t.TempDir(), etcdtest.FreePort(t), etcdtest.FreePort(t)
	e := etcdAt(t, dir, cport, pport)
	var stopped atomic.Bool
	t.Cleanup(func() {
		if !stopped.Load() {
			e.Close()
		}
	})
	etcdAddr := fmt.Sprintf("127.0.0.1:%d", cport)
	exe := buildGateway(t)
	mock, mockAddr := startMock(t, map[string]mockprovider.Behavior{
		"m-capped": {LatencyMS: 20, CompletionTokens: 5},
		"m-open":   {LatencyMS: 10, CompletionTokens: 5},
	})
	cfgPath := testutil.WriteConfig(t, `{"providers": {"mock": {"base_url": "http://`+mockAddr+`/v1", "apis": ["chat"], "auth": "none", "connections": {"free": {}}}},
	  "models": {"capped": {"targets": [{"connection": "mock/free", "model": "m-capped"}]},
	             "open": {"targets": [{"connection": "mock/free", "model": "m-open"}]}},
	  "tenants": [{"name": "capped", "key_env": "CAPPED_KEY", "max_concurrent": `+fmt.Sprint(capped)+`}],
	  "auth": {"mode": "open", "allow_anonymous": true}}`)
	ns := startCluster(t, exe, cfgPath, etcdAddr, 2, nil)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}

	// phase counts the answers of each phase: before, during and after
	// the outage.
	type counts struct{ open, capped, refused atomic.Int64 }
	var phases [3]counts
	var phase atomic.Int32
	stop := make(chan struct{})
	for _, n := range ns {
		for _, snd := range []sender{{"", "open", false}, {"", "open", false}, {cappedKy, "capped", true}, {cappedKy, "capped", true}} {
			sendUntil(t, &wg, client, n.addr, snd, stop, func(status int) {
				c := &phases[phase.Load()]
				switch {
				case status == 429:
					c.refused.Add(1)
				case snd.refusable:
					c.capped.Add(1)
				default:
					c.open.Add(1)
				}
			}, func() string { return fmt.Sprintf("phase %d", phase.Load()) })
		}
	}
	time.Sleep(2 * time.Second)
	phase.Store(1)
	stopped.Store(true)
	e.Close()
	time.Sleep(10 * time.Second)
	e = etcdAt(t, dir, cport, pport)
	stopped.Store(false)
	phase.Store(2)
	time.Sleep(5 * time.Second)
	// The two kept their member lists through the outage and still see
	// each other, and a node that joins now finds both and both find it:
	// the membership converged in etcd, and no member was dropped (and so
	// blocked for good by protoactor) while the others re-registered.
	late := startNode(t, exe, cfgPath, etcdAddr)
	for i, n := range []*node{ns[0], ns[1], late} {
		waitFor(t, fmt.Sprintf("node %d to see three members after etcd returned", i), func() bool { return len(n.health(t).Cluster.Members) == len(ns)+1 })
	}
	close(stop)
	wg.Wait()
	for i := range phases {
		c := &phases[i]
		t.Logf("phase %d: %d open answers, %d capped answers, %d capped refusals", i, c.open.Load(), c.capped.Load(), c.refused.Load())
	}
	for i := range phases {
		if phases[i].open.Load() == 0 || phases[i].capped.Load() == 0 {
			t.Fatalf("phase %d served %d open and %d capped requests: serving stopped", i, phases[i].open.Load(), phases[i].capped.Load())
		}
	}
	if st := mock.Stats().Models["m-capped"]; st.MaxInflight > capped {
		t.Fatalf("the mock had %d of the tenant's requests in flight at once; the cap is %d", st.MaxInflight, capped)
	}
}
