package testutil

import (
	"syscall"
	"testing"
	"time"
)

// CPUPerOp reports, when the returned function runs (defer it before the
// benchmark's loop), the process's CPU time (user and system) per
// operation as "cpu-ns/op": on a machine shared with other work the wall
// time per operation measures the neighbours too.
func CPUPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}
