package ir

import (
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
)

// TestEffortScaleIsTheDialectScale: the IR's effort names are
// dialect.Efforts, the one list model tables and configs name levels
// from, in the same order.
func TestEffortScaleIsTheDialectScale(t *testing.T) {
	if len(effortNames) != len(dialect.Efforts)+1 {
		t.Fatalf("%d effort names, dialect has %d", len(effortNames)-1, len(dialect.Efforts))
	}
	for i, n := range dialect.Efforts {
		if effortNames[i+1] != n {
			t.Errorf("effort %d is %q here and %q in dialect.Efforts", i+1, effortNames[i+1], n)
		}
	}
}
