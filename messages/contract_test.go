package messages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

// crashFirst reports the actors of file whose Receive the checks of this
// package cannot read (no type switch on the context's Message()) and,
// when the file is under actors/ (inActors), those whose message switch
// does not take Crash first, so the restart tests reach every actor.
func crashFirst(fset *token.FileSet, file *ast.File, inActors bool) []string {
	msgs := ""
	for name, path := range importsOf(file) {
		if path == module+"/messages" {
			msgs = name
		}
	}
	var out []string
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Receive" || fn.Body == nil || !takesContext(fn) {
			continue
		}
		where := fset.Position(fn.Pos()).String() + ": " + receiverName(fn) + ".Receive"
		var sw *ast.TypeSwitchStmt
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if s, ok := n.(*ast.TypeSwitchStmt); ok && sw == nil && isMessageCall(switchSubject(s)) {
				sw = s
			}
			return sw == nil
		})
		switch {
		case sw == nil:
			out = append(out, where+" has no type switch on its context's Message(): the message checks cannot read it")
		case inActors && !firstIsCrash(sw, msgs):
			out = append(out, where+" does not take messages.Crash first: the restart tests cannot crash it")
		}
	}
	return out
}

// takesContext reports whether fn takes one parameter, of a type named
// Context from another package (actor.Context).
func takesContext(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	s, ok := ps[0].Type.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "Context"
}

func receiverName(fn *ast.FuncDecl) string {
	e := fn.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

func firstIsCrash(sw *ast.TypeSwitchStmt, msgs string) bool {
	if msgs == "" || len(sw.Body.List) == 0 {
		return false
	}
	c := sw.Body.List[0].(*ast.CaseClause)
	if len(c.List) == 0 {
		return false
	}
	s, ok := c.List[0].(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == msgs && s.Sel.Name == "Crash"
}

// TestEveryActorTakesCrash: every actor of the module has a message switch
// the boundary check reads, and every actor under actors/ takes Crash
// first (what Crash's doc promises the restart tests).
func TestEveryActorTakesCrash(t *testing.T) {
	fset, files := moduleCode(t)
	actors := 0
	for _, cf := range files {
		for _, m := range crashFirst(fset, cf.AST, strings.HasPrefix(cf.Dir, "actors/")) {
			t.Error(m)
		}
		for _, d := range cf.AST.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name == "Receive" && takesContext(fn) {
				actors++
			}
		}
	}
	if actors < 15 { // 20 when this test was written
		t.Fatalf("found %d actors: the walk missed some", actors)
	}
}

// TestCrashFirstFindsEachKind: the check reports an actor that takes Crash
// second and one whose switch it cannot read, and accepts one that takes it
// first; outside actors/ only the unreadable one is reported.
func TestCrashFirstFindsEachKind(t *testing.T) {
	fset, f := parseCase(t, "crash")
	for _, c := range []struct {
		inActors bool
		want     []string
	}{
		{true, []string{"second.Receive does not take messages.Crash first", "unreadable.Receive has no type switch"}},
		{false, []string{"unreadable.Receive has no type switch"}},
	} {
		got := crashFirst(fset, f, c.inActors)
		if len(got) != len(c.want) {
			t.Fatalf("inActors %v: reported %d, want %d:\n%s", c.inActors, len(got), len(c.want), strings.Join(got, "\n"))
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("inActors %v: report %d is %q, want it to say %q", c.inActors, i, got[i], w)
			}
		}
	}
}

// contract is what this package declares: its exported types, which of
// them travel between members (wire), and the type each exported constant
// and function stands for (a package that uses messages.ShedQueueTimeout
// or messages.ParseQuotaDimension uses IngestOutcome or QuotaDimension).
type contract struct {
	types  []string
	wire   map[string]bool
	stands map[string][]string // a constant's or function's name → its types
}

