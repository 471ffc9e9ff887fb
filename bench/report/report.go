// Package report holds the benchmark's results and renders them: JSON with
// every raw figure, a Markdown summary of the goals, and a self-contained
// HTML page with latency histograms and CDFs (inline SVG, no external
// assets).
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/omniroute/gateway/bench/loadgen"
)

// Report is one benchmark run.
type Report struct {
	Tool       string    `json:"tool"`
	Command    string    `json:"command"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Machine    Machine   `json:"machine"`
	Build      Build     `json:"build"`
	// Settings are the run's options (rounds, durations, loads, seed).
	Settings any       `json:"settings"`
	Variants []Variant `json:"variants"`
	// Valid is false when the noise check failed or a scenario errored;
	// Invalid says why.
	Valid      bool     `json:"valid"`
	Invalid    []string `json:"invalid,omitempty"`
	AllowNoisy bool     `json:"allow_noisy"`
	Noise      Noise    `json:"noise"`

	Scenarios   []*Scenario   `json:"scenarios"`
	Unavailable []Unavailable `json:"unavailable,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	GOOS       string     `json:"goos"`
	GOARCH     string     `json:"goarch"`
	CPUs       int        `json:"cpus"`
	CPUModel   string     `json:"cpu_model,omitempty"`
	MemTotalMB int64      `json:"mem_total_mb,omitempty"`
	Kernel     string     `json:"kernel,omitempty"`
	GoVersion  string     `json:"go_version"`
	LoadAvg    [2]float64 `json:"loadavg_1m_start_end"`
}

// Build records how the binaries were built.
type Build struct {
	Command string   `json:"command"`
	Tags    []string `json:"tags,omitempty"`
}

// Variant is one configuration of the gateway under test.
type Variant struct {
	Name string            `json:"name"`
	Env  map[string]string `json:"env"`
	// Description says what the variant turns on and off.
	Description string `json:"description,omitempty"`
}

// Noise is the baseline stability check: the reference proxy's closed-loop
// throughput must not move more than Limit between rounds.
type Noise struct {
	Checked bool `json:"checked"`
	// Cell names the cells compared (scenario/load).
	Cells []string `json:"cells,omitempty"`
	// Spread is max/min-1 over the rounds of the worst cell.
	Spread float64   `json:"spread"`
	Limit  float64   `json:"limit"`
	Rounds []float64 `json:"rounds_rps,omitempty"`
	OK     bool      `json:"ok"`
	Note   string    `json:"note,omitempty"`
}

// Unavailable is a scenario this build cannot run, and why.
type Unavailable struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Scenario is one scenario's results.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Notes say how the scenario was set up (environment, definitions),
	// for scenarios that report them (bench/lanes).
	Notes []string `json:"notes,omitempty"`
	// Status is "ok" or "error".
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Loads and Targets list the cells' dimensions in display order.
	Loads   []Load   `json:"loads"`
	Targets []string `json:"targets"`
	Cells   []*Cell  `json:"cells"`
	// Idle is each process's memory right after start, before any load.
	Idle    []Proc   `json:"idle"`
	Checks  []Check  `json:"checks"`
	Figures []Figure `json:"figures,omitempty"`
	// External is the raw report of a scenario implemented by another
	// package (bench/lanes, bench/largebody).
	External json.RawMessage `json:"external,omitempty"`
	// Files are extra outputs (profiles) relative to the output directory.
	Files []string `json:"files,omitempty"`
}

// Load is one load shape of a scenario.
type Load struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Cell is one target under one load in one round.
type Cell struct {
	Load    string          `json:"load"`
	Target  string          `json:"target"`
	Round   int             `json:"round"`
	Summary loadgen.Summary `json:"summary"`
	// Procs are the processes' costs over the measured phase: "proxy" is
	// the target's own process (absent for direct-to-mock), "mock" the
	// provider, "generator" the benchmark process itself.
	Procs []Proc `json:"procs"`
	// Upstream counts the requests the mock received per upstream model
	// during the measured phase, for cells that ask for it (fan-out: how
	// many upstream calls one answered request cost).
	Upstream map[string]int64 `json:"upstream_requests,omitempty"`
	// MachineBusy is the share of the machine's CPUs (all processes) that
	// was busy over the measured phase (0..1): a figure near 1 shows the
	// cell saturated the machine.
	MachineBusy float64 `json:"machine_busy"`
}

// Proc is one process's cost in a cell (or at idle).
type Proc struct {
	Role string `json:"role"`
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	// CPUSeconds is user+system CPU over the measured phase (10 ms
	// resolution for child processes).
	CPUSeconds float64 `json:"cpu_s"`
	// CPUPerRequestUS divides by answered requests; CPUPerEventUS by SSE
	// data events received by the client.
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	CPUPerEventUS   float64 `json:"cpu_per_event_us,omitempty"`
	// PeakRSS and MeanRSS come from sampling VmRSS every 100 ms during the
	// phase; HWM is VmHWM (peak over the process's life) at its end.
	PeakRSS int64 `json:"peak_rss_bytes"`
	MeanRSS int64 `json:"mean_rss_bytes"`
	HWM     int64 `json:"hwm_bytes"`
}

// Check is one goal of the issue, evaluated on this run.
type Check struct {
	ID       string `json:"id"`
	Scenario string `json:"scenario"`
	Variant  string `json:"variant,omitempty"`
	Metric   string `json:"metric"`
	// Goal is the target as text, e.g. "≥ 0.60".
	Goal string `json:"goal"`
	// Value is the median over rounds (nil when it could not be computed).
	Value  *float64  `json:"value"`
	Unit   string    `json:"unit,omitempty"`
	Rounds []float64 `json:"rounds,omitempty"`
	// Status is "pass", "fail" or "n/a".
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Check statuses.
const (
	Pass = "pass"
	Fail = "fail"
	NA   = "n/a"
)

// Figure is an informative number without a goal (e.g. G/D ratios).
type Figure struct {
	Name   string    `json:"name"`
	Value  float64   `json:"value"`
	Unit   string    `json:"unit,omitempty"`
	Rounds []float64 `json:"rounds,omitempty"`
}

// Checks returns every scenario's checks in order.
func (r *Report) Checks() []Check {
	var out []Check
	for _, s := range r.Scenarios {
		out = append(out, s.Checks...)
	}
	return out
}

// Write stores report.json, report.md and report.html in dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	files := map[string][]byte{
		"report.json": append(js, '\n'),
		"report.md":   []byte(r.Markdown()),
		"report.html": []byte(r.HTML()),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// Find returns the cell of (load, target, round), or nil.
func (s *Scenario) Find(load, target string, round int) *Cell {
	for _, c := range s.Cells {
		if c.Load == load && c.Target == target && c.Round == round {
			return c
		}
	}
	return nil
}

// Proc returns the process figures with the role, or nil.
func (c *Cell) Proc(role string) *Proc {
	for i := range c.Procs {
		if c.Procs[i].Role == role {
			return &c.Procs[i]
		}
	}
	return nil
}
