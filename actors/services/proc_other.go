//go:build unix && !linux

package services

import "syscall"

// sysProcAttr puts the child in its own process group. Pdeathsig is
// Linux-only; elsewhere a gateway killed without shutdown leaves children.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// groupHasLiveMembers reports whether the group still exists (zombies
// included: without /proc there is no cheap way to tell them apart).
func groupHasLiveMembers(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// processAlive reports whether pid exists.
func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// killGroup SIGKILLs process group pgid (last resort at shutdown).
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// listenerOwnedByGroup cannot tell without /proc: unknown.
func listenerOwnedByGroup(port, pgid int) (owned, known bool) { return false, false }

// acceptingInodes cannot tell without /proc.
func acceptingInodes(port int) (inodes []string, ok bool) { return nil, false }

// groupHolds cannot tell without /proc.
func groupHolds(pgid int, want []string) bool { return false }
