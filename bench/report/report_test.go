package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func sample() *Report {
	h := loadgen.NewHistogram()
	h.Add(300e3)
	h.Add(2e6)
	one := 0.7
	return &Report{
		Tool: "omniroute-bench", Command: "omniroute-bench --rounds 3", Valid: false,
		Invalid: []string{"baseline too noisy"}, AllowNoisy: true,
		Noise:    Noise{Checked: true, Cells: []string{"passthrough/closed"}, Spread: 0.3, Limit: 0.25, Rounds: []float64{100, 130}},
		Variants: []Variant{{Name: "admission-on", Env: map[string]string{"B": "2", "A": "1"}}},
		Scenarios: []*Scenario{{
			Name: "passthrough", Description: "d <b>", Status: "ok", Notes: []string{"note <n>"},
			Loads:   []Load{{ID: "closed", Label: "closed loop"}},
			Targets: []string{"R", "G <x>"},
			Cells: []*Cell{
				{Load: "closed", Target: "R", Round: 1, Summary: loadgen.Summary{Mode: "closed", Arrivals: 2, OK: 2, Throughput: 10, Hist: h,
					Latency: loadgen.Stats{N: 2, P50: 0.3}, Statuses: map[string]int{"200": 2}},
					Procs: []Proc{{Role: "proxy", CPUPerRequestUS: 40, PeakRSS: 10 << 20}}},
				{Load: "closed", Target: "G <x>", Round: 1, Summary: loadgen.Summary{Mode: "closed", Arrivals: 3, OK: 2, Timeouts: 1, Throughput: 7, Hist: h,
					Latency: loadgen.Stats{N: 2, P50: 2}, Statuses: map[string]int{"200": 2, "503": 1}, Codes: map[string]int{"admission_queue_full": 1},
					Rejections: 1, RejectionsRetryAfter: 1, RejectionLatency: loadgen.Stats{N: 1, P99: 0.5}},
					Procs: []Proc{{Role: "proxy", CPUPerRequestUS: 60, PeakRSS: 20 << 20}}},
			},
			Checks: []Check{
				{ID: "t", Scenario: "passthrough", Variant: "admission-on", Metric: "Throughput G/R", Goal: "≥ 0.6 ×", Value: &one, Rounds: []float64{0.7}, Status: Pass},
				{ID: "u", Scenario: "passthrough", Metric: "Other", Goal: "= 0", Status: NA, Note: "no data"},
			},
		}},
		Unavailable: []Unavailable{{Name: "largebody", Reason: "not merged"}},
	}
}

func TestRender(t *testing.T) {
	r := sample()
	md := r.Markdown()
	for _, want := range []string{"Run INVALID", "--allow-noisy", "✅ pass", "n/a (no data)", "| closed loop | G <x> |", "timeout ×1", "code admission_queue_full ×1", "429/503 with Retry-After 1 of 1, p99 0.50 ms",
		"`A=1` `B=2`", "## Not available in this build", "`largebody`: not merged", "spread 30 %", "- note <n>\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	html := r.HTML()
	if strings.Contains(html, "G <x>") || !strings.Contains(html, "G &lt;x&gt;") || strings.Contains(html, "d <b>") || !strings.Contains(html, "<li>note &lt;n&gt;</li>") {
		t.Error("HTML does not escape names")
	}
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d charts, want a histogram and a CDF", n)
	}
	if !strings.Contains(html, `class="pass"`) {
		t.Error("pass marker not styled")
	}

	a := r.Scenarios[0].Aggregate("closed", "G <x>")
	if a.Rounds != 1 || a.Throughput != 7 || a.CPUReq["proxy"] != 60 || a.Hist.Total() != 2 || a.Failures["timeout"] != 1 {
		t.Fatalf("%+v", a)
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := sample().Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Checks()) != 2 || back.Scenarios[0].Cells[1].Summary.Timeouts != 1 {
		t.Fatalf("%v %+v", err, back)
	}
	for _, f := range []string{"report.md", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 2, 3}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
