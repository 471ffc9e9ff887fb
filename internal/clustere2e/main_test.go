package clustere2e

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, started again by a test with strangerEnv
// set, a stranger (stranger_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(strangerEnv) != "" {
		os.Exit(runStranger())
	}
	os.Exit(m.Run())
}
