package clustere2e

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/actors/credit"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/mocktest"
	"github.com/omniroute/gateway/internal/testutil/ratecheck"
)

const windowedKy = "sk-windowed-tenant-0123456789"

// TestThreeNodesHoldAConnectionLimitInAnyMinute: three nodes share a
// connection limited to 60 requests a minute, offered 3 a second in turn
// for two and a half minutes across minute boundaries: the provider (the
// mock's own arrival times) never sees more than 60 in any minute, sees
// at least 90 % of what a steady 60 a minute allows, and every refusal's
// Retry-After is truthful. Then a tenant limited to 30 requests a minute
// across the cluster: the rate-limit headers every node sends show the
// cluster's window, not the node's own, and the refusal names it.
func TestThreeNodesHoldAConnectionLimitInAnyMinute(t *testing.T) {
	etcdAddr := startEtcd(t)
	exe := buildGateway(t)
	mock, mockAddr := mocktest.Start(t, mockprovider.Options{RequestLog: mockprovider.RequestLogOptions{Max: 100_000}}, map[string]mockprovider.Behavior{
		"m-roll": {LatencyMS: 5, CompletionTokens: 3}, "m-open": {LatencyMS: 5, CompletionTokens: 3}})
	cfg := `{"providers": {"mock": {"base_url": "http://` + mockAddr + `/v1", "apis": ["chat"], "auth": "none",
	    "connections": {"limited": {"limits": {"requests_per_minute": 60}}, "free": {}}}},
	  "models": {"roll": {"targets": [{"connection": "mock/limited", "model": "m-roll"}]},
	             "open": {"targets": [{"connection": "mock/free", "model": "m-open"}]}},
	  "tenants": [{"name": "windowed", "key_env": "WINDOWED_KEY", "requests_per_minute": 30}],
	  "auth": {"mode": "open", "allow_anonymous": true}}`
	ns := startCluster(t, exe, testutil.WriteConfig(t, cfg), etcdAddr, nodes, func(int) []string {
		return []string{"OMNIROUTE_ROUTING_MAX_WAIT_MS=0", "WINDOWED_KEY=" + windowedKy}
	})
	addrs := make([]string, len(ns))
	for i, n := range ns {
		addrs[i] = n.addr
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	post := func(addr, key, model string) (int, http.Header, error) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header, nil
	}

	t.Run("a connection limit at the provider", func(t *testing.T) {
		const d = 150 * time.Second
		run := ratecheck.Offer(3, d, addrs, func(addr string) (int, http.Header, error) { return post(addr, "", "roll") })
		var arr []time.Time
		for _, r := range mock.Requests().Records {
			if r.Model == "m-roll" {
				arr = append(arr, r.Arrived)
			}
		}
		sort.Slice(arr, func(i, j int) bool { return arr[i].Before(arr[j]) })
		// The grain counts each grant CreditTTL longer than a node's
		// window, and credit granted before a refusal may be spent until
		// CreditTTL after it was asked for (plus the trip to the
		// provider).
		ratecheck.Check(t, run, arr, ratecheck.Limit{Requests: 60, Duration: d, Slack: 3500*time.Millisecond + credit.CreditTTL,
			Grace: credit.CreditTTL + 250*time.Millisecond})
		for i, n := range ns {
			var h struct {
				Cluster struct {
					Credit struct {
						Calls    int64 `json:"grainCalls"`
						Failures int64 `json:"grainCallFailures"`
					} `json:"credit"`
				} `json:"cluster"`
			}
			getJSON(t, "http://"+n.addr+"/api/monitoring/health", &h)
			t.Logf("node %d: %d grain calls, %d failed or unavailable", i, h.Cluster.Credit.Calls, h.Cluster.Credit.Failures)
		}
	})

	t.Run("a tenant's headers show the cluster's window", func(t *testing.T) {
		const limit = 30
		worstLocal := 0
		for k := 1; k <= limit; k++ {
			i := (k - 1) % len(ns)
			status, h, err := post(ns[i].addr, windowedKy, "open")
			if err != nil || status != 200 {
				// Credit on its way: at most a refill later.
				time.Sleep(200 * time.Millisecond)
				if status, h, err = post(ns[i].addr, windowedKy, "open"); err != nil || status != 200 {
					t.Fatalf("request %d on node %d: %d %v", k, i, status, err)
				}
			}
			rem, err := strconv.Atoi(h.Get("x-ratelimit-remaining-requests"))
			if err != nil || h.Get("x-ratelimit-limit-requests") != fmt.Sprint(limit) {
				t.Fatalf("request %d on node %d: headers %v", k, i, h)
			}
			// The node's own window would say limit - its own requests
			// (k/nodes); the cluster's says about limit - k, give or take
			// what the nodes hold and the two requests the others made
			// since this node's grain last answered.
			own := limit - (k+len(ns)-1)/len(ns)
			if bound := limit - k + 2*len(ns); rem > bound {
				t.Fatalf("request %d of %d on node %d: x-ratelimit-remaining-requests %d, want at most %d (the node's own window would say %d)", k, limit, i, rem, bound, own)
			}
			worstLocal = max(worstLocal, rem-(limit-k))
		}
		t.Logf("the headers' remaining was at most %d above the cluster's exact count", worstLocal)
		// Every node refuses the next one now, naming the minute window,
		// with the wait until the first of them leaves it.
		for i, n := range ns {
			var status int
			var h http.Header
			var err error
			for try := 0; try < 20; try++ {
				if status, h, err = post(n.addr, windowedKy, "open"); err != nil {
					t.Fatal(err)
				}
				if status == 429 && h.Get("Retry-After") != "1" { // not a refill on its way
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			ra, _ := strconv.Atoi(h.Get("Retry-After"))
			if status != 429 || ra < 50 || ra > 66 || h.Get("x-ratelimit-remaining-requests") != "0" {
				t.Fatalf("node %d after the cluster's %d: %d, Retry-After %q, remaining %q", i, limit, status, h.Get("Retry-After"), h.Get("x-ratelimit-remaining-requests"))
			}
		}
	})
}
