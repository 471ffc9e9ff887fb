// Package archcheck checks the architecture's rules against the module:
// docs/architecture.md's table of rooms has one row for every package and
// none for a package that is gone (a newcomer finds a concern by its room
// only if the table is whole), and the import rules hold.
package archcheck

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

const module = "github.com/omniroute/gateway"

// row is a line of the rooms table: its first cell is a package path.
var row = regexp.MustCompile("^\\| `([^`]+)` \\|")

func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := gosource.Root(t)
	pkgs := map[string]bool{}
	for _, p := range list(t, root) {
		pkgs[p.path] = true
	}
	if !pkgs["internal/archcheck"] {
		t.Fatalf("go list did not list this package: %v", pkgs)
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

// maxOwnImports is how many of the module's own packages one package may
// import; only the composition root, which wires them all, may import more.
const maxOwnImports = 15

// compositionRoot is the package allowed more: the core of the
// composition root, which composes the stage packages into the pipeline
// and implements their ports on the actor handles (docs/architecture.md).
const compositionRoot = "transport"

// TestOneRootImportsMuch: no package of the product but the composition
// root imports more than maxOwnImports of the module's own packages (bench/
// and the test-only packages aside, which drive everything by design). A
// second one is a room that took on another's concern.
func TestOneRootImportsMuch(t *testing.T) {
	var over []string
	for _, p := range list(t, gosource.Root(t)) {
		if strings.HasPrefix(p.path, "bench") || strings.HasPrefix(p.path, "cmd/omniroute-bench") || p.testOnly {
			continue
		}
		if n := len(p.own); n > maxOwnImports && p.path != compositionRoot {
			over = append(over, fmt.Sprintf("%s (%d)", p.path, n))
		}
	}
	if len(over) > 0 {
		t.Errorf("%d packages import more than %d of the module's own packages: %s; only the composition root (%s) may: move what they wire into it, or give them ports", len(over), maxOwnImports, strings.Join(over, ", "), compositionRoot)
	}
}

type pkg struct {
	path     string   // relative to the module
	own      []string // the module's packages it imports (non-test files)
	testOnly bool     // it has test files only
}

// list runs go list over the module.
func list(t *testing.T, root string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{len .GoFiles}} {{join .Imports " "}}`, module+"/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("go list printed %q", line)
		}
		p := pkg{path: rel(f[0]), testOnly: f[1] == "0"}
		for _, imp := range f[2:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				p.own = append(p.own, rel(imp))
			}
		}
		ps = append(ps, p)
	}
	return ps
}

func rel(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}
