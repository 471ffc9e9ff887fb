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
	// recv is recvmsg bound once (wrapRx), and buf, n, oobn and err its
	// argument and results: a closure made per read escaped to the heap
	// with the variables it wrote, three allocations per armed read.
	recv    func(fd uintptr) bool
	buf     []byte
	n, oobn int
	err     error
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
	rc := &rxConn{TCPConn: tc, raw: raw}
	rc.recv = rc.recvmsg
	return rc
}

// recvmsg reads into c.buf with its receive time; it is the raw
// connection's read callback (false: not ready, wait for the poller).
func (c *rxConn) recvmsg(fd uintptr) bool {
	for {
		c.n, c.oobn, _, _, c.err = syscall.Recvmsg(int(fd), c.buf, c.oob[:], 0)
		if c.err != syscall.EINTR {
			return c.err != syscall.EAGAIN
		}
	}
}

func (c *rxConn) Read(p []byte) (int, error) {
	if !c.armed || len(p) == 0 {
		return c.TCPConn.Read(p)
	}
	if c.hold != nil {
		c.hold()
	}
	// The results are cleared first: the raw read returns without calling
	// recv when the deadline has already passed, and the last read's count
	// would then stand for bytes this one never read.
	c.buf, c.n, c.oobn, c.err = p, 0, 0, nil
	err := c.raw.Read(c.recv)
	n, oobn, rerr := c.n, c.oobn, c.err
	c.buf, c.err = nil, nil // keep neither the caller's buffer nor the error
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
