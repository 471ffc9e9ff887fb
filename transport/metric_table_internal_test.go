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
	"github.com/omniroute/gateway/transport/metric"
)

// metricTableMarkdown renders the metric table as docs/metrics.md holds it.
func metricTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n")
	for _, d := range metric.Table {
		b.WriteString("| `" + d.Name + "` | " + d.Kind.String() + " | " + d.Labels + " | " + d.Help + " |\n")
	}
	return b.String()
}

const docsBegin, docsEnd = "<!-- metric-table:begin (generated from transport/metric/table.go; UPDATE_METRIC_DOCS=1 go test ./transport -run TestMetricTableDocs) -->\n", "<!-- metric-table:end -->"

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
		t.Fatalf("%s's metric table differs from transport/metric/table.go; run UPDATE_METRIC_DOCS=1 go test ./transport -run TestMetricTableDocs", path)
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
				if d := metric.Index[n]; d != nil && d.Kind != metric.Histogram {
					continue
				}
				if base, ok := strings.CutSuffix(n, "_bucket"); ok && metric.Index[base] != nil && metric.Index[base].Kind == metric.Histogram {
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
	help := metric.Help("omniroute_requests_total")
	for r := edge.Route(0); r < edge.NumRoutes; r++ {
		if l := r.String(); !strings.Contains(help, l) {
			t.Errorf("omniroute_requests_total's help does not name route %q", l)
		}
	}
}

// TestNoMetricNameOutsideTable: no Go file of the module (tests aside)
// spells a metric family's name in a string literal but metric/table.go:
// code that registers a series names its family by the table's constant,
// so a family cannot be renamed in one place and not the other, or
// registered without its row.
func TestNoMetricNameOutsideTable(t *testing.T) {
	root := ".."
	table, _ := filepath.Abs("metric/table.go")
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
					t.Errorf("%s: metric name %q written out; use its constant from transport/metric", fset.Position(b.Pos()), s)
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
	for _, d := range metric.Table {
		help[d.Name] = d.Help
	}
	var want = map[string][]string{}
	for _, f := range relay.Fallbacks() {
		want[metric.RelayFallbacksTotal] = append(want[metric.RelayFallbacksTotal], f.String())
	}
	for _, r := range relay.Rejections() {
		want[metric.RelayRejectedTotal] = append(want[metric.RelayRejectedTotal], r.String())
	}
	for _, o := range messages.ShedOutcomes() {
		want[metric.ChatAdmissionShedsTotal] = append(want[metric.ChatAdmissionShedsTotal], o.String())
	}
	for family, names := range want {
		for _, n := range names {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(help[family]) {
				t.Errorf("%s: help %q does not name reason %s", family, help[family], n)
			}
		}
	}
}
