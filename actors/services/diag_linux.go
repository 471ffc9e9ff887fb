//go:build linux

package services

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"
)

// Listening sockets from the kernel's socket diagnostics (netlink
// NETLINK_SOCK_DIAG, what ss(8) uses; no privilege needed for the
// gateway's own network namespace). VerifyServer runs on every new
// connection to a service, and /proc/net/tcp lists every TCP socket of
// the machine: with thousands of connections open it took 17 ms to read
// (measured on the development VM with 5,300 sockets). A dump asked for
// the LISTEN state only walks the kernel's listening table, a few dozen
// sockets whatever the load.

const (
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG (NETLINK_INET_DIAG)
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	tcpListen        = 10 // TCP_LISTEN
	inetDiagMsgLen   = 72 // struct inet_diag_msg
)

// inetDiagReqV2 is struct inet_diag_req_v2.
type inetDiagReqV2 struct {
	family, protocol, ext, pad uint8
	states                     uint32
	id                         [48]byte // struct inet_diag_sockid: any socket
}

// diagListeners returns "socket:[inode]" for every TCP socket in LISTEN
// state that accepts connections to 127.0.0.1:port; ok is false when the
// kernel's socket diagnostics cannot be used.
func diagListeners(port int) (inodes []string, ok bool) {
	for _, family := range []uint8{syscall.AF_INET, syscall.AF_INET6} {
		got, ok := diagDump(family, port)
		if !ok {
			return nil, false
		}
		inodes = append(inodes, got...)
	}
	return inodes, true
}

// diagDump asks the kernel for the listening TCP sockets of one address
// family and keeps those on port that accept connections to 127.0.0.1.
func diagDump(family uint8, port int) ([]string, bool) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	req := inetDiagReqV2{family: family, protocol: syscall.IPPROTO_TCP, states: 1 << tcpListen}
	const hdrLen = syscall.SizeofNlMsghdr
	msg := make([]byte, hdrLen+int(unsafe.Sizeof(req)))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:6], sockDiagByFamily)
	binary.NativeEndian.PutUint16(msg[6:8], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(msg[8:12], 1) // sequence
	copy(msg[hdrLen:], unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req)))
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, false
	}
	var out []string
	buf := make([]byte, 32<<10)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, false
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, false
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return out, true
			case syscall.NLMSG_ERROR:
				return nil, false
			}
			if len(m.Data) < inetDiagMsgLen {
				continue
			}
			if inode, ok := acceptsLoopback(m.Data, port); ok {
				out = append(out, "socket:["+strconv.FormatUint(uint64(inode), 10)+"]")
			}
		}
	}
}

// acceptsLoopback reads one struct inet_diag_msg: family, state, timer,
// retrans, then the socket id (source port and destination port in
// network order, source and destination addresses of 16 bytes, the
// interface, the cookie), expires, rqueue, wqueue, uid and inode. It
// reports the inode of a socket listening on port that accepts
// connections to 127.0.0.1.
func acceptsLoopback(d []byte, port int) (uint32, bool) {
	if d[1] != tcpListen || int(binary.BigEndian.Uint16(d[4:6])) != port {
		return 0, false
	}
	var a netip.Addr
	switch d[0] {
	case syscall.AF_INET:
		a = netip.AddrFrom4([4]byte(d[8:12]))
	case syscall.AF_INET6:
		a = netip.AddrFrom16([16]byte(d[8:24]))
	default:
		return 0, false
	}
	if !a.IsUnspecified() && a.Unmap() != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return 0, false
	}
	return binary.NativeEndian.Uint32(d[68:72]), true
}
