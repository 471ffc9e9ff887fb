// Package sqlitetest opens throwaway SQLite stores for the tests of the
// packages that keep keys or the request log in one.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"github.com/omniroute/gateway/internal/store/sqlite"
)

// Open is a fresh database in the test's temporary directory, closed when
// the test ends.
func Open(t testing.TB) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
