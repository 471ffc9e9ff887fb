package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

func init() {
	Register(Scenario{
		Name: "cluster", Order: 15, Run: runCluster,
		Description: "Cluster mode's cost on the request path: passthrough through one member of a two-member cluster " +
			"(a loopback etcd, the second member hosting part of the budgets' grains) against a single-node gateway " +
			"with the same configured provider budgets. A closed loop gives CPU per request and the grain calls per " +
			"request (the request path makes none: the pools are spent with atomics); an open loop at 5,000 req/s " +
			"on a connection whose budget is twice that rate gives the lease refills per second a node makes.",
	})
}

// clusterRate is the open loop's rate, and clusterPacedRPM the paced
// connection's budget: twice the rate, so the pools refill as they would
// on a busy account (a chunk is 1/32 of the budget: 32 × 5000 / 600000 =
// 0.27 refills a second of the requests budget).
const (
	clusterRate     = 5000
	clusterPacedRPM = 2 * clusterRate * 60
)

// clusterLimits are both gateways' configured budgets: "default" too large
// to refuse anything (the closed loop's), "paced" twice the open loop.
var clusterLimits = map[string]map[string]int64{
	"default": {"requests_per_minute": 1_000_000_000, "tokens_per_minute": 1_000_000_000_000},
	"paced":   {"requests_per_minute": clusterPacedRPM, "tokens_per_minute": 1_000_000_000_000},
}

func runCluster(ctx context.Context, r *Runner, s *report.Scenario) error {
	etcd, etcdAddr, err := r.startEtcd(ctx, s)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Stop() }()
	models := map[string]ModelSpec{"fast": {Targets: []string{""}}, "paced": {Targets: []string{""}, Connection: "paced"}}
	single := map[string]string{"ADAPTIVE_ADMISSION_MODE": "off"}
	member := map[string]string{"ADAPTIVE_ADMISSION_MODE": "off", "OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_NAME": "bench",
		"OMNIROUTE_CLUSTER_ETCD_ENDPOINTS": etcdAddr, "OMNIROUTE_CLUSTER_LISTEN": "127.0.0.1:0", "OMNIROUTE_CLUSTER_SECRET": "omniroute-bench-cluster-secret-0123456789abcdef"}
	const gS, gC, gPeer = "G single", "G cluster", "G cluster peer"
	env, err := r.StartEnv(ctx, s, EnvSpec{
		Mock: map[string]mockprovider.Behavior{"fast": {}},
		Gateways: []GatewaySpec{
			{Label: gS, Env: single, Models: models, Limits: clusterLimits},
			{Label: gC, Env: member, Models: models, Limits: clusterLimits},
			{Label: gPeer, Env: member, Models: models, Limits: clusterLimits},
		},
	})
	if err != nil {
		return err
	}
	defer env.Stop()
	peer := env.Target(gPeer)
	env.Targets = env.Targets[:2] // the peer takes no load: it hosts grains
	if err := waitMembers(ctx, env.Target(gC).Addr, 2); err != nil {
		return err
	}
	if err := waitMembers(ctx, peer.Addr, 2); err != nil {
		return err
	}

	closed := report.Load{ID: "closed", Label: fmt.Sprintf("closed loop c=%d", r.cfg.Concurrency)}
	open := report.Load{ID: "open-5000", Label: fmt.Sprintf("open loop %d req/s, paced budget", clusterRate)}
	s.Loads = append(s.Loads, closed, open)
	s.Targets = append(s.Targets, gS, gC)
	type credit struct{ calls, refills, answered float64 }
	perCell := map[string][]credit{} // load → per round, the cluster member's
	for round := 1; round <= r.cfg.Rounds; round++ {
		for _, l := range []struct {
			load  report.Load
			model string
			shape loadgen.Load
		}{
			{closed, "fast", loadgen.Load{Concurrency: r.cfg.Concurrency}},
			{open, "paced", loadgen.Load{Rate: clusterRate, Workers: 1024, Duration: 3 * r.cfg.Duration}},
		} {
			for _, t := range Rotate(env.Targets, round-1) {
				var before clusterCredit
				if t.Label == gC {
					if before, err = readClusterCredit(t.Addr); err != nil {
						return err
					}
				}
				cell, err := r.Measure(ctx, env, s, t, CellSpec{Load: l.load, Round: round, Spec: chatSpec(l.model, false, "cluster", r), Shape: l.shape, Warmup: true})
				if err != nil {
					return err
				}
				if t.Label == gC {
					after, err := readClusterCredit(t.Addr)
					if err != nil {
						return err
					}
					// The warm-up ran between the two reads: its requests
					// count too, so the per-request figure is an upper bound.
					perCell[l.load.ID] = append(perCell[l.load.ID], credit{
						calls: float64(after.Calls - before.Calls), refills: float64(after.refills() - before.refills()),
						answered: float64(cell.Summary.Answered)})
				}
			}
		}
	}

	n := r.cfg.Rounds
	vals, sk := PerRound(n, ratio(s, closed.ID, gC, gS, cpuPerReq("proxy")))
	s.Checks = append(s.Checks, NewCheck("cpu-per-request", s.Name, "cluster", "CPU per request, cluster member ÷ single node (closed loop)",
		AtMost(1.1), "×", vals, skippedNote(sk, "no CPU figure")))
	var calls, refills []float64
	for _, c := range perCell[closed.ID] {
		if c.answered > 0 {
			calls = append(calls, c.calls/c.answered)
		}
	}
	s.Checks = append(s.Checks, NewCheck("grain-calls-per-request", s.Name, "cluster",
		"Grain calls per request on the cluster member (closed loop, warm-up included)", AtMost(0.001), "calls", calls, ""))
	secs := (3*r.cfg.Duration + r.cfg.Warmup).Seconds()
	for _, c := range perCell[open.ID] {
		refills = append(refills, c.refills/secs)
	}
	s.Figures = append(s.Figures, figure(fmt.Sprintf("Lease refills per second on one member at %d req/s (budget %d requests/min)", clusterRate, clusterPacedRPM), "/s", refills))
	var callRate []float64
	for _, c := range perCell[open.ID] {
		callRate = append(callRate, c.calls/secs)
	}
	s.Figures = append(s.Figures, figure(fmt.Sprintf("Grain calls per second on one member at %d req/s (refills, renewals, returns)", clusterRate), "/s", callRate))
	cpuOpen, _ := PerRound(n, ratio(s, open.ID, gC, gS, cpuPerReq("proxy")))
	s.Figures = append(s.Figures, figure(fmt.Sprintf("CPU per request at %d req/s, cluster member ÷ single node", clusterRate), "×", cpuOpen))
	capVals, _ := PerRound(n, ratio(s, closed.ID, gC, gS, throughput))
	s.Figures = append(s.Figures, figure("Throughput, cluster member ÷ single node (closed loop)", "×", capVals))
	for _, g := range []string{gS, gC} {
		v, _ := PerRound(n, func(round int) (float64, bool) { return cellValue(s, open.ID, g, round, p99) })
		s.Figures = append(s.Figures, figure("p99 latency at 5,000 req/s, "+g, "ms", v))
	}
	return env.Stop()
}

