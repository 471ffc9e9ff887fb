package edge

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestEdgeImportsNoActor: neither the edge nor anything of the module it
// imports, however indirectly, is an actor package, transport or the
// operator APIs (which hold actor handles): the edge is the front door
// only, and what it needs of the gateway it declares as ports.
func TestEdgeImportsNoActor(t *testing.T) {
	const module = "github.com/omniroute/gateway"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // package → who imports it
	var walk func(path, from string)
	walk = func(path, from string) {
		if _, ok := seen[path]; ok {
			return
		}
		seen[path] = from
		if strings.HasPrefix(path, module+"/actors/") || path == module+"/transport" || path == module+"/transport/ops" {
			t.Errorf("the edge imports %s (through %s)", path, from)
			return
		}
		pkg, err := build.Default.ImportDir(filepath.Join(root, strings.TrimPrefix(path, module)), 0)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				walk(imp, path)
			}
		}
	}
	walk(module+"/transport/edge", "")
	if len(seen) < 3 {
		t.Fatalf("the walk saw only %v", seen)
	}
}
