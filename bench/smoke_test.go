package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/bench/report"
)

// TestSmokeEveryScenario runs every default scenario and cluster with tiny loads for
// a fraction of a second per cell and checks that the harness produces a
// complete, well-formed report. It never looks at a timing: it proves the
// instrument works, not how fast the gateway is.
func TestSmokeEveryScenario(t *testing.T) {
	// The bound is a wait, not a speed goal: on a loaded machine the build
	// alone can take minutes. It is the test's own deadline (go test
	// -timeout) less a minute, so that a stuck run still ends by itself
	// with the harness's log rather than the test binary's panic.
	ctx, cancel := context.WithDeadline(context.Background(), testDeadline(t, time.Minute))
	defer cancel()
	// One build for the whole test, as an ordinary build (no -trimpath, the
	// environment's cgo setting) so it reuses what `go vet` or another
	// test's `go build` already compiled.
	bins, err := procs.Build(ctx, t.TempDir(), procs.BuildOptions{NoTrimpath: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Out = t.TempDir()
	cfg.Binaries = &bins
	cfg.Rounds = 2 // two rounds exercise the noise check
	cfg.Warmup, cfg.Duration, cfg.Settle = 50*time.Millisecond, 150*time.Millisecond, 50*time.Millisecond
	cfg.Timeout, cfg.StreamTimeout = 2*time.Second, 5*time.Second
	cfg.Concurrency, cfg.Rates = 4, []float64{100}
	cfg.Streams, cfg.StreamLatencyMS, cfg.StreamChunks, cfg.StreamGapMS = 4, 5, 3, 2
	cfg.OverloadLatencyMS, cfg.OverloadWorkers, cfg.MaxRate = 2, 64, 400
	cfg.FanoutConcurrency = 2
	// The lanes scenarios' smoke variants (a few seconds each; their gateway
	// runs in this test binary, so under -race at half the offered load)
	// and a small large-body run.
	cfg.LanesFull, cfg.LanesScale = false, 1
	if raceEnabled {
		cfg.LanesScale = 0.5
	}
	cfg.LargeBodyUploads, cfg.LargeBodyMiB = 12, 4
	var log strings.Builder
	cfg.Log = &log

	// Every default scenario, and cluster (not in the default run: it
	// starts an etcd and a two-member cluster).
	var available []Scenario
	for _, s := range Scenarios() {
		if s.Unavailable == "" && (s.Default || s.Name == "cluster") {
			available = append(available, s)
			cfg.Scenarios = append(cfg.Scenarios, s.Name)
		}
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if testing.Verbose() {
		t.Log(log.String())
	}

	if len(rep.Scenarios) != len(available) {
		t.Fatalf("%d scenarios in the report, %d available", len(rep.Scenarios), len(available))
	}
	for i, s := range rep.Scenarios {
		if s.Name != available[i].Name || s.Status != "ok" {
			t.Fatalf("scenario %d: %s status %s: %s\n%s", i, s.Name, s.Status, s.Error, log.String())
		}
		checkScenario(t, s, cfg.Rounds)
	}
	for _, reason := range rep.Invalid {
		if !strings.HasPrefix(reason, "baseline too noisy") && !strings.HasPrefix(reason, "only 2 round") {
			t.Errorf("unexpected invalid reason %q", reason)
		}
	}
	if !rep.Noise.Checked || len(rep.Noise.Rounds) != cfg.Rounds {
		t.Errorf("noise check did not run: %+v", rep.Noise)
	}
	wantUnavailable := 0
	for _, s := range Scenarios() {
		if s.Unavailable != "" {
			wantUnavailable++
		}
	}
	if len(rep.Unavailable) != wantUnavailable {
		t.Errorf("%d unavailable scenarios listed, want %d", len(rep.Unavailable), wantUnavailable)
	}
	checkFiles(t, cfg.Out, rep)
}

// testDeadline is the test binary's deadline less margin, or half an hour
// from now when it has none (go test -timeout 0).
func testDeadline(t *testing.T, margin time.Duration) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-margin)
	}
	return time.Now().Add(30 * time.Minute)
}

