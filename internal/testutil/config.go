package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteConfig writes js as a gateway config file (omniroute.json) in a
// directory of the test's own, removed when it ends, and returns its path:
// what OMNIROUTE_CONFIG names for a gateway the test starts.
func WriteConfig(t testing.TB, js string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "omniroute.json")
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatalf("writing the config file: %v", err)
	}
	return path
}
