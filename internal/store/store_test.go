package store

import (
	"net/netip"
	"testing"
)

func TestClassifyIP(t *testing.T) {
	for s, want := range map[string]IPClass{
		"127.0.0.1": IPLoopback, "::1": IPLoopback, "::ffff:127.0.0.1": IPLoopback,
		"10.1.2.3": IPPrivate, "192.168.0.9": IPPrivate, "172.16.5.5": IPPrivate, "fd00::1": IPPrivate, "fe80::1": IPPrivate,
		"8.8.8.8": IPPublic, "2001:4860::8888": IPPublic, "::ffff:1.1.1.1": IPPublic,
	} {
		if got := ClassifyIP(netip.MustParseAddr(s)); got != want {
			t.Errorf("%s: %s, want %s", s, got, want)
		}
	}
	if ClassifyIP(netip.Addr{}) != IPPrivate {
		t.Fatal("an unknown address must not count as public")
	}
}
