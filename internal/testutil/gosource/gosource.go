// Package gosource is test only: the module's Go files, parsed, for the
// guard tests that read the source (an error code, a dialect's literal or a
// message type spelled outside its table, a struct grown too large). One
// walk serves them all, so they skip the same directories and agree on
// what the module's files are.
package gosource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MinFiles is how many Go files a walk of the module reads at the least:
// fewer means it started in the wrong place, and a guard that read
// nothing would pass without checking anything.
const MinFiles = 100

// File is one parsed Go file.
type File struct {
	// Rel is its path from the module root, with slashes ("actors/keys/keys.go").
	Rel string
	// Dir is its package's directory from the module root ("actors/keys").
	Dir string
	AST *ast.File
}

// Root returns the module's root directory: the nearest directory at or
// above the working directory (a test's package directory) with a go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod at or above the working directory")
		}
		dir = up
	}
}

// Options says which files a walk parses besides the module's non-test
// Go files outside hidden directories, testdata and node_modules.
type Options struct {
	// Tests parses _test.go files too.
	Tests bool
	// Skip, when set, leaves out a directory (and all below it) or a file,
	// given its path from the module root with slashes.
	Skip func(rel string, dir bool) bool
}

// Parse parses the module's Go files that o selects, in walk order,
// failing t when one cannot be read or parsed or when fewer than MinFiles
// were.
func Parse(t testing.TB, o Options) (*token.FileSet, []File) {
	t.Helper()
	root := Root(t)
	fset := token.NewFileSet()
	var files []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if n := d.Name(); strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || (o.Skip != nil && o.Skip(rel, true)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || (!o.Tests && strings.HasSuffix(rel, "_test.go")) || (o.Skip != nil && o.Skip(rel, false)) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, File{Rel: rel, Dir: filepath.ToSlash(filepath.Dir(rel)), AST: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < MinFiles {
		t.Fatalf("parsed %d Go files under %s: the walk missed the module", len(files), root)
	}
	return fset, files
}