// readContract parses this package's non-test files.
func readContract(t *testing.T) contract {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	c := contract{wire: map[string]bool{"ClusterMessage": true, "ClusterKind": true}, stands: map[string][]string{}}
	fields := map[string][]string{} // a struct type → the named types of its fields
	var named func(e ast.Node) []string
	named = func(e ast.Node) []string {
		switch x := e.(type) {
		case *ast.Ident:
			if x.IsExported() {
				return []string{x.Name}
			}
		case *ast.StarExpr:
			return named(x.X)
		case *ast.ArrayType:
			return named(x.Elt)
		case *ast.FieldList:
			var out []string
			if x != nil {
				for _, f := range x.List {
					out = append(out, named(f.Type)...)
				}
			}
			return out
		}
		return nil
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				typ := "" // a constant without type or value takes the one above's
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							c.types = append(c.types, s.Name.Name)
							if st, ok := s.Type.(*ast.StructType); ok {
								fields[s.Name.Name] = named(st.Fields)
							}
						}
					case *ast.ValueSpec:
						if d.Tok != token.CONST {
							continue
						}
						if s.Type != nil {
							typ = ""
							if ts := named(s.Type); len(ts) == 1 {
								typ = ts[0]
							}
						} else if len(s.Values) > 0 {
							typ = ""
						}
						for _, n := range s.Names {
							if typ != "" && n.IsExported() {
								c.stands[n.Name] = []string{typ}
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					c.stands[d.Name.Name] = named(d.Type.Results)
				} else if d.Recv != nil && d.Name.Name == "ClusterKind" {
					c.wire[named(d.Recv)[0]] = true // a ClusterMessage
				}
			}
		}
	}
	// What a cluster message carries travels with it.
	for grew := true; grew; {
		grew = false
		for w := range c.wire {
			for _, ft := range fields[w] {
				if !c.wire[ft] && slices.Contains(c.types, ft) {
					c.wire[ft], grew = true, true
				}
			}
		}
	}
	sort.Strings(c.types)
	return c
}

// typeUsers maps each of this package's types to the packages of the
// module (other than this one) whose non-test code names it, its
// constants or its functions.
func typeUsers(files []gosource.File, c contract) map[string]map[string]bool {
	users := map[string]map[string]bool{}
	for _, cf := range files {
		if cf.Dir == "messages" {
			continue
		}
		name := ""
		for n, path := range importsOf(cf.AST) {
			if path == module+"/messages" {
				name = n
			}
		}
		if name == "" {
			continue
		}
		ast.Inspect(cf.AST, func(n ast.Node) bool {
			s, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := s.X.(*ast.Ident); !ok || x.Name != name {
				return true
			}
			types := c.stands[s.Sel.Name]
			if slices.Contains(c.types, s.Sel.Name) {
				types = []string{s.Sel.Name}
			}
			for _, typ := range types {
				if users[typ] == nil {
					users[typ] = map[string]bool{}
				}
				users[typ][cf.Dir] = true
			}
			return true
		})
	}
	return users
}

// notShared names the types of this package that do not meet the rule
// below, and why they belong here all the same. An entry that no longer
// applies fails the test, so the list stays true.
var notShared = map[string]string{
	"ClusterKind": "the codec's tag: receivers print a message's kind (its ClusterKind method, in their refusals) and never need to name the type",
}

// TestEveryTypeIsShared: one source of truth, complete. Every type here
// crosses a boundary: at least two packages of the module use it (a sender
// and a receiver, or the packages that speak its vocabulary), or it
// travels between members (a cluster message, what one carries, and the
// codec's own types), where the sender and the receiver may be the same
// package on two members and one user suffices. A type only one package
// uses belongs in that package, unexported.
func TestEveryTypeIsShared(t *testing.T) {
	_, files := moduleCode(t)
	c := readContract(t)
	users := typeUsers(files, c)
	if len(c.types) < 15 || len(c.wire) < 7 {
		t.Fatalf("read %d types, %d of the wire: the parse missed the package", len(c.types), len(c.wire))
	}
	for _, typ := range c.types {
		need := 2
		if c.wire[typ] {
			need = 1
		}
		var pkgs []string
		for p := range users[typ] {
			pkgs = append(pkgs, p)
		}
		sort.Strings(pkgs)
		why, excused := notShared[typ]
		switch {
		case len(pkgs) < need && !excused:
			t.Errorf("messages.%s is used by %d package(s) %v, needs %d: move it to the one that uses it (unexported), or say in notShared why it stays", typ, len(pkgs), pkgs, need)
		case len(pkgs) >= need && excused:
			t.Errorf("messages.%s is in notShared (%q) but %v use it: remove the entry", typ, why, pkgs)
		}
	}
	for typ := range notShared {
		if !slices.Contains(c.types, typ) {
			t.Errorf("notShared names %s, which this package does not declare", typ)
		}
	}
}
