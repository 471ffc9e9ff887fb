package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/bench/report"
)

// Config is one benchmark run. DefaultConfig gives the full run (about
// 6–7 minutes on 2 cores); every field has a flag in cmd/omniroute-bench.
type Config struct {
	// Scenarios to run by name; empty runs every default scenario.
	Scenarios []string `json:"scenarios,omitempty"`
	// Out is the output directory (created).
	Out string `json:"out"`
	// Rounds interleaves the targets this many times (≥ 3 for a valid run).
	Rounds int `json:"rounds"`
	// Warmup precedes every measured cell with the same load (discarded).
	Warmup time.Duration `json:"warmup_ns"`
	// Duration is each measured cell's sending window.
	Duration time.Duration `json:"duration_ns"`
	// Settle is the wait after start-up before idle memory is read.
	Settle time.Duration `json:"settle_ns"`
	// Seed makes open-loop arrivals reproducible.
	Seed uint64 `json:"seed"`
	// Timeout bounds one non-streaming request; StreamTimeout one stream.
	Timeout       time.Duration `json:"timeout_ns"`
	StreamTimeout time.Duration `json:"stream_timeout_ns"`
	// NoiseLimit is the largest allowed round-to-round spread (max/min-1) of
	// the reference proxy's closed-loop throughput.
	NoiseLimit float64 `json:"noise_limit"`
	// AllowNoisy reports a noisy run without failing the command.
	AllowNoisy bool `json:"allow_noisy"`

	// Passthrough: closed-loop concurrency and open-loop rates.
	Concurrency int       `json:"concurrency"`
	Rates       []float64 `json:"rates"`
	// Streaming: concurrent streams and the mock's pacing.
	Streams         int `json:"streams"`
	StreamLatencyMS int `json:"stream_latency_ms"`
	StreamChunks    int `json:"stream_chunks"`
	StreamGapMS     int `json:"stream_gap_ms"`
	// Overload: offered rate as a multiple of the measured capacity, the
	// mock's service time behind its fixed slots, and the open loop's
	// in-flight bound.
	OverloadFactor    float64 `json:"overload_factor"`
	OverloadLatencyMS int     `json:"overload_latency_ms"`
	OverloadWorkers   int     `json:"overload_workers"`
	// OverloadCapacity replaces the measured capacity (req/s) the overload
	// rates and the mock's slots are derived from (0: measured).
	OverloadCapacity float64 `json:"overload_capacity,omitempty"`
	// FanoutConcurrency is the closed-loop concurrency of the fan-out cells.
	FanoutConcurrency int `json:"fanout_concurrency"`
	// MaxRate caps every open-loop rate (0: no cap); the smoke test uses it
	// to keep the overload cell tiny.
	MaxRate float64 `json:"max_rate,omitempty"`
	// LanesFull runs bench/lanes' full-length scenarios (noisy-neighbour,
	// interactive-batch, fanout-lanes: about 75 s together); false runs
	// their few-second smoke variants. LanesScale multiplies their offered
	// rates and the mock's slots (1 when 0).
	LanesFull  bool    `json:"lanes_full"`
	LanesScale float64 `json:"lanes_scale,omitempty"`
	// LargeBody: concurrent uploads, body size in MiB and the gateway's
	// GOMEMLIMIT of the largebody scenario.
	LargeBodyUploads  int    `json:"largebody_uploads"`
	LargeBodyMiB      int    `json:"largebody_mib"`
	LargeBodyMemLimit string `json:"largebody_memlimit"`

	// CPUProfile builds the gateway with the benchpprof tag and saves a CPU
	// profile of each variant during the first closed-loop passthrough cell.
	CPUProfile bool `json:"cpu_profile"`
	// Variants are the gateway configurations (default: Variants).
	Variants []Variant `json:"-"`
	// Binaries, when set, skips the build (tests build once).
	Binaries *procs.Binaries `json:"-"`
	// NoTrimpath builds without -trimpath.
	NoTrimpath bool `json:"-"`
	// Log receives progress lines (nil: discarded).
	Log io.Writer `json:"-"`
	// Command is recorded in the report.
	Command string `json:"-"`
}

