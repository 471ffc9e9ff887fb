package clustere2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

const (
	// walkRPM and walkCap are the walkthrough tenants' limits.
	walkRPM        = 30
	walkCap        = 3
	readmeRatedKy  = "sk-readme-rated-0123456789"
	readmeCappedKy = "sk-readme-capped-0123456789"
)

// TestREADMEWalkthrough runs README's "Cluster mode: three nodes on one
// machine" block with bash as a reader would, with two and with three
// nodes. Only what is specific to a machine changes: the node count of the
// loop, free ports instead of 2012$i, a temporary directory instead of
// /tmp, the test's etcd, and the built binary instead of go run; each of
// those must appear in the README exactly as the test expects, so a
// changed walkthrough fails here rather than going untested. Nothing else
// is set: no OMNIROUTE_TENANT_SECRET, so the nodes must agree on tenant
// ids by themselves. In front of the mock provider, a config-file
// tenant's requests_per_minute and another's max_concurrent hold across
// the nodes (each node alone would allow the whole limit).
func TestREADMEWalkthrough(t *testing.T) {
	block, err := testutil.READMEShellBlock("../../README.md", "Cluster mode: three nodes on one machine", "for i in 1 2 3")
	if err != nil {
		t.Fatal(err)
	}
	exe := buildGateway(t)
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { walkthrough(t, block, exe, n) })
	}
}