// startEtcd runs cmd/omniroute-etcd on two free loopback ports with its
// data in the run's work directory and returns it with its client address.
func (r *Runner) startEtcd(ctx context.Context, s *report.Scenario) (*procs.Process, string, error) {
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	dir, err := os.MkdirTemp(r.work, "etcd-")
	if err != nil {
		return nil, "", err
	}
	client := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := procs.Start(ctx, procs.Spec{
		Name: "etcd", Exe: r.bins.Etcd, Args: []string{"--data-dir", dir, "--client", client, "--peer", fmt.Sprintf("127.0.0.1:%d", ports[1])},
		Ready: "omniroute-etcd serving on ", Log: filepath.Join(r.cfg.Out, "logs", s.Name+"-etcd.log"), StartTimeout: time.Minute,
	})
	if err != nil {
		return nil, "", fmt.Errorf("start etcd for the cluster scenario: %w", err)
	}
	return p, client, nil
}

// clusterCredit is the cluster section's credit figures of a member's
// health.
type clusterCredit struct {
	Calls int64 `json:"grainCalls"`
	Pools []struct {
		ID      string `json:"id"`
		Refills int64  `json:"refills"`
	} `json:"pools"`
	members int
}

func (c clusterCredit) refills() int64 {
	var n int64
	for _, p := range c.Pools {
		n += p.Refills
	}
	return n
}

func readClusterCredit(addr string) (clusterCredit, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/api/monitoring/health")
	if err != nil {
		return clusterCredit{}, fmt.Errorf("read the health of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	var h struct {
		Cluster *struct {
			Members []json.RawMessage `json:"members"`
			Credit  clusterCredit     `json:"credit"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return clusterCredit{}, fmt.Errorf("decode the health of %s: %w", addr, err)
	}
	if h.Cluster == nil {
		return clusterCredit{}, fmt.Errorf("the health of %s has no cluster section: is it in cluster mode?", addr)
	}
	h.Cluster.Credit.members = len(h.Cluster.Members)
	return h.Cluster.Credit, nil
}

// waitMembers waits until the member at addr lists n members.
func waitMembers(ctx context.Context, addr string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := readClusterCredit(addr)
		if err == nil && c.members == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster member at %s did not list %d members within 30 s (last: %d, %v)", addr, n, c.members, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}