// DefaultConfig is the full benchmark.
func DefaultConfig() Config {
	return Config{
		Out:    filepath.Join("bench-results", time.Now().UTC().Format("20060102-150405")),
		Rounds: 3, Warmup: 500 * time.Millisecond, Duration: 4 * time.Second, Settle: time.Second,
		Seed: 1, Timeout: 5 * time.Second, StreamTimeout: 30 * time.Second, NoiseLimit: 0.25,
		Concurrency: 64, Rates: []float64{200, 1000},
		Streams: 64, StreamLatencyMS: 20, StreamChunks: 20, StreamGapMS: 5,
		OverloadFactor: 2, OverloadLatencyMS: 10, OverloadWorkers: 4096,
		FanoutConcurrency: 16, LanesFull: true, LanesScale: 1,
		LargeBodyUploads: 200, LargeBodyMiB: 10, LargeBodyMemLimit: "512MiB",
	}
}

func (c *Config) validate() error {
	var errs []string
	if c.Out == "" {
		errs = append(errs, "--out must not be empty")
	}
	if c.Rounds < 1 {
		errs = append(errs, fmt.Sprintf("--rounds %d: want at least 1 (3 or more for a valid run)", c.Rounds))
	}
	if c.Duration <= 0 || c.Warmup < 0 || c.Settle < 0 {
		errs = append(errs, "--duration must be positive; --warmup and --settle must not be negative")
	}
	if c.Timeout <= 0 || c.StreamTimeout <= 0 {
		errs = append(errs, "--timeout and --stream-timeout must be positive")
	}
	if c.Concurrency < 1 || c.Streams < 1 || c.FanoutConcurrency < 1 || c.OverloadWorkers < 1 {
		errs = append(errs, "--concurrency, --streams, --fanout-concurrency and --overload-workers must be at least 1")
	}
	for _, r := range c.Rates {
		if r <= 0 {
			errs = append(errs, fmt.Sprintf("--rates: %g is not a positive rate", r))
		}
	}
	if c.OverloadFactor <= 1 || c.OverloadLatencyMS < 1 {
		errs = append(errs, "--overload-factor must be above 1 and --overload-latency-ms at least 1")
	}
	if c.OverloadCapacity < 0 || c.MaxRate < 0 {
		errs = append(errs, "--overload-capacity and --max-rate must not be negative")
	}
	if c.LanesScale < 0 {
		errs = append(errs, "--lanes-scale must not be negative")
	}
	if c.LargeBodyUploads < 1 || c.LargeBodyMiB < 1 || c.LargeBodyMemLimit == "" {
		errs = append(errs, "--largebody-uploads and --largebody-mib must be at least 1 and --largebody-memlimit not empty")
	}
	if c.NoiseLimit <= 0 {
		errs = append(errs, "--noise-limit must be positive")
	}
	if len(errs) > 0 {
		return errors.New("invalid benchmark settings: " + strings.Join(errs, "; "))
	}
	return nil
}

