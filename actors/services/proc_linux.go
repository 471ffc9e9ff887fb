//go:build linux

package services

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts the child in its own process group, and asks the kernel
// to SIGKILL it if the spawning thread (the spawner's locked thread, which
// lives as long as the gateway) dies: the last resort when the gateway is
// killed without running its shutdown. Grandchildren are not covered by
// Pdeathsig; a clean shutdown kills the whole group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupHasLiveMembers scans /proc for processes of group pgid that are not
// zombies. kill(-pgid, 0) would also count zombies, which never go away
// when the container's init does not reap orphans.
func groupHasLiveMembers(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		state, pg, ok := procStat(n)
		if ok && pg == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// procStat reads the state and process group of /proc/<pid>/stat.
func procStat(pid string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	state, _, ok := procStat(strconv.Itoa(pid))
	return ok && state != 'Z' && state != 'X'
}

// killGroup SIGKILLs process group pgid (last resort at shutdown).
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
