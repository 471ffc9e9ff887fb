package loadgen

import "syscall"

// defaultTimerSlackNS is Linux's default timer slack for a thread.
const defaultTimerSlackNS = 50_000

// setTimerSlack sets the calling thread's timer slack (prctl
// PR_SET_TIMERSLACK); failure only costs precision.
func setTimerSlack(ns uintptr) {
	const prSetTimerSlack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, ns, 0)
}
