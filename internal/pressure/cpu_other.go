//go:build !unix

package pressure

// processCPU is unknown where getrusage is missing: the used-up-CPU rule
// then relies on the cgroup's throttling alone.
func processCPU() int64 { return -1 }
