package gateway_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// module is the module path the import rules below are about.
const module = "github.com/omniroute/gateway"

// walkImports visits start and every package of the module it imports,
// however indirectly, once each, reading the sources under the module
// root; a package forbidden reports (by its path below the module, "/x/y")
// is an error naming the package it was imported through, and is not
// walked further. It returns the packages visited.
func walkImports(t *testing.T, start string, forbidden func(rel string) bool, what string) map[string]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(path, from string)
	walk = func(path, from string) {
		if seen[path] {
			return
		}
		seen[path] = true
		rel := strings.TrimPrefix(path, module)
		if forbidden(rel) {
			t.Errorf("%s imports %s %s (through %s)", start, what, path, from)
			return
		}
		pkg, err := build.Default.ImportDir(filepath.Join(root, rel), 0)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				walk(imp, path)
			}
		}
	}
	walk(start, start)
	return seen
}

// TestActorsImportNoFrontEnd: no package under actors/ imports, however
// indirectly, the front end (transport and everything below it, this
// composition root included) or a binary under cmd/. Actors are composed
// from above; the root is the one package that imports both sides.
func TestActorsImportNoFrontEnd(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var actorPkgs []string
	err = filepath.WalkDir(filepath.Join(root, "actors"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if _, err := build.Default.ImportDir(p, 0); err == nil {
			rel, _ := filepath.Rel(root, p)
			actorPkgs = append(actorPkgs, module+"/"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(actorPkgs) < 10 {
		t.Fatalf("found only %d packages under actors/: %v", len(actorPkgs), actorPkgs)
	}
	for _, start := range actorPkgs {
		walkImports(t, start, func(rel string) bool {
			return rel == "/transport" || strings.HasPrefix(rel, "/transport/") || strings.HasPrefix(rel, "/cmd/")
		}, "the front end's")
	}
}

// TestEdgeImportsNoActor: neither the edge nor anything of the module it
// imports, however indirectly, is an actor package, transport or the
// operator APIs (which hold actor handles): the edge is the front door
// only, and what it needs of the gateway it declares as ports.
func TestEdgeImportsNoActor(t *testing.T) {
	seen := walkImports(t, module+"/transport/edge", func(rel string) bool {
		return strings.HasPrefix(rel, "/actors/") || rel == "/transport" || rel == "/transport/ops"
	}, "an actor-side package,")
	if len(seen) < 3 {
		t.Fatalf("the walk saw only %v", seen)
	}
}
