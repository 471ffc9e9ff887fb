//go:build linux

package services

import (
	"bytes"
	"fmt"
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

// listenerOwnedByGroup reports whether a socket listening on TCP port
// belongs to a member of process group pgid: the sockets in LISTEN state
// on that port are read from /proc/net/tcp and tcp6, and each member's
// file descriptors are looked up for them. known is false when /proc
// cannot tell (no listener found, or nothing readable).
func listenerOwnedByGroup(port, pgid int) (owned, known bool) {
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return false, false
	}
	d, err := os.Open("/proc")
	if err != nil {
		return false, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false, false
	}
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if _, pg, ok := procStat(n); !ok || pg != pgid {
			continue
		}
		fds, err := os.ReadDir("/proc/" + n + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink("/proc/" + n + "/fd/" + fd.Name())
			if err == nil && inodes[link] {
				return true, true
			}
		}
	}
	return false, true
}

// listeningInodes returns "socket:[inode]" for every socket in LISTEN
// state on port, IPv4 and IPv6.
func listeningInodes(port int) map[string]bool {
	out := map[string]bool{}
	want := []byte(fmt.Sprintf(":%04X", port))
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n"))[1:] {
			// sl local rem st tx:rx tr:when retr uid timeout inode ...
			fields := bytes.Fields(line)
			if len(fields) < 10 || !bytes.HasSuffix(fields[1], want) || string(fields[3]) != "0A" {
				continue
			}
			out["socket:["+string(fields[9])+"]"] = true
		}
	}
	return out
}

// acceptingInodes returns "socket:[inode]" for every socket in LISTEN
// state that accepts TCP connections to 127.0.0.1:port: bound to
// 127.0.0.1, to 0.0.0.0, to [::] (dual stack) or to ::ffff:127.0.0.1.
// It asks the kernel's socket diagnostics (diag_linux.go), else reads
// /proc/net/tcp and tcp6; ok is false when neither can be read.
func acceptingInodes(port int) (inodes []string, ok bool) {
	if inodes, ok := diagListeners(port); ok {
		return inodes, true
	}
	return procListeners(port)
}

// procListeners is acceptingInodes read from /proc/net/tcp and tcp6.
func procListeners(port int) (inodes []string, ok bool) {
	suffix := fmt.Sprintf(":%04X", port)
	accepts := map[string]bool{
		"0100007F" + suffix: true, "00000000" + suffix: true,
		"00000000000000000000000000000000" + suffix: true, "0000000000000000FFFF00000100007F" + suffix: true,
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		ok = true
		for _, line := range bytes.Split(b, []byte("\n"))[1:] {
			// sl local rem st tx:rx tr:when retr uid timeout inode ...
			fields := bytes.Fields(line)
			if len(fields) < 10 || string(fields[3]) != "0A" || !accepts[string(fields[1])] {
				continue
			}
			inodes = append(inodes, "socket:["+string(fields[9])+"]")
		}
	}
	return inodes, ok
}

// groupHolds reports whether every one of want is an open file of a
// member of process group pgid. The leader's descriptors are read first
// (a service's listener is almost always its own); only when some are
// not found there are the other members looked for in /proc.
func groupHolds(pgid int, want []string) bool {
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	take := func(pid string) {
		fds, err := os.ReadDir("/proc/" + pid + "/fd")
		if err != nil {
			return
		}
		for _, fd := range fds {
			if link, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); err == nil {
				delete(left, link)
			}
		}
	}
	leader := strconv.Itoa(pgid)
	if _, pg, ok := procStat(leader); ok && pg == pgid {
		take(leader)
	}
	if len(left) == 0 {
		return true
	}
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false
	}
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' || n == leader {
			continue
		}
		if _, pg, ok := procStat(n); ok && pg == pgid {
			take(n)
			if len(left) == 0 {
				return true
			}
		}
	}
	return false
}
