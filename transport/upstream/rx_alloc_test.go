//go:build linux && !race

package upstream

import (
	"io"
	"net"
	"testing"
)

// Allocation tests run without -race (the race detector allocates).

// armedRead writes msg from peer and reads it back through rx.
func armedRead(tb testing.TB, rx *rxConn, peer net.Conn, msg, buf []byte) {
	if _, err := peer.Write(msg); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(rx, buf); err != nil {
		tb.Fatal(err)
	}
	if rx.rx.IsZero() {
		tb.Fatal("the armed read recorded no receive time")
	}
}

// TestArmedReadAllocatesNothing: an armed read (recvmsg with the receive
// time) allocates nothing; its callback once made a closure per read that
// escaped with the variables it wrote (three allocations a read, at least
// one read an upstream answer).
func TestArmedReadAllocatesNothing(t *testing.T) {
	rx, peer := rxPair(t)
	msg, buf := make([]byte, 64), make([]byte, 64)
	if n := testing.AllocsPerRun(200, func() { armedRead(t, rx, peer, msg, buf) }); n != 0 {
		t.Fatalf("an armed read allocates %v times", n)
	}
}

// BenchmarkArmedRead is one armed read of a small answer over loopback
// (with the peer's write); -benchmem shows its allocations.
func BenchmarkArmedRead(b *testing.B) {
	rx, peer := rxPair(b)
	msg, buf := make([]byte, 512), make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		armedRead(b, rx, peer, msg, buf)
	}
}