// Run executes the benchmark and writes report.json, report.md and
// report.html to cfg.Out. The returned report is nil only when the run
// could not start (bad settings, build failure). A run whose scenarios
// errored or whose baseline was too noisy comes back with Valid false.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if len(cfg.Variants) == 0 {
		cfg.Variants = Variants
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	run, unavailable, err := selectScenarios(cfg.Scenarios)
	if err != nil {
		return nil, err
	}
	if len(run) == 0 {
		return nil, errors.New("no scenario to run: every selected scenario is unavailable in this build")
	}
	if err := os.MkdirAll(filepath.Join(cfg.Out, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("create output directory %s: %w", cfg.Out, err)
	}
	work, err := os.MkdirTemp("", "omniroute-bench-")
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	defer os.RemoveAll(work)
	r := &Runner{cfg: cfg, work: work, capacity: map[string]float64{}}
	r.logf("omniroute-bench: writing to %s", cfg.Out)

	rep := &report.Report{
		Tool: "omniroute-bench", Command: cfg.Command, StartedAt: time.Now(),
		Machine: machine(), Settings: cfg, AllowNoisy: cfg.AllowNoisy, Unavailable: unavailable,
	}
	for _, v := range cfg.Variants {
		rep.Variants = append(rep.Variants, report.Variant{Name: v.Name, Env: v.Env, Description: v.Description})
	}

	if cfg.Binaries != nil {
		r.bins = *cfg.Binaries
	} else {
		dir := filepath.Join(work, "bin")
		var tags []string
		if cfg.CPUProfile {
			tags = append(tags, "benchpprof")
		}
		r.logf("building binaries into %s", dir)
		t0 := time.Now()
		r.bins, err = procs.Build(ctx, dir, procs.BuildOptions{Tags: tags, NoTrimpath: cfg.NoTrimpath})
		if err != nil {
			return nil, err
		}
		r.logf("built in %s: %s", time.Since(t0).Round(time.Millisecond), r.bins.Command)
	}
	rep.Build = report.Build{Command: r.bins.Command, Tags: r.bins.Tags}

	for _, sc := range run {
		if ctx.Err() != nil {
			break
		}
		s := &report.Scenario{Name: sc.Name, Description: sc.Description, Status: "ok"}
		rep.Scenarios = append(rep.Scenarios, s)
		r.logf("scenario %s", sc.Name)
		t0 := time.Now()
		if err := sc.Run(ctx, r, s); err != nil {
			s.Status, s.Error = "error", err.Error()
			rep.Invalid = append(rep.Invalid, fmt.Sprintf("scenario %s failed: %v", sc.Name, err))
			r.logf("scenario %s failed: %v", sc.Name, err)
		}
		r.logf("scenario %s done in %s", sc.Name, time.Since(t0).Round(time.Second))
	}
	if err := ctx.Err(); err != nil {
		rep.Invalid = append(rep.Invalid, "interrupted: "+err.Error())
	}

	rep.Noise = noiseCheck(rep.Scenarios, cfg.NoiseLimit)
	if rep.Noise.Checked && !rep.Noise.OK {
		rep.Invalid = append(rep.Invalid, fmt.Sprintf("baseline too noisy: the reference proxy's throughput moved %.0f %% between rounds (limit %.0f %%)", rep.Noise.Spread*100, cfg.NoiseLimit*100))
	}
	if cfg.Rounds < 3 {
		rep.Invalid = append(rep.Invalid, fmt.Sprintf("only %d round(s): a valid run needs at least 3", cfg.Rounds))
	}
	rep.Valid = len(rep.Invalid) == 0
	rep.Machine.LoadAvg[1] = loadAvg()
	rep.FinishedAt = time.Now()
	if err := rep.Write(cfg.Out); err != nil {
		return rep, err
	}
	r.logf("report: %s", filepath.Join(cfg.Out, "report.md"))
	return rep, nil
}

// noiseCheck compares the reference proxy's closed-loop throughput across
// rounds in every cell that has one.
func noiseCheck(scenarios []*report.Scenario, limit float64) report.Noise {
	n := report.Noise{Limit: limit, OK: true}
	for _, s := range scenarios {
		for _, l := range s.Loads {
			var rounds []float64
			for _, c := range s.Cells {
				if c.Load == l.ID && c.Target == TargetR && c.Summary.Mode == "closed" {
					rounds = append(rounds, c.Summary.Throughput)
				}
			}
			if len(rounds) < 2 {
				continue
			}
			lo, hi := rounds[0], rounds[0]
			for _, v := range rounds {
				lo, hi = min(lo, v), max(hi, v)
			}
			spread := 1.0
			if lo > 0 {
				spread = hi/lo - 1
			}
			n.Checked = true
			n.Cells = append(n.Cells, s.Name+"/"+l.ID)
			if spread >= n.Spread {
				n.Spread, n.Rounds = spread, rounds
			}
			if spread > limit {
				n.OK = false
			}
		}
	}
	if !n.Checked {
		n.Note = "no closed-loop reference-proxy cell with two or more rounds"
	}
	return n
}

func machine() report.Machine {
	m := report.Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					m.MemTotalMB = kb / 1024
				}
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		m.Kernel = b.String()
	}
	m.LoadAvg[0] = loadAvg()
	return m
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// External stores the report of a scenario implemented by another package
// (raw, as JSON) and its checks, for the small wiring files of scenarios
// such as noisy-neighbour or largebody.
func (r *Runner) External(s *report.Scenario, rep any, checks ...report.Check) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode the %s report: %w", s.Name, err)
	}
	s.External = b
	for i := range checks {
		checks[i].Scenario = s.Name
	}
	s.Checks = append(s.Checks, checks...)
	return nil
}
