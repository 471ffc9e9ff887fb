package transport

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/relay"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/edge"
)

// TestMetricTableComplete checks every entry of the metric table against
// Prometheus' naming rules, so a new entry cannot be half filled in.
func TestMetricTableComplete(t *testing.T) {
	name := regexp.MustCompile(`^omniroute_[a-z0-9]+(_[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, d := range metricTable {
		switch {
		case !name.MatchString(d.name):
			t.Errorf("%q: not an omniroute_ snake_case name", d.name)
		case seen[d.name]:
			t.Errorf("%s: listed twice", d.name)
		case len(d.help) < 10 || strings.ContainsAny(d.help, "\n\\`") || !strings.HasSuffix(d.help, "."):
			t.Errorf("%s: help %q must be one plain sentence", d.name, d.help)
		case (d.kind == kindCounter) != strings.HasSuffix(d.name, "_total"):
			t.Errorf("%s: counters, and only counters, end in _total", d.name)
		case d.kind == kindHistogram && !strings.HasSuffix(d.name, "_seconds") && !strings.HasSuffix(d.name, "_bytes"):
			t.Errorf("%s: a histogram's name ends in its base unit", d.name)
		}
		for _, abbr := range []string{"_ms", "_us", "_ns", "_kb", "_mb", "_millis", "_milliseconds"} {
			if strings.Contains(d.name+"_", abbr+"_") {
				t.Errorf("%s: spell the base unit out (_seconds, _bytes)", d.name)
			}
		}
		seen[d.name] = true
	}
}

// metricTableMarkdown renders the metric table as docs/metrics.md holds it.
func metricTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n")
	for _, d := range metricTable {
		b.WriteString("| `" + d.name + "` | " + d.kind.String() + " | " + d.labels + " | " + d.help + " |\n")
	}
	return b.String()
}

const docsBegin, docsEnd = "<!-- metric-table:begin (generated from transport/metric_table.go; UPDATE_METRIC_DOCS=1 go test ./transport -run TestMetricTableDocs) -->\n", "<!-- metric-table:end -->"

// TestMetricTableDocs checks that docs/metrics.md lists exactly the
// metric table (UPDATE_METRIC_DOCS=1 rewrites the block).
func TestMetricTableDocs(t *testing.T) {
	const path = "../docs/metrics.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(docsBegin)), bytes.Index(doc, []byte(docsEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q block", path, docsBegin, docsEnd)
	}
	want := metricTableMarkdown()
	if got := string(doc[i+len(docsBegin) : j]); got != want {
		if os.Getenv("UPDATE_METRIC_DOCS") == "1" {
			out := append(append(append([]byte{}, doc[:i+len(docsBegin)]...), want...), doc[j:]...)
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's metric table differs from transport/metric_table.go; run UPDATE_METRIC_DOCS=1 go test ./transport -run TestMetricTableDocs", path)
	}
}

// TestWriteExposition checks the rewriting of VictoriaMetrics' output: help
// from the table, the table's type over the registered one, runtime
// families renamed and typed by their suffix.
func TestWriteExposition(t *testing.T) {
	in := "# HELP omniroute_admission_admitted_total\n# TYPE omniroute_admission_admitted_total gauge\nomniroute_admission_admitted_total 3\n" +
		"# HELP go_cgo_calls_count\n# TYPE go_cgo_calls_count counter\ngo_cgo_calls_count 1\n" +
		"# HELP process_io_read_bytes_total\n# TYPE process_io_read_bytes_total gauge\nprocess_io_read_bytes_total 7\n" +
		"go_cgo_calls_countx 2"
	var b bytes.Buffer
	writeExposition(&b, []byte(in))
	want := "# HELP omniroute_admission_admitted_total Admission grants.\n# TYPE omniroute_admission_admitted_total counter\nomniroute_admission_admitted_total 3\n" +
		"# HELP go_cgo_calls_total " + helpOf("go_cgo_calls_total") + "\n# TYPE go_cgo_calls_total counter\ngo_cgo_calls_total 1\n" +
		"# HELP process_io_read_bytes_total " + helpOf("process_io_read_bytes_total") + "\n# TYPE process_io_read_bytes_total counter\nprocess_io_read_bytes_total 7\n" +
		"go_cgo_calls_countx 2"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestGrafanaDashboardNames checks that docs/grafana-dashboard.json is
// valid JSON and that every omniroute_ series its queries read is a family
// of the metric table (a histogram through its _bucket series), so a
// renamed metric cannot leave a panel silently empty.
func TestGrafanaDashboardNames(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	name := regexp.MustCompile(`omniroute_[a-z0-9_]+`)
	used := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, n := range name.FindAllString(q.Expr, -1) {
				used++
				if d := metricIndex[n]; d != nil && d.kind != kindHistogram {
					continue
				}
				if base, ok := strings.CutSuffix(n, "_bucket"); ok && metricIndex[base] != nil && metricIndex[base].kind == kindHistogram {
					continue
				}
				t.Errorf("panel %q reads %s, which /metrics does not serve", p.Title, n)
			}
		}
	}
	if used < 10 {
		t.Fatalf("the dashboard reads %d gateway series; want its panels built on them", used)
	}
}

// TestRequestMetricNamesEveryRoute: the help of the per-route request
// counter names every label of the route table, so a new route is
// documented where operators read the metric.
func TestRequestMetricNamesEveryRoute(t *testing.T) {
	help := helpOf("omniroute_requests_total")
	for r := edge.Route(0); r < edge.NumRoutes; r++ {
		if l := r.String(); !strings.Contains(help, l) {
			t.Errorf("omniroute_requests_total's help does not name route %q", l)
		}
	}
}

// TestNoMetricNameOutsideTable: no Go file of the module (tests aside)
// spells a metric family's name in a string literal but metric_table.go:
// code that registers a series names its family by the table's constant,
// so a family cannot be renamed in one place and not the other, or
// registered without its row.
func TestNoMetricNameOutsideTable(t *testing.T) {
	root := ".."
	table, _ := filepath.Abs("metric_table.go")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == table {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, _ := strconv.Unquote(b.Value); strings.HasPrefix(s, "omniroute_") {
					t.Errorf("%s: metric name %q written out; use its constant from metric_table.go", fset.Position(b.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files; the walk missed the module", files)
	}
}

// TestMetricHelpNamesEveryReason: the help (and docs/metrics.md's meaning)
// of a family labelled by a reason names every reason of its table, so a
// reason added to the table cannot be missing from the docs.
func TestMetricHelpNamesEveryReason(t *testing.T) {
	help := map[string]string{}
	for _, d := range metricTable {
		help[d.name] = d.help
	}
	var want = map[string][]string{}
	for _, f := range relay.Fallbacks() {
		want[metricRelayFallbacksTotal] = append(want[metricRelayFallbacksTotal], f.String())
	}
	for _, r := range relay.Rejections() {
		want[metricRelayRejectedTotal] = append(want[metricRelayRejectedTotal], r.String())
	}
	for _, o := range messages.ShedOutcomes() {
		want[metricChatAdmissionShedsTotal] = append(want[metricChatAdmissionShedsTotal], o.String())
	}
	for family, names := range want {
		for _, n := range names {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(help[family]) {
				t.Errorf("%s: help %q does not name reason %s", family, help[family], n)
			}
		}
	}
}
