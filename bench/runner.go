package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/bench/procstat"
	"github.com/omniroute/gateway/bench/refproxy"
	"github.com/omniroute/gateway/bench/report"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// Target labels.
const (
	TargetD = "D" // the mock provider, directly
	TargetR = "R" // the reference proxy in front of the mock
)

// GatewayLabel is the target label of a gateway variant.
func GatewayLabel(variant string) string { return "G " + variant }

// Runner is what a scenario gets: the run's settings, the binaries, and
// helpers to start components and measure cells.
type Runner struct {
	cfg  Config
	bins procs.Binaries
	// work is a temporary directory for the gateways' data directories,
	// removed when the run ends.
	work string
	// capacity is each variant's closed-loop passthrough throughput
	// (median over rounds), measured by passthrough and used by overload.
	capacity map[string]float64
}

// Config returns the run's settings.
func (r *Runner) Config() Config { return r.cfg }

// Binaries returns the binaries built for this run.
func (r *Runner) Binaries() procs.Binaries { return r.bins }

// OutDir is the output directory.
func (r *Runner) OutDir() string { return r.cfg.Out }

func (r *Runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// ModelSpec is one gateway model: its upstream model names in order (""
// keeps the caller's name) and its strategy.
type ModelSpec struct {
	Strategy string
	Targets  []string
	// Connection is the mock's connection the targets use ("" is
	// "default").
	Connection string
	// Fusion configures a "fusion" model (nil: the gateway's defaults).
	Fusion *FusionSpec
}

// FusionSpec is a fusion model's "fusion" object.
type FusionSpec struct {
	Quorum int    `json:"quorum,omitempty"`
	Judge  string `json:"judge,omitempty"`
}

// GatewaySpec is one gateway process of an environment.
type GatewaySpec struct {
	Label   string
	Variant string
	// Env is added after the variant's environment.
	Env    map[string]string
	Models map[string]ModelSpec
	// Limits are the configured limits of the mock's connections by name
	// (requests_per_minute, tokens_per_minute); a connection named here
	// exists besides "default".
	Limits map[string]map[string]int64
}

// EnvSpec describes the processes of a scenario.
type EnvSpec struct {
	// Mock is the behaviour per upstream model.
	Mock map[string]mockprovider.Behavior
	// Direct and Reference add the D and R targets.
	Direct, Reference bool
	Gateways          []GatewaySpec
}

// Target is one thing the load is sent to.
type Target struct {
	Label  string
	Addr   string
	Proc   *procs.Process // nil for D (its process is the mock)
	Client *loadgen.Client
	pprof  string
}

// Env is a running set of processes: the mock, and the targets in front of
// it. Stop ends them all.
type Env struct {
	Mock      *procs.Process
	MockAdmin *mockprovider.Client
	Targets   []*Target
	procs     []*procs.Process
	clients   []*loadgen.Client
}

// Target returns the target with the label.
func (e *Env) Target(label string) *Target {
	for _, t := range e.Targets {
		if t.Label == label {
			return t
		}
	}
	return nil
}

// Stop stops every process; it reports the first that exited uncleanly.
func (e *Env) Stop() error {
	for _, c := range e.clients {
		c.Close()
	}
	var first error
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// StartEnv starts the mock, then the reference proxy and each gateway in
// front of it, waits Settle, and records every process's idle memory into
// s.Idle. Logs go to <out>/logs/<scenario>-<process>.log.
func (r *Runner) StartEnv(ctx context.Context, s *report.Scenario, spec EnvSpec) (*Env, error) {
	e := &Env{}
	logPath := func(name string) string {
		return filepath.Join(r.cfg.Out, "logs", s.Name+"-"+strings.ReplaceAll(name, " ", "_")+".log")
	}
	fail := func(err error) (*Env, error) {
		_ = e.Stop()
		return nil, err
	}
	mock, err := procs.Start(ctx, procs.Spec{
		Name: "mock", Exe: r.bins.Gateway, Args: []string{"mockprovider", "--listen", "127.0.0.1:0", "--quiet"},
		Ready: mockprovider.ReadyPrefix, Log: logPath("mock"),
	})
	if err != nil {
		return fail(err)
	}
	e.Mock = mock
	e.procs = append(e.procs, mock)
	e.MockAdmin = &mockprovider.Client{BaseURL: "http://" + mock.Addr}
	if err := e.MockAdmin.SetBehavior(mockprovider.BehaviorUpdate{Models: spec.Mock, Replace: true}); err != nil {
		return fail(fmt.Errorf("configure the mock: %w", err))
	}
	if spec.Direct {
		e.Targets = append(e.Targets, &Target{Label: TargetD, Addr: mock.Addr})
	}
	if spec.Reference {
		p, err := procs.Start(ctx, procs.Spec{
			Name: "refproxy", Exe: r.bins.Bench, Args: []string{"refproxy", "--listen", "127.0.0.1:0", "--upstream", mock.Addr},
			Ready: refproxy.ReadyPrefix, Log: logPath("refproxy"),
		})
		if err != nil {
			return fail(err)
		}
		e.procs = append(e.procs, p)
		e.Targets = append(e.Targets, &Target{Label: TargetR, Addr: p.Addr, Proc: p})
	}
	for _, g := range spec.Gateways {
		if _, err := r.startGateway(ctx, e, s, g); err != nil {
			return fail(err)
		}
	}
	if err := sleep(ctx, r.cfg.Settle); err != nil {
		return fail(err)
	}
	for _, p := range e.procs {
		m, err := procstat.ReadMemory(p.Pid)
		if err != nil {
			return fail(err)
		}
		s.Idle = append(s.Idle, report.Proc{Role: "idle", Name: p.Name, Pid: p.Pid, PeakRSS: m.RSS, MeanRSS: m.RSS, HWM: m.HWM})
	}
	return e, nil
}

// AddGateway starts one more gateway in front of e's mock (for a scenario
// whose gateway settings depend on a measurement), waits Settle and records
// its idle memory.
func (r *Runner) AddGateway(ctx context.Context, e *Env, s *report.Scenario, g GatewaySpec) (*Target, error) {
	t, err := r.startGateway(ctx, e, s, g)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, r.cfg.Settle); err != nil {
		return nil, err
	}
	m, err := procstat.ReadMemory(t.Proc.Pid)
	if err != nil {
		return nil, err
	}
	s.Idle = append(s.Idle, report.Proc{Role: "idle", Name: t.Proc.Name, Pid: t.Proc.Pid, PeakRSS: m.RSS, MeanRSS: m.RSS, HWM: m.HWM})
	return t, nil
}

// startGateway starts gateway g in front of e's mock and adds it to e.
func (r *Runner) startGateway(ctx context.Context, e *Env, s *report.Scenario, g GatewaySpec) (*Target, error) {
	logPath := func(name string) string {
		return filepath.Join(r.cfg.Out, "logs", s.Name+"-"+strings.ReplaceAll(name, " ", "_")+".log")
	}
	cfgPath := filepath.Join(r.cfg.Out, "logs", s.Name+"-"+strings.ReplaceAll(g.Label, " ", "_")+".json")
	if err := os.WriteFile(cfgPath, gatewayConfig(e.Mock.Addr, g.Models, g.Limits), 0o644); err != nil {
		return nil, fmt.Errorf("write gateway config: %w", err)
	}
	dataDir, err := os.MkdirTemp(r.work, "data-")
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"OMNIROUTE_LISTEN":        "127.0.0.1:0",
		"OMNIROUTE_CONFIG":        cfgPath,
		"OMNIROUTE_DATA_DIR":      dataDir,
		"OMNIROUTE_TENANT_SECRET": "omniroute-bench-tenant-secret-0123456789",
		"OMNIROUTE_LOG_LEVEL":     "warn",
	}
	for _, v := range r.cfg.Variants {
		if v.Name == g.Variant {
			for k, val := range v.Env {
				env[k] = val
			}
		}
	}
	for k, val := range g.Env {
		env[k] = val
	}
	if r.cfg.CPUProfile {
		env["OMNIROUTE_BENCH_PPROF_LISTEN"] = "127.0.0.1:0"
	}
	p, err := procs.Start(ctx, procs.Spec{
		Name: g.Label, Exe: r.bins.Gateway, Env: envList(env),
		Ready: "omniroute listening on http://", Log: logPath(g.Label),
	})
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	t := &Target{Label: g.Label, Addr: p.Addr, Proc: p, pprof: p.Extra["benchpprof"]}
	e.Targets = append(e.Targets, t)
	return t, nil
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// gatewayConfig is the gateway's JSON file: one provider for the mock (no
// auth) with the connection "default" and those limits names, the given
// models, loopback auth with anonymous callers allowed.
func gatewayConfig(mockAddr string, models map[string]ModelSpec, limits map[string]map[string]int64) []byte {
	type target struct {
		Connection string `json:"connection"`
		Model      string `json:"model,omitempty"`
	}
	type model struct {
		Strategy string      `json:"strategy,omitempty"`
		Targets  []target    `json:"targets"`
		Fusion   *FusionSpec `json:"fusion,omitempty"`
	}
	ms := map[string]model{}
	for name, m := range models {
		var ts []target
		conn := m.Connection
		if conn == "" {
			conn = "default"
		}
		for _, t := range m.Targets {
			ts = append(ts, target{Connection: "mock/" + conn, Model: t})
		}
		ms[name] = model{Strategy: m.Strategy, Targets: ts, Fusion: m.Fusion}
	}
	conns := map[string]any{"default": map[string]any{}}
	for name, l := range limits {
		conns[name] = map[string]any{"limits": l}
	}
	cfg := map[string]any{
		"providers": map[string]any{
			"mock": map[string]any{
				"base_url": "http://" + mockAddr + "/v1", "apis": []string{"chat", "messages", "responses"},
				"auth": "none", "connections": conns,
			},
		},
		"models": ms,
		"auth":   map[string]any{"mode": "loopback", "allow_anonymous": true},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return b
}

// client returns (and keeps for Stop) a load client for t sized for conns.
func (e *Env) client(t *Target, conns int) *loadgen.Client {
	if t.Client == nil {
		t.Client = loadgen.NewClient(t.Addr, max(conns, 8192))
		e.clients = append(e.clients, t.Client)
	}
	return t.Client
}

// CellSpec is one measurement.
type CellSpec struct {
	Load   report.Load
	Round  int
	Spec   *loadgen.Spec
	Shape  loadgen.Load // Duration and Seed are filled in when zero
	Warmup bool
	// Profile saves a CPU profile of the target (benchpprof builds only)
	// to this file under the output directory.
	Profile string
	// CountUpstream names upstream models whose requests at the mock are
	// counted over the measured phase (into Cell.Upstream).
	CountUpstream []string
}

// Seed derives a reproducible seed for (scenario, load, round): the same
// for every target of a round, so they see the same arrival sequence.
func (r *Runner) Seed(scenario, load string, round int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%d/%d", scenario, load, round, r.cfg.Seed)
	return h.Sum64()
}

// Measure runs one cell against t: an optional warm-up with the same load
// (discarded), then the measured phase, charging each process the CPU
// time it used from the start of the phase until its last request ended
// and sampling memory every 100 ms.
func (r *Runner) Measure(ctx context.Context, e *Env, s *report.Scenario, t *Target, cs CellSpec) (*report.Cell, error) {
	shape := cs.Shape
	if shape.Duration == 0 {
		shape.Duration = r.cfg.Duration
	}
	if shape.Rate > 0 && r.cfg.MaxRate > 0 {
		shape.Rate = min(shape.Rate, r.cfg.MaxRate)
	}
	if shape.Seed == 0 {
		shape.Seed = r.Seed(s.Name, cs.Load.ID, cs.Round)
	}
	c := e.client(t, max(shape.Concurrency, shape.Workers))
	if cs.Warmup && r.cfg.Warmup > 0 {
		w := shape
		w.Duration = r.cfg.Warmup
		w.Seed = shape.Seed ^ 0x5bd1e995
		if _, err := loadgen.Run(ctx, c, cs.Spec, w); err != nil {
			return nil, err
		}
	}
	runtime.GC()

	type watched struct {
		role string
		p    *procs.Process
	}
	var ws []watched
	if t.Proc != nil {
		ws = append(ws, watched{"proxy", t.Proc})
	}
	ws = append(ws, watched{"mock", e.Mock})
	pids := make([]int, len(ws))
	before := make([]time.Duration, len(ws))
	for i, w := range ws {
		pids[i] = w.p.Pid
		cpu, err := procstat.CPU(w.p.Pid)
		if err != nil {
			return nil, err
		}
		before[i] = cpu
	}
	var prof chan error
	if cs.Profile != "" && t.pprof != "" {
		prof = make(chan error, 1)
		go func() { prof <- fetchProfile(ctx, t.pprof, shape.Duration, filepath.Join(r.cfg.Out, cs.Profile)) }()
	}
	var upstreamBefore mockprovider.Stats
	if len(cs.CountUpstream) > 0 {
		var err error
		if upstreamBefore, err = e.MockAdmin.Stats(); err != nil {
			return nil, fmt.Errorf("read mock stats: %w", err)
		}
	}
	selfBefore := procstat.SelfCPU()
	machineBefore, _ := procstat.ReadMachine()
	sampler := procstat.StartSampler(pids, 100*time.Millisecond)
	res, err := loadgen.Run(ctx, c, cs.Spec, shape)
	peak, mean := sampler.Stop()
	selfCPU := procstat.SelfCPU() - selfBefore
	machineAfter, _ := procstat.ReadMachine()
	if err != nil {
		return nil, err
	}
	sum := loadgen.Summarize(res, cs.Spec.Stream)
	cell := &report.Cell{Load: cs.Load.ID, Target: t.Label, Round: cs.Round, Summary: sum, MachineBusy: machineAfter.BusyShare(machineBefore)}
	if len(cs.CountUpstream) > 0 {
		after, err := e.MockAdmin.Stats()
		if err != nil {
			return nil, fmt.Errorf("read mock stats: %w", err)
		}
		cell.Upstream = map[string]int64{}
		for _, m := range cs.CountUpstream {
			cell.Upstream[m] = after.Models[m].Requests - upstreamBefore.Models[m].Requests
		}
	}
	perReq := func(d time.Duration, n int64) float64 {
		if n <= 0 {
			return 0
		}
		return float64(d.Microseconds()) / float64(n)
	}
	for i, w := range ws {
		cpu, err := procstat.CPU(w.p.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s is gone after a %s cell: %w", w.p.Name, cs.Load.Label, err)
		}
		mem, _ := procstat.ReadMemory(w.p.Pid)
		d := cpu - before[i]
		cell.Procs = append(cell.Procs, report.Proc{
			Role: w.role, Name: w.p.Name, Pid: w.p.Pid, CPUSeconds: d.Seconds(),
			CPUPerRequestUS: perReq(d, int64(sum.Answered)), CPUPerEventUS: perReq(d, sum.Events),
			PeakRSS: peak[i], MeanRSS: mean[i], HWM: mem.HWM,
		})
	}
	cell.Procs = append(cell.Procs, report.Proc{
		Role: "generator", Name: "omniroute-bench", Pid: os.Getpid(), CPUSeconds: selfCPU.Seconds(),
		CPUPerRequestUS: perReq(selfCPU, int64(sum.Answered)), CPUPerEventUS: perReq(selfCPU, sum.Events),
	})
	if prof != nil {
		if err := <-prof; err != nil {
			r.logf("cpu profile of %s: %v", t.Label, err)
		} else {
			s.Files = append(s.Files, cs.Profile)
			if top, err := pprofTop(ctx, r.bins.Gateway, filepath.Join(r.cfg.Out, cs.Profile)); err == nil {
				_ = os.WriteFile(filepath.Join(r.cfg.Out, cs.Profile+".top.txt"), top, 0o644)
				s.Files = append(s.Files, cs.Profile+".top.txt")
			}
		}
	}
	s.Cells = append(s.Cells, cell)
	r.logf("  %-18s %-22s round %d: %8.0f req/s ok=%d/%d p50 %.3f ms p99 %.3f ms%s", t.Label, cs.Load.Label, cs.Round,
		sum.Throughput, sum.OK, sum.Arrivals, sum.Latency.P50, sum.Latency.P99, failureNote(&sum))
	return cell, nil
}

func failureNote(s *loadgen.Summary) string {
	if s.OK == s.Arrivals {
		return ""
	}
	var parts []string
	for k, v := range s.Statuses {
		if k != "200" {
			parts = append(parts, fmt.Sprintf("%s×%d", k, v))
		}
	}
	for k, v := range map[string]int{"timeout": s.Timeouts, "conn": s.ConnErrors, "inband": s.InBandErrors, "trunc": s.Truncated, "notsent": s.NotSent} {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", k, v))
		}
	}
	sort.Strings(parts)
	return " [" + strings.Join(parts, " ") + "]"
}

// MeasureRound measures cs (its Round set to round) once on every target
// of e, in the round's rotated order: one round of a scenario's
// interleaving, so no target always goes first.
func (r *Runner) MeasureRound(ctx context.Context, e *Env, s *report.Scenario, round int, cs CellSpec) error {
	cs.Round = round
	for _, t := range Rotate(e.Targets, round-1) {
		if _, err := r.Measure(ctx, e, s, t, cs); err != nil {
			return err
		}
	}
	return nil
}

// Rotate returns ts rotated by round, so no target always goes first.
func Rotate[T any](ts []T, round int) []T {
	if len(ts) == 0 {
		return ts
	}
	k := round % len(ts)
	return append(append([]T(nil), ts[k:]...), ts[:k]...)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
