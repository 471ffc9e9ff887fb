package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/omniroute/gateway/bench/loadgen"
)

// D and R keep their colours in every chart; the other targets (gateway
// variants) take the rest in order.
var (
	baselineColors = map[string]string{"D": "#6b6b6b", "R": "#1f77b4"}
	palette        = []string{"#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"}
)

func colors(targets []string) map[string]string {
	out := map[string]string{}
	i := 0
	for _, t := range targets {
		if c, ok := baselineColors[t]; ok {
			out[t] = c
			continue
		}
		out[t] = palette[i%len(palette)]
		i++
	}
	return out
}

// HTML renders a self-contained page: the goals, each scenario's table, and
// per load a latency histogram and CDF with one line per target (rounds
// merged). No scripts, fonts or images are fetched.
func (r *Report) HTML() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>OmniRoute benchmark %s</title><style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
.pass{color:#14722a;font-weight:600}.fail{color:#b00020;font-weight:600}.na{color:#777}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;padding:4px}
code{background:#f5f5f5;padding:1px 4px}.bad{background:#fde7e9;padding:8px;border:1px solid #b00020}.good{background:#e8f5e9;padding:8px;border:1px solid #14722a}
</style></head><body>
`, html.EscapeString(r.StartedAt.UTC().Format("2006-01-02 15:04")))
	w("<h1>OmniRoute benchmark</h1>\n<ul>")
	w("<li>Command: <code>%s</code></li>", html.EscapeString(r.Command))
	m := r.Machine
	w("<li>Machine: %d CPUs (%s), %d MB RAM, %s/%s, kernel %s, %s; load average %.2f at start, %.2f at end</li>",
		m.CPUs, html.EscapeString(orDash(m.CPUModel)), m.MemTotalMB, m.GOOS, m.GOARCH, html.EscapeString(orDash(m.Kernel)), m.GoVersion, m.LoadAvg[0], m.LoadAvg[1])
	w("<li>Build: <code>%s</code></li>", html.EscapeString(r.Build.Command))
	w("<li>Started %s, took %s</li>", r.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"), r.FinishedAt.Sub(r.StartedAt).Round(1e9))
	for _, v := range r.Variants {
		w("<li>Variant <code>%s</code>: %s</li>", html.EscapeString(v.Name), html.EscapeString(strings.ReplaceAll(envText(v.Env), "`", "")+descText(v.Description)))
	}
	w("</ul>\n")
	cls := "good"
	if !r.Valid {
		cls = "bad"
	}
	w(`<p class="%s">%s</p>`+"\n", cls, html.EscapeString(strings.ReplaceAll(r.verdict(), "**", "")))
	w("<h2>Goals</h2><p>Ratios are medians over rounds of per-round ratios; R = reference proxy, D = direct to the mock, G = gateway.</p>\n")
	htmlTable(&b, r.goalsTable())
	for _, s := range r.Scenarios {
		w("<h2 id=\"%s\">%s</h2><p>%s</p>\n", html.EscapeString(s.Name), html.EscapeString(s.Name), html.EscapeString(s.Description))
		if len(s.Notes) > 0 {
			w("<ul>")
			for _, n := range s.Notes {
				w("<li>%s</li>", html.EscapeString(n))
			}
			w("</ul>\n")
		}
		if s.Status != "ok" {
			w("<p class=\"bad\">Error: %s</p>\n", html.EscapeString(s.Error))
		}
		if len(s.Cells) == 0 {
			continue
		}
		w("<p>Medians over rounds; latency in ms from the scheduled send; CPU in µs of each process's own CPU time per answered request.</p>\n")
		htmlTable(&b, s.cellTable())
		for _, f := range s.Figures {
			w("<div>%s: <b>%s</b> (rounds: %s)</div>\n", html.EscapeString(f.Name), html.EscapeString(valueText(&f.Value, f.Unit)), roundsText(f.Rounds))
		}
		for _, l := range s.Loads {
			var series []chartSeries
			var ttft []chartSeries
			cols := colors(s.Targets)
			for _, t := range s.Targets {
				a := s.Aggregate(l.ID, t)
				if a.Rounds == 0 {
					continue
				}
				col := cols[t]
				series = append(series, chartSeries{name: t, color: col, h: a.Hist})
				if a.HasTTFT {
					ttft = append(ttft, chartSeries{name: t, color: col, h: a.TTFTHist})
				}
			}
			if len(series) == 0 {
				continue
			}
			w("<h3>%s: %s</h3><div class=\"charts\">\n", html.EscapeString(s.Name), html.EscapeString(l.Label))
			b.WriteString(histogramSVG("Latency distribution (successful requests)", series))
			b.WriteString(cdfSVG("Latency CDF", series))
			if len(ttft) > 0 {
				b.WriteString(histogramSVG("Time to first content event", ttft))
				b.WriteString(cdfSVG("Time to first content event, CDF", ttft))
			}
			b.WriteString("</div>\n")
		}
	}
	if len(r.Unavailable) > 0 {
		w("<h2>Not available in this build</h2><ul>")
		for _, u := range r.Unavailable {
			w("<li><code>%s</code>: %s</li>", html.EscapeString(u.Name), html.EscapeString(u.Reason))
		}
		w("</ul>\n")
	}
	w("</body></html>\n")
	return b.String()
}

