//go:build unix

package pressure

import "syscall"

// processCPU is this process's user and system CPU time so far in
// microseconds (getrusage), or -1.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return (ru.Utime.Nano() + ru.Stime.Nano()) / 1000
}
