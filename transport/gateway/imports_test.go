package gateway_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestActorsImportNoFrontEnd: no package under actors/ imports, however
// indirectly, the front end (transport and everything below it, this
// composition root included) or a binary under cmd/. Actors are composed
// from above; the root is the one package that imports both sides.
func TestActorsImportNoFrontEnd(t *testing.T) {
	const module = "github.com/omniroute/gateway"
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
		seen := map[string]bool{}
		var walk func(path, from string)
		walk = func(path, from string) {
			if seen[path] {
				return
			}
			seen[path] = true
			rel := strings.TrimPrefix(path, module)
			if rel == "/transport" || strings.HasPrefix(rel, "/transport/") || strings.HasPrefix(rel, "/cmd/") {
				t.Errorf("%s imports the front end's %s (through %s)", start, path, from)
				return
			}
			pkg, err := build.Default.ImportDir(filepath.Join(root, rel), 0)
			if err != nil {
				t.Fatalf("reading %s: %v", path, err)
			}
			for _, imp := range pkg.Imports {
				if strings.HasPrefix(imp, module+"/") {
					walk(imp, path)
				}
			}
		}
		walk(start, start)
	}
}
