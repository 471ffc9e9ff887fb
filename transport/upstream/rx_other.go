//go:build !linux

package upstream

import (
	"net"
	"time"
)

// rxConn: receive times need SO_TIMESTAMPNS (Linux); elsewhere reads are
// the connection's own and an answer's time ends when the gateway read it.
type rxConn struct {
	net.Conn
	armed  bool
	rx, at time.Time
}

func wrapRx(c net.Conn) net.Conn { return c }
