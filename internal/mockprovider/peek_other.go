//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package mockprovider

import (
	"net"
	"syscall"
)

// rawConnOf returns nil here: without a non-consuming peek the mock only
// notices departed clients through write errors while streaming.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func peerClosed(syscall.RawConn) bool { return false }
