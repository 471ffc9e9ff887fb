package archcheck

import (
	"go/ast"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

// maxFields is how many fields one struct may have: a type holding more is
// several concerns' state in one place (the pipeline's call had 71).
const maxFields = 30

// TestNoStructOver30Fields: no struct type of the module, tests included,
// has more than maxFields fields (an embedded field counts as one; bench/
// aside, whose reports are flat tables by design).
func TestNoStructOver30Fields(t *testing.T) {
	fset, files := gosource.Parse(t, gosource.Options{Tests: true, Skip: func(rel string, dir bool) bool { return dir && rel == "bench" }})
	for _, cf := range files {
		f := cf.AST
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
	}
}

func countFields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(len(f.Names), 1)
	}
	return n
}
