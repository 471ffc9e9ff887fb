//go:build !linux

package loadgen

const defaultTimerSlackNS = 0

func setTimerSlack(uintptr) {}
