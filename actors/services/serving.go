package services

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Only the gateway's own child may serve a service's traffic. Two checks
// keep prompts from any other process that holds the port:
//
//   - Serving, on every routing decision: the service is running (its
//     child passed its health check) and not failing it. A stopped,
//     starting, crashed or unhealthy service's targets are not used.
//   - VerifyServer, on every new connection to the port: the service is
//     still serving and (on Linux) every socket that accepts connections
//     to 127.0.0.1:<port> belongs to the child's process group (the
//     listening sockets from the kernel's socket diagnostics, diag_linux.go;
//     their owners from /proc/<pid>/fd, cached while they stay the same). It closes
//     the moment between a child's exit and its supervisor's next status
//     (a stranger that binds the freed port at once), and a child that
//     closed its listener while a stranger took the port, which the health
//     check would only see at its next interval.
//
// A pooled connection needs neither: it was verified when dialled, and a
// connection to a process that exited is reset, never handed to another.

// ErrNotServing: the service is not running as the gateway's own child
// (VerifyServer).
var ErrNotServing = errors.New("the service is not running as this gateway's own child")

// Serving reports whether the service may be sent traffic now: running
// and not failing its health checks. It reads the published status (no
// message, no copy).
func (h *Handle) Serving() bool { return h.snap.Load().Usable() }

// ownedListeners is the last set of listening sockets found to belong to
// a child's process group: a new connection that finds the same sockets
// listening needs no scan of the child's descriptors.
type ownedListeners struct {
	pgid   int
	inodes []string
}

// VerifyServer checks, for a new connection to the service's port, that
// the process that accepts it is the gateway's own child (see above). It
// returns nil when it is, or when the system cannot tell (no /proc): the
// published status is then all there is.
func (h *Handle) VerifyServer() error {
	st := h.snap.Load()
	if !st.Usable() || st.PID == nil {
		return fmt.Errorf("%w: service %s is %s", ErrNotServing, h.spec.Name, st.State)
	}
	pgid := *st.PID
	inodes, known := acceptingInodes(h.spec.Port)
	if !known {
		return nil
	}
	if len(inodes) == 0 {
		return fmt.Errorf("%w: nothing of service %s listens on 127.0.0.1:%d", ErrNotServing, h.spec.Name, h.spec.Port)
	}
	slices.Sort(inodes)
	if c := h.owned.Load(); c != nil && c.pgid == pgid && slices.Equal(c.inodes, inodes) {
		return nil
	}
	if !groupHolds(pgid, inodes) {
		return fmt.Errorf("%w: a process outside service %s's process group %s listens on 127.0.0.1:%d", ErrNotServing, h.spec.Name, strconv.Itoa(pgid), h.spec.Port)
	}
	h.owned.Store(&ownedListeners{pgid: pgid, inodes: inodes})
	return nil
}
