//go:build linux

package upstream

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// rxConn is a provider connection that can tell when the kernel received
// the bytes it reads (the socket's SO_TIMESTAMPNS receive time). While an
// exchange has it armed (from the request written to the answer's first
// bytes), each read goes through recvmsg and records that time and the
// moment the read returned: the provider's time is then write → kernel
// receive, without the gateway's own wait for a CPU to read it (which a
// busy gateway, or a busy machine, adds to every answer and which grows
// and shrinks with the load like a queue), and that wait is measured too.
// Disarmed, reads are the TCP connection's own.
type rxConn struct {
	*net.TCPConn
	raw   syscall.RawConn
	armed bool
	// rx and at are the last armed read's kernel receive time and when
	// the read returned; zero when none happened since arm.
	rx, at time.Time
	oob    [64]byte
	// hold, when set, runs before each armed read (tests: a gateway too
	// busy to read).
	hold func()
}

// wrapRx returns c as an rxConn when the kernel gives receive times for
// it, else c unchanged.
func wrapRx(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c
	}
	return &rxConn{TCPConn: tc, raw: raw}
}

func (c *rxConn) Read(p []byte) (int, error) {
	if !c.armed || len(p) == 0 {
		return c.TCPConn.Read(p)
	}
	if c.hold != nil {
		c.hold()
	}
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, c.oob[:], 0)
			if rerr != syscall.EINTR {
				return rerr != syscall.EAGAIN
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if err == syscall.EAGAIN || n < 0 {
			n = 0
		}
		return n, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.at = time.Now()
	if rx, ok := rxTime(c.oob[:oobn]); ok {
		c.rx = rx
	} else {
		c.rx = c.at
	}
	return n, nil
}

// rxTime finds the SCM_TIMESTAMPNS control message in oob.
func rxTime(oob []byte) (time.Time, bool) {
	const hdr = int(unsafe.Sizeof(syscall.Cmsghdr{}))
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return time.Time{}, false
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l-hdr >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			return time.Unix(int64(ts.Sec), int64(ts.Nsec)), true
		}
		oob = oob[min(cmsgAlign(l), len(oob)):]
	}
	return time.Time{}, false
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}
