package archcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFields is how many fields one struct may have: a type holding more is
// several concerns' state in one place (the pipeline's call had 71).
const maxFields = 30

// TestNoStructOver30Fields: no struct type of the module, tests included,
// has more than maxFields fields (an embedded field counts as one; bench/
// aside, whose reports are flat tables by design).
func TestNoStructOver30Fields(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "bench" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		seen++
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			if n := countFields(st); n > maxFields {
				t.Errorf("%s: struct %s has %d fields, more than %d: group its state by the concern that reads it", fset.Position(ts.Pos()), ts.Name.Name, n, maxFields)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 100 {
		t.Fatalf("read %d Go files under %s: the walk missed the module", seen, root)
	}
}

func countFields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(len(f.Names), 1)
	}
	return n
}