func walkthrough(t *testing.T, block, exe string, n int) {
	etcdAddr := startEtcd(t)
	mock, mockAddr := startMock(t, map[string]mockprovider.Behavior{
		"m-rated":  {LatencyMS: 5, CompletionTokens: 5},
		"m-capped": {LatencyMS: 300, CompletionTokens: 5},
	})
	dir := t.TempDir()
	sum := func(k string) string { d := sha256.Sum256([]byte(k)); return hex.EncodeToString(d[:]) }
	cfg := `{"providers": {"mock": {"base_url": "http://` + mockAddr + `/v1", "apis": ["chat"], "auth": "none", "connections": {"free": {}}}},
	  "models": {"rated": {"targets": [{"connection": "mock/free", "model": "m-rated"}]},
	             "capped": {"targets": [{"connection": "mock/free", "model": "m-capped"}]}},
	  "tenants": [{"name": "rated", "key_sha256": "` + sum(readmeRatedKy) + `", "requests_per_minute": ` + fmt.Sprint(walkRPM) + `},
	              {"name": "capped", "key_sha256": "` + sum(readmeCappedKy) + `", "max_concurrent": ` + fmt.Sprint(walkCap) + `}]}`
	if err := os.WriteFile(filepath.Join(dir, "omniroute.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	seq := make([]string, n)
	for i := range seq {
		seq[i] = fmt.Sprint(i + 1)
	}
	script := block
	for _, s := range []struct{ old, new string }{
		{"for i in 1 2 3;", "for i in " + strings.Join(seq, " ") + ";"},
		{"OMNIROUTE_LISTEN=127.0.0.1:2012$i", "OMNIROUTE_LISTEN=127.0.0.1:0"},
		{"OMNIROUTE_DATA_DIR=/tmp/omniroute-node$i", "OMNIROUTE_DATA_DIR=" + dir + "/omniroute-node$i"},
		{"OMNIROUTE_CLUSTER_ETCD_ENDPOINTS=127.0.0.1:2379", "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS=" + etcdAddr},
		{"go run ./cmd/omniroute serve", exe + " serve"},
		// The test reads the members itself (jq may not be installed).
		{"curl -s 127.0.0.1:20121/api/monitoring/health | jq .cluster.members\n", ""},
	} {
		if c := strings.Count(script, s.old); c != 1 {
			t.Fatalf("README's walkthrough has %q %d times, want once; update TestREADMEWalkthrough with it:\n%s", s.old, c, block)
		}
		script = strings.Replace(script, s.old, s.new, 1)
	}

	// bash exits once the loop has started the nodes; they stay in its
	// process group, which the cleanup ends. Their output comes through a
	// pipe bash and every node write to.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMNIROUTE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var out strings.Builder
	var mu sync.Mutex
	addrs := make(chan string, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if i := strings.Index(sc.Text(), "omniroute listening on http://"); i >= 0 {
				addrs <- strings.TrimSpace(sc.Text()[i+len("omniroute listening on http://"):])
			}
		}
	}()
	pgid := cmd.Process.Pid
	var ns []*node
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		for _, nd := range ns {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				c, err := net.DialTimeout("tcp", nd.addr, time.Second)
				if err != nil {
					break
				}
				c.Close()
			}
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		r.Close()
	})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the walkthrough's commands failed: %v", err)
	}
	for len(ns) < n {
		select {
		case a := <-addrs:
			ns = append(ns, &node{addr: a})
		case <-time.After(60 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%d of %d nodes started:\n%s", len(ns), n, out.String())
		}
	}
	for i, nd := range ns {
		waitFor(t, fmt.Sprintf("node %d to list %d members", i, n), func() bool { return len(nd.health(t).Cluster.Members) == n })
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 30 * time.Second}
	for _, nd := range ns {
		serveEventually(t, client, nd.addr, readmeRatedKy, "rated")
		serveEventually(t, client, nd.addr, readmeCappedKy, "capped")
	}

	// The rate limit is a rolling minute of the cluster's budget: what the
	// run is served inside one minute is bounded, wherever it starts.
	before := mock.Stats().Models
	rated, capped := offerBoth(t, client, ns, 4*time.Second, sender{readmeRatedKy, "rated", true}, sender{readmeCappedKy, "capped", true})
	after := mock.Stats().Models
	servedRated := after["m-rated"].Completed - before["m-rated"].Completed
	t.Logf("%d nodes: the rated tenant (%d a minute) was served %d, the mock completed %d; the capped tenant (cap %d) was served %d, at most %d in flight at the mock",
		n, walkRPM, rated, servedRated, walkCap, capped, after["m-capped"].MaxInflight)
	// The warm-up's requests fall in the same rolling minute, so what the
	// run was served is at most the budget either way; each node alone
	// would serve the whole budget.
	if servedRated > walkRPM {
		t.Fatalf("the mock served the rated tenant %d requests within a minute across %d nodes; its limit is %d a minute", servedRated, n, walkRPM)
	}
	if servedRated < walkRPM/2 {
		t.Fatalf("the mock served the rated tenant only %d of %d: the nodes did not share its budget", servedRated, walkRPM)
	}
	if servedRated != rated {
		t.Fatalf("the mock completed %d rated requests but %d answers arrived", servedRated, rated)
	}
	if m := after["m-capped"].MaxInflight; m > walkCap || m < 2 {
		t.Fatalf("the mock had at most %d of the capped tenant's requests in flight across %d nodes; the cap is %d (and it must be reached: at least 2)", m, n, walkCap)
	}

	// A node set to another tenant secret than the cluster's would split
	// every tenant: it refuses to start and says how to fix it.
	other := exec.Command(exe, "serve")
	other.Dir = dir
	other.Env = append(append([]string(nil), cmd.Env...), "OMNIROUTE_LISTEN=127.0.0.1:0", "OMNIROUTE_DATA_DIR="+t.TempDir(),
		"OMNIROUTE_CLUSTER=etcd", "OMNIROUTE_CLUSTER_NAME=dev", "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS="+etcdAddr, "OMNIROUTE_CONFIG=./omniroute.json",
		"OMNIROUTE_CLUSTER_SECRET=another-node-with-its-own-secret-0123456789", "OMNIROUTE_TENANT_SECRET=a-tenant-secret-of-its-own-0123")
	if out := mustFailToStart(t, other, "a node with its own OMNIROUTE_TENANT_SECRET"); !strings.Contains(out, "OMNIROUTE_TENANT_SECRET differs from the install secret cluster \"dev\" keeps in etcd") ||
		!strings.Contains(out, "Unset OMNIROUTE_TENANT_SECRET") {
		t.Fatalf("a node with its own OMNIROUTE_TENANT_SECRET refused to start without saying why:\n%s", out)
	}
}
