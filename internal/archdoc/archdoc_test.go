// Package archdoc checks docs/architecture.md against the module: its table
// of rooms has one row for every package, and no row for a package that is
// gone. A newcomer finds a concern by its room only if the table is whole.
package archdoc

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/omniroute/gateway"

// row is a line of the rooms table: its first cell is a package path.
var row = regexp.MustCompile("^\\| `([^`]+)` \\|")

func TestArchitectureNamesEveryPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p, module), "/")] = true
	}
	if !pkgs["internal/archdoc"] {
		t.Fatalf("go list did not list this package: %q", out)
	}
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			if prev, dup := rows[m[1]]; dup {
				t.Errorf("docs/architecture.md:%d: a second row for %s (the first is on line %d)", line, m[1], prev)
			}
			rows[m[1]] = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for p := range pkgs {
		if _, ok := rows[p]; !ok {
			t.Errorf("package %s has no row in docs/architecture.md's table of rooms: add one (what it owns, what it imports)", p)
		}
	}
	for p, line := range rows {
		if !pkgs[p] {
			t.Errorf("docs/architecture.md:%d: a row for %s, which is not a package of the module: remove or rename it", line, p)
		}
	}
}
