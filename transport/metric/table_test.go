package metric

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestMetricTableComplete checks every entry of the metric table against
// Prometheus' naming rules, so a new entry cannot be half filled in.
func TestMetricTableComplete(t *testing.T) {
	name := regexp.MustCompile(`^omniroute_[a-z0-9]+(_[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, d := range Table {
		switch {
		case !name.MatchString(d.Name):
			t.Errorf("%q: not an omniroute_ snake_case name", d.Name)
		case seen[d.Name]:
			t.Errorf("%s: listed twice", d.Name)
		case len(d.Help) < 10 || strings.ContainsAny(d.Help, "\n\\`") || !strings.HasSuffix(d.Help, "."):
			t.Errorf("%s: help %q must be one plain sentence", d.Name, d.Help)
		case (d.Kind == Counter) != strings.HasSuffix(d.Name, "_total"):
			t.Errorf("%s: counters, and only counters, end in _total", d.Name)
		case d.Kind == Histogram && !strings.HasSuffix(d.Name, "_seconds") && !strings.HasSuffix(d.Name, "_bytes"):
			t.Errorf("%s: a histogram's name ends in its base unit", d.Name)
		}
		for _, abbr := range []string{"_ms", "_us", "_ns", "_kb", "_mb", "_millis", "_milliseconds"} {
			if strings.Contains(d.Name+"_", abbr+"_") {
				t.Errorf("%s: spell the base unit out (_seconds, _bytes)", d.Name)
			}
		}
		seen[d.Name] = true
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
	WriteExposition(&b, []byte(in))
	want := "# HELP omniroute_admission_admitted_total Admission grants.\n# TYPE omniroute_admission_admitted_total counter\nomniroute_admission_admitted_total 3\n" +
		"# HELP go_cgo_calls_total " + Help("go_cgo_calls_total") + "\n# TYPE go_cgo_calls_total counter\ngo_cgo_calls_total 1\n" +
		"# HELP process_io_read_bytes_total " + Help("process_io_read_bytes_total") + "\n# TYPE process_io_read_bytes_total counter\nprocess_io_read_bytes_total 7\n" +
		"go_cgo_calls_countx 2"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
