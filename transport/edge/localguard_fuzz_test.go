package edge

import (
	"net"
	"testing"
)

// FuzzClassifyPeer checks that only loopback addresses are loopback and
// that nothing panics on odd IPs.
func FuzzClassifyPeer(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{10, 1, 2, 3})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := classifyPeer(raw)
		if c == peerLoopback && !net.IP(raw).IsLoopback() {
			t.Fatalf("%v classified as loopback", raw)
		}
	})
}
