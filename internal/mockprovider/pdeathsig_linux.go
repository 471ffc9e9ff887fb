//go:build linux

package mockprovider

import (
	"os/exec"
	"syscall"
)

// setParentDeath asks the kernel to kill the child when the process that
// started it dies, so a crashed or timed-out test run leaves no mock behind.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