func htmlTable(b *strings.Builder, t table) {
	b.WriteString("<table><tr>")
	for _, h := range t.head {
		b.WriteString("<th>" + html.EscapeString(h) + "</th>")
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		b.WriteString("<tr>")
		for _, c := range r {
			cls := ""
			switch {
			case strings.Contains(c, "✅"):
				cls = ` class="pass"`
			case strings.Contains(c, "❌"):
				cls = ` class="fail"`
			case c == NA:
				cls = ` class="na"`
			}
			b.WriteString("<td" + cls + ">" + html.EscapeString(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

type chartSeries struct {
	name  string
	color string
	h     loadgen.Histogram
}

const (
	chartW, chartH             = 580, 290
	padL, padR, padT, padB     = 56, 30, 28, 68
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	legendRowH                 = 14
	minDecadeUS, maxDecadeUS   = 1e1, 1e8
	histogramNormalisationText = "share of requests per bucket"
)

// xRange returns the decade-aligned microsecond range covering every
// non-empty bucket of the series.
func xRange(series []chartSeries) (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, s := range series {
		for i, c := range s.h.Counts {
			if c == 0 {
				continue
			}
			lo = math.Min(lo, s.h.Edge(max(i-1, 0)))
			hi = math.Max(hi, s.h.Edge(i))
		}
	}
	if hi == 0 {
		return minDecadeUS, minDecadeUS * 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return math.Max(lo, minDecadeUS), math.Min(hi, maxDecadeUS)
}

func xPos(us, lo, hi float64) float64 {
	us = math.Min(math.Max(us, lo), hi)
	return padL + (math.Log10(us)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*plotW
}

func yPos(frac, top float64) float64 { return padT + plotH - frac/top*plotH }

func usLabel(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%gs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%gms", us/1e3)
	default:
		return fmt.Sprintf("%gµs", us)
	}
}

func frame(b *strings.Builder, title string, lo, hi, top float64, yFmt func(float64) string, series []chartSeries) {
	fmt.Fprintf(b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-size="11">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(b, `<text x="%d" y="16" font-weight="600">%s</text>`, padL, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	for d := lo; d <= hi*1.0001; d *= 10 {
		x := xPos(d, lo, hi)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`, x, padT, x, padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, padT+plotH+14, usLabel(d))
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := yPos(v, top)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, yFmt(v))
	}
	// Legend entries flow left to right and wrap (about 6.5 px per
	// character at this font size).
	x, y := padL, padT+plotH+32
	for _, s := range series {
		label := fmt.Sprintf("%s (n=%d)", s.name, s.h.Total())
		w := 14 + len([]rune(label))*13/2 + 16
		if x > padL && x+w > chartW-padR {
			x, y = padL, y+legendRowH
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`,
			x, y-9, s.color, x+14, y, html.EscapeString(label))
		x += w
	}
}

func histogramSVG(title string, series []chartSeries) string {
	lo, hi := xRange(series)
	top := 0.0
	for _, s := range series {
		n := float64(s.h.Total())
		for _, c := range s.h.Counts {
			if n > 0 {
				top = math.Max(top, float64(c)/n)
			}
		}
	}
	if top == 0 {
		top = 1
	}
	top = math.Ceil(top*20) / 20
	var b strings.Builder
	frame(&b, title+" ("+histogramNormalisationText+")", lo, hi, top, func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }, series)
	for _, s := range series {
		n := float64(s.h.Total())
		if n == 0 {
			continue
		}
		var pts []string
		for i, c := range s.h.Counts {
			x0, x1 := xPos(s.h.Edge(max(i-1, 0)), lo, hi), xPos(s.h.Edge(i), lo, hi)
			y := yPos(float64(c)/n, top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x0, y, x1, y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.color, strings.Join(pts, " "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func cdfSVG(title string, series []chartSeries) string {
	lo, hi := xRange(series)
	var b strings.Builder
	frame(&b, title, lo, hi, 1, func(v float64) string { return fmt.Sprintf("%.2f", v) }, series)
	for _, s := range series {
		n := float64(s.h.Total())
		if n == 0 {
			continue
		}
		var cum float64
		pts := []string{fmt.Sprintf("%.1f,%.1f", xPos(lo, lo, hi), yPos(0, 1))}
		for i, c := range s.h.Counts {
			cum += float64(c)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xPos(s.h.Edge(i), lo, hi), yPos(cum/n, 1)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.color, strings.Join(pts, " "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
