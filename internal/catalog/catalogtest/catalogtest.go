// Package catalogtest builds a routing catalog from a config file's JSON
// for the tests of the packages that read one (the pipeline's stages, the
// models list), so each test states only the providers and models it
// needs.
package catalogtest

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
)

// Build decodes js as a config file and builds its catalog, every
// connection's key environment variable reading "k"; a file or catalog
// error fails the test.
func Build(t testing.TB, js string) *catalog.Catalog {
	t.Helper()
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Build(f, func(string) (string, bool) { return "k", true })
	if err != nil {
		t.Fatal(err)
	}
	return cat
}