func checkScenario(t *testing.T, s *report.Scenario, rounds int) {
	t.Helper()
	if len(s.External) > 0 {
		checkExternal(t, s)
		return
	}
	if len(s.Loads) == 0 || len(s.Targets) == 0 || len(s.Checks) == 0 || len(s.Idle) == 0 {
		t.Fatalf("%s: incomplete: %d loads, %d targets, %d checks, %d idle", s.Name, len(s.Loads), len(s.Targets), len(s.Checks), len(s.Idle))
	}
	for _, p := range s.Idle {
		if p.PeakRSS <= 0 || p.Pid <= 0 {
			t.Errorf("%s: idle memory of %s: %+v", s.Name, p.Name, p)
		}
	}
	for _, l := range s.Loads {
		for _, tg := range s.Targets {
			n := 0
			for _, c := range s.Cells {
				if c.Load == l.ID && c.Target == tg {
					n++
				}
			}
			// A capacity cell runs once (and only for a variant whose
			// capacity was not known); every other cell once per round.
			if n != rounds && !(l.ID == "capacity" && n <= 1) {
				t.Errorf("%s: %d cells for %s × %s, want %d", s.Name, n, l.ID, tg, rounds)
			}
		}
	}
	for _, c := range s.Cells {
		m := &c.Summary
		if m.Arrivals == 0 || m.Answered+m.Timeouts+m.ConnErrors+m.NotSent != m.Arrivals {
			t.Errorf("%s/%s/%s: arrivals do not add up: %+v", s.Name, c.Load, c.Target, m)
		}
		if m.Latency.N != m.OK || m.Hist.Total() != int64(m.OK) || m.RejectionLatency.N != m.Rejections {
			t.Errorf("%s/%s/%s: latency samples %d / histogram %d for %d successes", s.Name, c.Load, c.Target, m.Latency.N, m.Hist.Total(), m.OK)
		}
		if (m.Mode == "open") != (m.SendLag != nil) {
			t.Errorf("%s/%s/%s: send lag present=%v in mode %s", s.Name, c.Load, c.Target, m.SendLag != nil, m.Mode)
		}
		want := []string{"mock", "generator"}
		if c.Target != TargetD {
			want = append(want, "proxy")
		}
		for _, role := range want {
			p := c.Proc(role)
			if p == nil || p.CPUSeconds < 0 || (role != "generator" && p.PeakRSS <= 0) {
				t.Errorf("%s/%s/%s: process %s figures: %+v", s.Name, c.Load, c.Target, role, p)
			}
		}
		if c.Target == TargetD && c.Proc("proxy") != nil {
			t.Errorf("%s: direct cell charged to a proxy", s.Name)
		}
	}
	checkChecks(t, s)
}

func checkChecks(t *testing.T, s *report.Scenario) {
	t.Helper()
	for _, ch := range s.Checks {
		switch {
		case ch.Status != report.Pass && ch.Status != report.Fail && ch.Status != report.NA:
			t.Errorf("%s: check %s has status %q", s.Name, ch.ID, ch.Status)
		case (ch.Value == nil) != (ch.Status == report.NA):
			t.Errorf("%s: check %s: value %v with status %s", s.Name, ch.ID, ch.Value, ch.Status)
		case ch.Goal == "" || ch.Metric == "" || ch.Scenario != s.Name:
			t.Errorf("%s: check %+v is incomplete", s.Name, ch)
		}
	}
}

// checkExternal checks a scenario implemented by another package: its raw
// report is JSON, and its figures and checks are complete.
func checkExternal(t *testing.T, s *report.Scenario) {
	t.Helper()
	if !json.Valid(s.External) || len(s.Checks) == 0 || len(s.Figures) == 0 || len(s.Cells) != 0 {
		t.Fatalf("%s: external scenario incomplete: %d checks, %d figures, %d cells, report %.200s", s.Name, len(s.Checks), len(s.Figures), len(s.Cells), s.External)
	}
	checkChecks(t, s)
}

var externalRef = regexp.MustCompile(`(?i)\b(src|href)\s*=|<script|<link|@import|url\(`)

func checkFiles(t *testing.T, dir string, rep *report.Report) {
	t.Helper()
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("report.json does not parse: %v", err)
	}
	if len(back.Scenarios) != len(rep.Scenarios) || len(back.Checks()) != len(rep.Checks()) || back.Machine.CPUs == 0 {
		t.Fatalf("report.json lost data: %d scenarios, %d checks", len(back.Scenarios), len(back.Checks()))
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"## Goals", "| Goal |"}
	if len(rep.Unavailable) > 0 {
		want = append(want, "## Not available in this build")
	}
	for _, want := range want {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, s := range rep.Scenarios {
		if !strings.Contains(string(md), "## "+s.Name) || !strings.Contains(string(html), `id="`+s.Name+`"`) {
			t.Errorf("scenario %s missing from report.md or report.html", s.Name)
		}
	}
	if n := strings.Count(string(html), "<svg"); n < 2*len(rep.Scenarios) || !strings.HasSuffix(strings.TrimSpace(string(html)), "</html>") {
		t.Errorf("report.html has %d charts or is cut short", n)
	}
	if m := externalRef.Find(html); m != nil {
		t.Errorf("report.html refers to an external asset: %q", m)
	}
}
