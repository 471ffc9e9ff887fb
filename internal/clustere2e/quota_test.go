package clustere2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

// targetQuota is the quota state routing uses for target on n, from
// GET /api/omniroute/quota (management routes answer loopback callers).
func (n *node) targetQuota(t *testing.T, target string) string {
	var q struct {
		Connections []struct {
			Targets []struct {
				Target string `json:"target"`
				Quota  string `json:"quota"`
			} `json:"targets"`
		} `json:"connections"`
	}
	getJSON(t, "http://"+n.addr+"/api/omniroute/quota", &q)
	for _, c := range q.Connections {
		for _, tg := range c.Targets {
			if tg.Target == target {
				return tg.Quota
			}
		}
	}
	return ""
}

// TestQuotaTelemetryShared: three nodes share quota telemetry.
//
//   - each usage API is polled by one node, not three: over a few poll
//     intervals the mock counts about one poll per interval per
//     connection;
//   - a response whose headers say the tokens are spent, served by node
//     0, makes nodes 1 and 2 route around the target (its quota state is
//     exhausted there) without any request of theirs;
//   - the node that polls a connection is killed: a survivor takes its
//     polling over.
func TestQuotaTelemetryShared(t *testing.T) {
	etcdAddr := startEtcd(t)
	exe := buildGateway(t)
	spent := 0
	mock, mockAddr := startMock(t, map[string]mockprovider.Behavior{
		"m-polled": {LatencyMS: 5, CompletionTokens: 5},
		"m-spent":  {LatencyMS: 5, CompletionTokens: 5, RateLimit: mockprovider.RateLimitSpec{Family: "openai", RemainingTokens: &spent}},
	})
	const interval = time.Second
	cfg := `{"providers": {
	    "ds": {"base_url": "http://` + mockAddr + `/v1", "apis": ["chat"], "quota_api": {"kind": "deepseek", "interval_ms": 1000},
	      "connections": {"main": {"api_key_env": "DS_KEY"}}},
	    "or": {"base_url": "http://` + mockAddr + `/api/v1", "apis": ["chat"], "quota_api": {"kind": "openrouter", "interval_ms": 1000},
	      "connections": {"main": {"api_key_env": "OR_KEY"}}},
	    "hdr": {"base_url": "http://` + mockAddr + `/v1", "apis": ["chat"], "rate_limit_headers": "openai", "auth": "none",
	      "connections": {"main": {}}}},
	  "models": {"polled": {"targets": [{"connection": "ds/main", "model": "m-polled"}]},
	             "routed": {"targets": [{"connection": "or/main", "model": "m-polled"}]},
	             "spent": {"targets": [{"connection": "hdr/main", "model": "m-spent"}]}},
	  "auth": {"mode": "open", "allow_anonymous": true}}`
	cfgPath := testutil.WriteConfig(t, cfg)
	ns := startCluster(t, exe, cfgPath, etcdAddr, nodes, func(int) []string {
		return []string{"DS_KEY=sk-ds-cluster-test", "OR_KEY=sk-or-cluster-test"}
	})
	polls := func() (ds, or int64) {
		s := mock.QuotaAPIState().Requests
		return s.Balance, s.Key
	}
	// owners lists, per polled connection, the nodes whose health says
	// they poll it.
	owners := func(ns []*node) map[string][]int {
		out := map[string][]int{}
		for i, n := range ns {
			for _, c := range n.health(t).Cluster.Quota.Polling {
				out[c] = append(out[c], i)
			}
		}
		return out
	}
	waitFor(t, "each polled connection to have one polling node", func() bool {
		o := owners(ns)
		return len(o) == 2 && len(o["ds/main"]) == 1 && len(o["or/main"]) == 1
	})
	client := &http.Client{Timeout: 30 * time.Second}

	t.Run("one poller per connection", func(t *testing.T) {
		const intervals = 5
		ds0, or0 := polls()
		time.Sleep(intervals * interval)
		ds1, or1 := polls()
		t.Logf("in %d poll intervals of %s: ds/main polled %d times, or/main %d (one poller: about %d; three would be about %d); owners %v",
			intervals, interval, ds1-ds0, or1-or0, intervals, 3*intervals, owners(ns))
		for name, n := range map[string]int64{"ds/main": ds1 - ds0, "or/main": or1 - or0} {
			if n > intervals+1 {
				t.Errorf("%s was polled %d times in %d intervals: more than one node polls it", name, n, intervals)
			}
			if n < intervals-2 {
				t.Errorf("%s was polled only %d times in %d intervals: nobody polls it", name, n, intervals)
			}
		}
		if st := mock.QuotaAPIState().Requests; st.Unauthenticated != 0 {
			t.Errorf("%d usage-API requests came without the connection's key", st.Unauthenticated)
		}
		// Every node's state of the polled connections comes from the
		// poll, including the two that do not poll it.
		for i, n := range ns {
			if q := n.targetQuota(t, "ds/main/m-polled"); q != "healthy" {
				t.Errorf("node %d: ds/main/m-polled is %q, want healthy from the owner's poll", i, q)
			}
		}
	})

	t.Run("header observations reach every node", func(t *testing.T) {
		const target = "hdr/main/m-spent"
		for i, n := range ns {
			if q := n.targetQuota(t, target); q != "unknown" {
				t.Fatalf("node %d: %s is %q before any request, want unknown", i, target, q)
			}
		}
		heard0 := ns[1].health(t).Cluster.Quota.Heard
		a, err := chat(client, ns[0].addr, "", "spent")
		if err != nil || a.status != 200 {
			t.Fatalf("the request on node 0: %+v %v", a, err)
		}
		answered := time.Now()
		// Node 0 learns from the answer's headers (through its targets and
		// quota actors, asynchronously); nodes 1 and 2 from node 0.
		var seen [nodes]time.Duration
		deadline := answered.Add(30 * time.Second)
		for i := 0; i < nodes; i++ {
			for ns[i].targetQuota(t, target) != "exhausted" {
				if time.Now().After(deadline) {
					t.Fatalf("node %d never showed %s exhausted", i, target)
				}
				time.Sleep(5 * time.Millisecond)
			}
			seen[i] = time.Since(answered)
		}
		t.Logf("%s showed exhausted on node 0 %s, on nodes 1 and 2 %s and %s after node 0's answer arrived (upper bounds: they include the reads)",
			target, seen[0].Round(time.Millisecond), seen[1].Round(time.Millisecond), seen[2].Round(time.Millisecond))
		// The issue asks for a second; a busy machine (2 shared cores) can
		// be slower, so the assertion is looser and the figure is logged.
		for i := 1; i < nodes; i++ {
			if seen[i] > 5*time.Second {
				t.Errorf("node %d took %s to see the exhausted state", i, seen[i])
			}
		}
		if h := ns[1].health(t).Cluster.Quota; h.Heard <= heard0 {
			t.Errorf("node 1's health counts no quota message heard (%d before, %d after)", heard0, h.Heard)
		}
		before := mock.Stats().Models["m-spent"].Requests
		for _, n := range ns[1:] {
			if a, err := chat(client, n.addr, "", "spent"); err != nil || a.status == 200 {
				t.Fatalf("a request on a peer was served by the exhausted target: %+v %v", a, err)
			}
		}
		if got := mock.Stats().Models["m-spent"].Requests - before; got != 0 {
			t.Fatalf("the peers sent %d requests to the target node 0 saw exhausted", got)
		}
	})

	t.Run("the polling node killed", func(t *testing.T) {
		o := owners(ns)
		victim := o["ds/main"][0]
		var survivors []*node
		for i, n := range ns {
			if i != victim {
				survivors = append(survivors, n)
			}
		}
		ds0, _ := polls()
		killed := time.Now()
		if err := ns[victim].cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// The survivors' pollers stay silent until they drop the member,
		// then one of them polls at once.
		var took time.Duration
		waitFor(t, "a survivor to poll ds/main", func() bool {
			if ds, _ := polls(); ds > ds0 {
				took = time.Since(killed)
				return true
			}
			return false
		})
		waitFor(t, "the survivors to list one poller of each connection", func() bool {
			o := owners(survivors)
			return len(o["ds/main"]) == 1 && len(o["or/main"]) == 1
		})
		left := time.Since(killed)
		t.Logf("node %d (the poller of ds/main) killed: a survivor polled it %s later; ownership settled on the survivors after %s: %v",
			victim, took.Round(10*time.Millisecond), left.Round(10*time.Millisecond), owners(survivors))
		// docs/cluster.md: etcd lease TTL (3 s) + one ownership check
		// (0.5 s) + the poll's own time; looser for a busy machine.
		if took > 8*time.Second {
			t.Errorf("the survivors took %s to poll the dead node's connection", took)
		}
		// And it is one poller again, not two.
		const intervals = 3
		ds1, _ := polls()
		time.Sleep(intervals * interval)
		ds2, _ := polls()
		t.Logf("after the takeover, ds/main was polled %d times in %d intervals", ds2-ds1, intervals)
		if ds2-ds1 > intervals+1 {
			t.Errorf("after the takeover ds/main was polled %d times in %d intervals: more than one survivor polls it", ds2-ds1, intervals)
		}
		for _, n := range survivors {
			if got := len(n.health(t).Cluster.Members); got != nodes-1 {
				t.Errorf("a survivor lists %d members", got)
			}
		}
		if !slices.ContainsFunc(survivors, func(n *node) bool {
			return slices.Contains(n.health(t).Cluster.Quota.Polling, "ds/main")
		}) {
			t.Errorf("no survivor lists ds/main among the connections it polls: %v", owners(survivors))
		}
	})
}
