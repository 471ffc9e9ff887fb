package sqlite

import (
	"testing"

	"go.uber.org/goleak"
)

// database/sql's pool goroutine must be gone once every test closed its
// database.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
