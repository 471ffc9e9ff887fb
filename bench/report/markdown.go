package report

import (
	"fmt"
	"slices"
	"strings"
)

// Markdown renders the goals table and per-scenario summaries.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# OmniRoute benchmark, %s\n\n", r.StartedAt.UTC().Format("2006-01-02 15:04 UTC"))
	w("- Command: `%s`\n", r.Command)
	m := r.Machine
	w("- Machine: %d CPUs (%s), %d MB RAM, %s/%s, kernel %s, %s; load average %.2f at start, %.2f at end\n",
		m.CPUs, orDash(m.CPUModel), m.MemTotalMB, m.GOOS, m.GOARCH, orDash(m.Kernel), m.GoVersion, m.LoadAvg[0], m.LoadAvg[1])
	w("- Build: `%s`\n", r.Build.Command)
	w("- Duration: %s\n", r.FinishedAt.Sub(r.StartedAt).Round(1e9))
	for _, v := range r.Variants {
		w("- Variant `%s`: %s%s\n", v.Name, envText(v.Env), descText(v.Description))
	}
	w("\n%s\n\n", r.verdict())

	w("## Goals\n\n")
	w("Ratios are medians over rounds of per-round ratios; R = reference proxy, D = direct to the mock, G = gateway.\n\n")
	mdTable(&b, r.goalsTable())
	for _, s := range r.Scenarios {
		w("\n## %s\n\n%s\n\n", s.Name, s.Description)
		for _, n := range s.Notes {
			w("- %s\n", n)
		}
		if len(s.Notes) > 0 {
			w("\n")
		}
		if s.Status != "ok" {
			w("**Error:** %s\n\n", s.Error)
		}
		if len(s.Cells) > 0 {
			w("Medians over rounds (latency in ms from the scheduled send; CPU in µs per answered request of each process's own CPU time).\n\n")
			mdTable(&b, s.cellTable())
		}
		if len(s.Idle) > 0 {
			var parts []string
			for _, p := range s.Idle {
				parts = append(parts, fmt.Sprintf("%s %s MB", p.Name, MB(p.PeakRSS)))
			}
			w("\nIdle RSS after start: %s.\n", strings.Join(parts, ", "))
		}
		if len(s.Figures) > 0 {
			w("\n| Figure | Median | Per round |\n|---|---|---|\n")
			for _, f := range s.Figures {
				w("| %s | %s | %s |\n", f.Name, valueText(&f.Value, f.Unit), roundsText(f.Rounds))
			}
		}
		for _, f := range s.Files {
			w("\n- file: `%s`", f)
		}
		if len(s.Files) > 0 {
			w("\n")
		}
	}
	if len(r.Unavailable) > 0 {
		w("\n## Not available in this build\n\n")
		for _, u := range r.Unavailable {
			w("- `%s`: %s\n", u.Name, u.Reason)
		}
	}
	return b.String()
}

func (r *Report) verdict() string {
	pass, fail, na := 0, 0, 0
	for _, c := range r.Checks() {
		switch c.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			na++
		}
	}
	v := "**Run valid.**"
	if !r.Valid {
		v = "**Run INVALID:** " + strings.Join(r.Invalid, "; ") + "."
		if r.AllowNoisy {
			v += " (Reported anyway because of --allow-noisy.)"
		}
	}
	noise := "Noise check: not applicable (" + r.Noise.Note + ")."
	if r.Noise.Checked {
		noise = fmt.Sprintf("Noise check (%s): reference proxy throughput per round %s req/s, spread %.0f %% (limit %.0f %%): %s.",
			strings.Join(r.Noise.Cells, ", "), roundsText(r.Noise.Rounds), r.Noise.Spread*100, r.Noise.Limit*100, map[bool]string{true: "ok", false: "TOO NOISY"}[r.Noise.OK])
	}
	return fmt.Sprintf("%s %s Goals: %d pass, %d fail, %d n/a.", v, noise, pass, fail, na)
}

func resultText(c Check) string {
	s := map[string]string{Pass: "✅ pass", Fail: "❌ fail", NA: "n/a"}[c.Status]
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

func valueText(v *float64, unit string) string {
	if v == nil {
		return "–"
	}
	s := sig(*v)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// sig prints 3 significant digits without exponent noise.
func sig(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func roundsText(vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = sig(v)
	}
	return strings.Join(parts, ", ")
}

func cpuText(m map[string]float64, role string) string {
	if v, ok := m[role]; ok {
		return num(v, 1)
	}
	return "–"
}

func envText(env map[string]string) string {
	if len(env) == 0 {
		return "(no extra environment)"
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "`" + k + "=" + env[k] + "`"
	}
	return strings.Join(parts, " ")
}

// descText appends a variant's description to its environment.
func descText(d string) string {
	if d == "" {
		return ""
	}
	return " — " + d
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// table is a header and rows of cells, rendered as Markdown or HTML.
type table struct {
	head []string
	rows [][]string
}

func mdTable(b *strings.Builder, t table) {
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}

func (r *Report) goalsTable() table {
	t := table{head: []string{"Goal", "Scenario", "Variant", "Measured", "Per round", "Target", "Result"}}
	for _, c := range r.Checks() {
		t.rows = append(t.rows, []string{c.Metric, c.Scenario, orDash(c.Variant), valueText(c.Value, c.Unit),
			roundsText(c.Rounds), c.Goal, resultText(c)})
	}
	return t
}

func (s *Scenario) cellTable() table {
	t := table{head: []string{"Load", "Target", "Throughput (req/s)", "p50", "p90", "p99", "max", "TTFT p50 / p99",
		"CPU/req target", "CPU/req mock", "CPU/req generator", "CPU/event target", "Peak RSS target (MB)", "Sends >1 ms late", "Failures"}}
	for _, l := range s.Loads {
		for _, tg := range s.Targets {
			a := s.Aggregate(l.ID, tg)
			if a.Rounds == 0 {
				continue
			}
			ttft := "–"
			if a.HasTTFT {
				ttft = num(a.TTFT50, 2) + " / " + num(a.TTFT99, 2)
			}
			cpuEv := "–"
			if v, ok := a.CPUEvent["proxy"]; ok {
				cpuEv = num(v, 2)
			}
			t.rows = append(t.rows, []string{l.Label, tg, num(a.Throughput, 0),
				num(a.P50, 3), num(a.P90, 3), num(a.P99, 3), num(a.Max, 1), ttft,
				cpuText(a.CPUReq, "proxy"), cpuText(a.CPUReq, "mock"), cpuText(a.CPUReq, "generator"), cpuEv,
				MB(a.PeakRSS["proxy"]), lateText(a), orDash(a.FailureText())})
		}
	}
	return t
}

func lateText(a *Agg) string {
	if !a.Open {
		return "–"
	}
	if a.Arrivals == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.1f %%)", a.Late, 100*float64(a.Late)/float64(a.Arrivals))
}
