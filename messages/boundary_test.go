package messages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

// module is this module's path: a message type of the module's own may
// live in this package or be private to its receiver's package.
const module = "github.com/omniroute/gateway"

// foreignMessages are the packages outside the module whose types an
// actor may receive: protoactor's lifecycle and cluster messages, and the
// cluster's carrier (internal/clusterwire unwraps it).
var foreignMessages = map[string]bool{
	"github.com/asynkron/protoactor-go/actor":           true,
	"github.com/asynkron/protoactor-go/cluster":         true,
	"google.golang.org/protobuf/types/known/wrapperspb": true,
}

// misplaced reports the message types file's actors receive that cross a
// package boundary but live outside this package: a type another package
// of the module declares, or an exported type of the receiver's own
// package (which another package could construct and send). It reads the
// case labels of type switches on an actor context's Message() and the
// types asserted on it.
func misplaced(fset *token.FileSet, file *ast.File) []string {
	imports := importsOf(file)
	var out []string
	check := func(e ast.Expr) {
		for {
			switch x := e.(type) {
			case *ast.StarExpr:
				e = x.X
				continue
			case *ast.IndexExpr: // a generic message: its type, not its argument
				e = x.X
				continue
			case *ast.IndexListExpr:
				e = x.X
				continue
			case *ast.Ident:
				if x.IsExported() {
					out = append(out, fset.Position(x.Pos()).String()+": "+x.Name+" is exported from its actor's package: a message others send belongs in messages, one only this package sends is unexported")
				}
			case *ast.SelectorExpr:
				pkg, _ := x.X.(*ast.Ident)
				if pkg == nil {
					return
				}
				path := imports[pkg.Name]
				if path == module+"/messages" || foreignMessages[path] {
					return
				}
				out = append(out, fset.Position(x.Pos()).String()+": "+pkg.Name+"."+x.Sel.Name+" crosses from "+path+": move it to messages")
			}
			return
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSwitchStmt:
			if !isMessageCall(switchSubject(n)) {
				return true
			}
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					check(e)
				}
			}
		case *ast.TypeAssertExpr:
			if n.Type != nil && isMessageCall(n.X) {
				check(n.Type)
			}
		}
		return true
	})
	return out
}

// importsOf maps the names file gives its imports to their paths.
func importsOf(file *ast.File) map[string]string {
	imports := map[string]string{}
	for _, im := range file.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	return imports
}

// isMessageCall reports whether e is a call of a Message method without
// arguments: an actor context's Message().
func isMessageCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "Message"
}

// switchSubject is what a type switch switches on (x in x.(type)).
func switchSubject(s *ast.TypeSwitchStmt) ast.Expr {
	var e ast.Expr
	switch a := s.Assign.(type) {
	case *ast.AssignStmt:
		e = a.Rhs[0]
	case *ast.ExprStmt:
		e = a.X
	}
	if ta, ok := e.(*ast.TypeAssertExpr); ok {
		return ta.X
	}
	return nil
}

var moduleOnce struct {
	sync.Once
	fset  *token.FileSet
	files []gosource.File
}

// moduleCode parses the module's non-test Go files, once for every test
// of this package.
func moduleCode(t *testing.T) (*token.FileSet, []gosource.File) {
	t.Helper()
	m := &moduleOnce
	m.Do(func() { m.fset, m.files = gosource.Parse(t, gosource.Options{}) })
	if m.files == nil {
		t.Fatal("the module's code could not be parsed (see the first test that asked)")
	}
	return m.fset, m.files
}

// TestMessagesCrossingPackagesLiveHere walks the module's non-test code
// and fails on every message an actor receives that crosses a package
// boundary from outside this package.
func TestMessagesCrossingPackagesLiveHere(t *testing.T) {
	fset, files := moduleCode(t)
	for _, cf := range files {
		for _, m := range misplaced(fset, cf.AST) {
			t.Error(m)
		}
	}
}

// parseCase parses testdata/boundary/<name>.go.txt, a file of actors a
// check's own test feeds it.
func parseCase(t *testing.T, name string) (*token.FileSet, *ast.File) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "boundary", name+".go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name+".go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}

// TestMisplacedFindsEachKind: the check reports a message from another
// package of the module and an exported one of the receiver's own, and
// accepts this package's, protoactor's, the carrier and private ones.
func TestMisplacedFindsEachKind(t *testing.T) {
	fset, f := parseCase(t, "actor")
	got := misplaced(fset, f)
	want := []string{"quota.HeaderObserved crosses", "Settled is exported", "keys.Snapshot crosses", "tenantlimit.Spec crosses from github.com/omniroute/gateway/actors/tenantlimit"}
	if len(got) != len(want) {
		t.Fatalf("reported %d, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("report %d is %q, want it to say %q", i, got[i], w)
		}
	}
}
