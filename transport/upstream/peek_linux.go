//go:build linux

package upstream

import (
	"net"
	"syscall"
)

// peerClosed reports whether the peer of an idle connection has closed it
// (or reset it): a non-blocking, non-consuming read sees end of stream or an
// error. An idle HTTP/1.1 connection has nothing else to read.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
		return true
	})
	return closed
}
