//go:build linux || darwin || freebsd || netbsd || openbsd

package mockprovider

import (
	"errors"
	"net"
	"syscall"
)

func rawConnOf(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// peerClosed peeks one byte without blocking or consuming it: 0 bytes means
// the peer sent FIN, EAGAIN means the connection is open and idle, pending
// data means it is open, and any other error (ECONNRESET…) means it is gone.
// Control is used instead of Read because Read would honour fasthttp's read
// deadline and fail once it passes during a long wait.
func peerClosed(rc syscall.RawConn) bool {
	gone := false
	err := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			gone = true
		}
	})
	return err != nil || gone
}
